"""What the Slurm controller says about the harness's jobs, asked without accounting.

submitit asks `sacct` only: on a cluster without slurmdbd it warns on every poll and sees
every job as UNKNOWN, which it counts as not done, so a job cancelled while pending is
waited for for ever. The harness asks `squeue -t all` first (the controller keeps a
finished job there for MinJobAge, 300 s by default) and `sacct` only for the jobs squeue no
longer lists, and stops asking sacct once it said accounting is off.
"""

from __future__ import annotations

import getpass
import subprocess

# Slurm job states after which nothing of the job runs any more (squeue/sacct names;
# sacct writes "CANCELLED by 0", hence the first word only).
TERMINAL = frozenset({
    "BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL",
    "OUT_OF_MEMORY", "PREEMPTED", "REVOKED", "SPECIAL_EXIT", "TIMEOUT",
})
COMMAND_TIMEOUT_S = 30.0


def _run(argv: list[str]) -> str | None:
    """stdout of a Slurm command, or None when it failed (controller down, no accounting)."""
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return p.stdout if p.returncode == 0 else None


def parse_states(text: str) -> dict[str, str]:
    """'JOBID|STATE' lines (squeue -o '%i|%T' -r, sacct -P -o JobID,State) -> {id: state}.
    Array tasks are 'ARRAYID_INDEX', as submitit names them; steps (ID.batch) are skipped."""
    states: dict[str, str] = {}
    for line in text.splitlines():
        job_id, _, state = line.strip().partition("|")
        if job_id and state and "." not in job_id:
            states[job_id] = state.split()[0].upper()
    return states


class Queue:
    """Job states by asking the controller; remembers whether accounting answers."""

    def __init__(self) -> None:
        self.accounting: bool | None = None  # unknown until sacct is first needed

    def states(self, job_ids: list[str]) -> dict[str, str] | None:
        """{job id: state} of those of `job_ids` the cluster still knows; None when squeue
        itself failed (the controller is unreachable: nothing can be concluded)."""
        out = _run(["squeue", "-h", "-t", "all", "-r", "-u", getpass.getuser(),
                    "-o", "%i|%T"])
        if out is None:
            return None
        listed = parse_states(out)
        states = {j: listed[j] for j in job_ids if j in listed}
        missing = [j for j in job_ids if j not in states]
        if missing and self.accounting is not False:
            argv = ["sacct", "-n", "-X", "-P", "-o", "JobID,State"]
            for j in sorted({m.split("_")[0] for m in missing}):
                argv += ["-j", j]
            acct = _run(argv)
            self.accounting = acct is not None
            if acct is not None:
                found = parse_states(acct)
                states.update({j: found[j] for j in missing if j in found})
        return states

    def pending_reason(self, job_id: str) -> str:
        """Why a pending job waits, as squeue says it (e.g. ReqNodeNotAvail...)."""
        out = _run(["squeue", "-h", "-r", "-j", job_id.split("_")[0], "-o", "%i|%r"])
        for line in (out or "").splitlines():
            listed, _, reason = line.strip().partition("|")
            if listed == job_id:
                return reason
        return ""


def cancel(job_ids: list[str]) -> bool:
    """scancel the jobs (running ones get SIGTERM, then SIGKILL after KillWait)."""
    if not job_ids:
        return True
    return _run(["scancel", *job_ids]) is not None
