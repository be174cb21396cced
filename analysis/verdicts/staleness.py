"""Staleness audit from updates.csv.

Staleness of an update = learner_version - 1 - rollout policy version
(`runrecord.schema.staleness`): 0 means the data came from the policy the update starts
from. From each row we take the worst case (oldest version, rollout_policy_version_min)
and the best case (newest version, rollout_policy_version_max).

Expected: `cleanba` architecture: 0 at update 1 and exactly 1 from update 2 on (both
cases); `sync`: 0 throughout; `async`: no rule (reported only). A violation names the
run and the update.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from analysis.inputs.cache import audit_table
from analysis.inputs.derived import run_records
from analysis.inputs.load import group_key
from analysis.scoring.scores import runs_by_suite
from analysis.scoring.tables import TableData
from runrecord import Run
from runrecord.exits import EXIT_FAILED, EXIT_OK, EXIT_UNDECIDED
from runrecord.words import counted

MAX_VIOLATIONS_LISTED = 5


@dataclass
class RunStaleness:
    run_id: str
    group: str
    architecture: str
    updates: int
    histogram: dict[int, int]  # worst-case staleness -> number of updates
    mean: float
    max: int
    rollouts: int
    mid_rollout_changes: int
    check: str  # "ok", "VIOLATION", or "n/a (...)"
    violations: list[str] = field(default_factory=list)
    num_violations: int = 0

    @property
    def mid_rollout_share(self) -> float:
        return self.mid_rollout_changes / self.rollouts if self.rollouts else float("nan")


@dataclass
class StalenessReport:
    runs: list[RunStaleness]
    groups: dict[str, dict[str, Any]]

    @property
    def checked(self) -> int:
        """Runs held to a rule (the others: no updates, or an architecture with none)."""
        return sum(r.check in ("ok", "VIOLATION") for r in self.runs)

    @property
    def verdict(self) -> str:
        """FAIL on a violation; PASS needs a checked run; else UNDECIDED (nothing checked
        is no evidence of a pass)."""
        if any(r.check == "VIOLATION" for r in self.runs):
            return "FAIL"
        return "PASS" if self.checked else "UNDECIDED"

    @property
    def exit_code(self) -> int:
        return {"PASS": EXIT_OK, "FAIL": EXIT_FAILED}.get(self.verdict, EXIT_UNDECIDED)

    def line(self) -> str:
        bad = [r for r in self.runs if r.check == "VIOLATION"]
        if bad:
            return (f"staleness: FAIL; {len(bad)} of {counted(self.checked, 'checked run')} violate "
                    f"the rule; first: {bad[0].violations[0]}")
        if not self.checked:
            why = Counter(r.check for r in self.runs)
            reasons = ", ".join(f"{n} {c}" for c, n in sorted(why.items())) or "no runs"
            return (f"staleness: UNDECIDED; no run could be checked ({reasons}): the rule "
                    "holds for cleanba and sync runs with updates.csv")
        return f"staleness: PASS; {counted(self.checked, 'run')} checked, {len(self.runs)} audited"

    def cells(self) -> dict[str, str]:
        """The verdict table's cells (the report): the worst staleness and its mean over
        every audited update; the "CI" says it is a count, not a sample; the margin is
        the rule of each checked architecture; the seeds, the runs checked."""
        every = pooled([replace(r, group="") for r in self.runs]).get("", {"histogram": {}})
        estimate = (f"max {max(every['histogram'])}, mean {every['mean']:.3f}"
                    if every["histogram"] else "n/a (no updates)")
        ruled = sorted({r.architecture for r in self.runs if r.check in ("ok", "VIOLATION")})
        return {"estimate": estimate, "ci": "exact: every update counted",
                "margin": "; ".join(RULE_TEXT[a] for a in ruled) or "no rule checked",
                "seeds": f"{self.checked} of {counted(len(self.runs), 'run')} checked"}

    def lines(self, per_run: bool = False) -> list[str]:
        """The audit as `python -m analysis staleness` prints it: a table per group (and
        per run), every violation, and the verdict line."""
        rows = [[g, d["runs"], d["updates"],
                 " ".join(f"{k}:{v}" for k, v in d["histogram"].items()),
                 f"{d['mean']:.3f}", f"{d['mid_rollout_share']:.3f}", d["violating_runs"]]
                for g, d in self.groups.items()]
        out = [TableData("st", "st", ["group", "runs", "updates", "staleness: count",
                                      "mean", "mid-rollout share", "violating runs"],
                         rows).markdown()]
        if per_run:
            out.append(TableData("runs", "runs", ["run", "group", "arch", "updates",
                                                  "staleness: count", "mid-rollout share",
                                                  "check"],
                                 [[r.run_id, r.group, r.architecture, r.updates,
                                   " ".join(f"{k}:{v}" for k, v in r.histogram.items()),
                                   f"{r.mid_rollout_share:.3f}", r.check]
                                  for r in self.runs]).markdown())
        for r in self.runs:
            out += [f"VIOLATION {v}" for v in r.violations]
            if r.num_violations > len(r.violations):
                out.append(f"  ... {r.num_violations - len(r.violations)} more in run "
                           f"{r.run_id}")
        return [*out, self.line()]

    def as_dict(self) -> dict[str, Any]:
        runs = []
        for r in self.runs:
            d = asdict(r)
            d["mid_rollout_share"] = r.mid_rollout_share
            runs.append(d)
        return {"verdict": self.verdict, "line": self.line(), "runs": runs,
                "groups": self.groups}


RULE_TEXT = {"cleanba": "cleanba: 0 at update 1, then exactly 1", "sync": "sync: 0"}
"""`_expected` in words, per architecture that has a rule."""


def _expected(architecture: str, update: np.ndarray) -> np.ndarray | None:
    if architecture == "cleanba":
        return np.where(update <= 1, 0, 1)
    if architecture == "sync":
        return np.zeros_like(update)
    return None


def _update_name(update: float) -> str:
    """An update's number for a violation (an empty cell is read as NaN: named, not a
    crash of the audit)."""
    return str(int(update)) if np.isfinite(update) else "(no number)"


def audit_run(run: Run, group: str = "") -> RunStaleness:
    u = audit_table(run)  # a cached run's columns come from the cache, unparsed
    arch = str(run.manifest.get("architecture"))
    n = len(u)
    if n == 0:
        return RunStaleness(run.run_id, group, arch, 0, {}, float("nan"), 0, 0, 0,
                            "n/a (no updates)")
    lv = u["learner_version"]
    worst = lv - 1 - u["rollout_policy_version_min"]
    best = lv - 1 - u["rollout_policy_version_max"]
    valid = np.isfinite(worst) & np.isfinite(best)
    hist = Counter(int(v) for v in worst[valid])
    rollouts = np.nansum(u["num_rollouts"]) if "num_rollouts" in u else 0
    changes = np.nansum(u["policy_changes_mid_rollout"]) if "policy_changes_mid_rollout" in u \
        else 0
    expected = _expected(arch, u["update"])
    violations: list[str] = []
    num_bad = 0
    if expected is None:
        check = f"n/a (no rule for architecture {arch!r})"
    elif not valid.all():
        check = "VIOLATION"
        first = _update_name(u["update"][~valid][0])
        violations.append(f"run {run.run_id} update {first}: rollout versions missing")
        num_bad = int((~valid).sum())
    else:
        bad = (worst != expected) | (best != expected)
        num_bad = int(bad.sum())
        check = "VIOLATION" if num_bad else "ok"
        for i in np.flatnonzero(bad)[:MAX_VIOLATIONS_LISTED]:
            violations.append(
                f"run {run.run_id} ({arch}) update {_update_name(u['update'][i])}: staleness "
                f"{int(best[i])}..{int(worst[i])}, expected {int(expected[i])}"
            )
    return RunStaleness(run.run_id, group, arch, n, dict(sorted(hist.items())),
                        float(np.mean(worst[valid])) if valid.any() else float("nan"),
                        int(np.max(worst[valid])) if valid.any() else 0,
                        int(rollouts), int(changes), check, violations, num_bad)


def _audit_row(run: Run) -> dict[str, Any]:
    """A run's audit as a JSON object (cached per run: analysis.inputs.derived)."""
    row = asdict(audit_run(run))
    row["histogram"] = [[k, v] for k, v in row["histogram"].items()]  # JSON keys are text
    return row


def _from_row(row: dict[str, Any], group: str) -> RunStaleness:
    return RunStaleness(**{**row, "group": group,
                           "histogram": {int(k): int(v) for k, v in row["histogram"]}})


def audit(runs: Sequence[Run], group_by: str | Sequence[str] = "layout.name") -> StalenessReport:
    """Per-run audit plus per-group pooled histogram, mean and mid-rollout share. Where the
    runs span several suites (all Atari games one suite, every other env its own), each
    group is split by suite and labelled "<suite>: <group>", as every other command splits:
    a Breakout run is not pooled with the CartPole runs of its layout."""
    by_suite = runs_by_suite(runs)
    prefix = len(by_suite) > 1
    per_run = [_from_row(row, f"{suite}: {group_key(r, group_by)}" if prefix
                         else group_key(r, group_by))
               for suite, suite_runs in by_suite.items()
               for r, row in zip(suite_runs, run_records(suite_runs, "staleness", _audit_row),
                                 strict=True)]
    return StalenessReport(per_run, pooled(per_run))


def pooled(per_run: Sequence[RunStaleness]) -> dict[str, dict[str, Any]]:
    """Per group: runs, updates, the pooled histogram and mean, the mid-rollout share and
    the violating runs."""
    groups: dict[str, dict[str, Any]] = {}
    for r in per_run:
        g = groups.setdefault(r.group, {"runs": 0, "updates": 0, "histogram": Counter(),
                                        "rollouts": 0, "mid_rollout_changes": 0,
                                        "violating_runs": 0})
        g["runs"] += 1
        g["updates"] += r.updates
        g["histogram"].update(r.histogram)
        g["rollouts"] += r.rollouts
        g["mid_rollout_changes"] += r.mid_rollout_changes
        g["violating_runs"] += r.check == "VIOLATION"
    for g in groups.values():
        hist = g["histogram"]
        total = sum(hist.values())
        g["histogram"] = dict(sorted(hist.items()))
        g["mean"] = sum(k * v for k, v in hist.items()) / total if total else float("nan")
        g["mid_rollout_share"] = (g["mid_rollout_changes"] / g["rollouts"]
                                  if g["rollouts"] else float("nan"))
    return groups
