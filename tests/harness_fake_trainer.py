"""Test-only trainer for the harness's mechanics tests (locks, kill -9, crashes).

Follows the trainer command-line contract (PRESET positional, --env-id, --seed, ...,
--run-dir, --sweep, --run-id; exit 0/1/2/130) and writes a real run record with
runrecord.RunWriter, but trains nothing: it logs `--updates` updates, sleeping
`--sleep-s` before each. Extra knobs (passed as sweep overrides):
  --fail-seeds 2 3     seeds that raise an error after the first update (exit 1)
  --hard-crash-seeds   seeds that die with SIGKILL-like os._exit(137) mid-run (no record)
  --ledger FILE        append "<run_id> <pid>" when a run completes (counts completions)
  --return-offset X    added to every episode return (a "better" or "worse" version)
  --return-jitter X    added: X times a fixed number in [-1, 1) per seed (a layout's runs
                       of a seed are then not another layout's plus a constant, which the
                       pairing by seed would decide at once)
  --return-scale X     each update adds X to the return (a learning curve: X (k-1) + seed;
                       default 1); 0: a learner that does not learn
  --unavailable-seeds  seeds that behave like a missing baseline (record skipped, exit 3)
  --fast-file FILE     once FILE exists, updates stop sleeping (a test ends a long run
                       without changing its definition, hence its run id)
The environment variable FAKE_TRAINER_HOLD_AFTER=K[@SEED][,...] (not a flag: the run id
stays the same) makes it (the run of SEED, or every run) print "holding after update K"
once update K is written and wait there (at most HOLD_MAX_S) for the signal or kill a test
sends mid-run.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runrecord import RunWriter, parse_layout, write_skipped  # noqa: E402

HOLD_MAX_S = 120.0
PEER_WAIT_S = 60.0


def holds_after(update: int, seed: int) -> bool:
    items = os.environ.get("FAKE_TRAINER_HOLD_AFTER", "").split(",")
    return str(update) in items or f"{update}@{seed}" in items


def wait_for_peers(run_dir: Path, num_processes: int) -> None:
    """Process 0 of a d>1 run waits (at most PEER_WAIT_S) until every peer has started, as
    jax.distributed's start-up does: a peer's Slurm task that starts late then still finds
    the run in flight, not completed without it."""
    marks = [run_dir / f".fake-peer-{i}" for i in range(1, num_processes)]
    deadline = time.monotonic() + PEER_WAIT_S
    while not all(m.exists() for m in marks) and time.monotonic() < deadline:
        time.sleep(0.05)
    for m in marks:
        m.unlink(missing_ok=True)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("preset")
    p.add_argument("--env-id", required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--total-timesteps", type=int, required=True)
    p.add_argument("--architecture", default="cleanba")
    p.add_argument("--actor-device-ids", type=int, nargs="+", default=[0])
    p.add_argument("--learner-device-ids", type=int, nargs="+", default=[0])
    p.add_argument("--distributed", action="store_true")
    p.add_argument("--coordinator-address", default="")
    p.add_argument("--num-processes", type=int, default=1)
    p.add_argument("--process-id", type=int, default=0)
    p.add_argument("--run-dir", required=True)
    p.add_argument("--sweep", default=None)
    p.add_argument("--run-id", required=True)
    p.add_argument("--updates", type=int, default=5)
    p.add_argument("--sleep-s", type=float, default=0.05)
    p.add_argument("--fail-seeds", type=int, nargs="*", default=[])
    p.add_argument("--hard-crash-seeds", type=int, nargs="*", default=[])
    p.add_argument("--ledger", default="")
    p.add_argument("--return-offset", type=float, default=0.0)
    p.add_argument("--return-jitter", type=float, default=0.0)
    p.add_argument("--return-scale", type=float, default=1.0)
    p.add_argument("--unavailable-seeds", type=int, nargs="*", default=[])
    p.add_argument("--fast-file", default="")
    args = p.parse_args()  # exits 2 on bad arguments, as the contract says

    run_dir = Path(args.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if args.process_id != 0:  # peers of a d>1 run: only process 0 writes the record
        (run_dir / f".fake-peer-{args.process_id}").touch()
        time.sleep(args.updates * args.sleep_s)
        return 0
    wait_for_peers(run_dir, args.num_processes)
    layout = parse_layout(
        f"a{','.join(map(str, args.actor_device_ids))}-"
        f"l{','.join(map(str, args.learner_device_ids))}-d{args.num_processes}"
    )
    manifest = {
        "run_id": args.run_id, "sweep": args.sweep, "system": "fake-ppo",
        "architecture": args.architecture, "env_id": args.env_id, "seed": args.seed,
        "layout": {**layout.to_dict(), "devices": ["cpu"], "num_cpus": 1},
        "hyperparameters": {"updates": args.updates, "sleep_s": args.sleep_s},
        "env_protocol": {}, "provenance": {"pid": os.getpid(),
                                           "xla_flags": os.environ.get("XLA_FLAGS", "")},
    }
    if args.seed in args.unavailable_seeds:  # a baseline whose checkout is missing
        write_skipped(args.run_dir, manifest, "fake baseline not installed")
        return 3
    writer = RunWriter(args.run_dir, manifest, extra_update_columns=["loss_total"])
    (Path(args.run_dir) / f"pid-{os.getpid()}").write_text("")

    def on_sigint(signum, frame):
        writer.finish("interrupted", error={"type": "KeyboardInterrupt", "message": "SIGINT",
                                            "traceback": ""})
        sys.exit(130)

    signal.signal(signal.SIGINT, on_sigint)
    steps_per_update = max(1, args.total_timesteps // args.updates)
    t0 = time.monotonic()
    for k in range(1, args.updates + 1):
        if not (args.fast_file and os.path.exists(args.fast_file)):
            time.sleep(args.sleep_s)
        steps = k * steps_per_update
        wall = time.monotonic() - t0
        ret = (float(k + args.seed) + args.return_offset if args.return_scale == 1.0 else
               args.return_scale * (k - 1) + args.seed + args.return_offset)
        ret += args.return_jitter * (args.seed * 2654435761 % 1000 / 500 - 1)
        writer.log_episode({"env_steps": steps, "frames": steps, "wall_time_s": wall,
                            "env_index": 0, "episode_return": ret, "episode_length": 10})
        writer.log_update({"update": k, "env_steps": steps, "frames": steps,
                           "wall_time_s": wall, "learner_version": k + 1,
                           "rollout_policy_version_min": k, "rollout_policy_version_max": k,
                           "num_rollouts": 1, "policy_changes_mid_rollout": 0, "sps": 1.0,
                           "loss_total": 0.5, "rollout_queue_get_s": 0.0,
                           "param_queue_get_s": 0.0, "params_checksum": ""})
        if k == 1 and args.seed in args.fail_seeds:
            try:
                raise RuntimeError(f"fake trainer told to fail on seed {args.seed}")
            except RuntimeError as e:
                writer.finish("failed", error=e)
                print(f"error: {e}", file=sys.stderr)
                return 1
        if k == 2 and args.seed in args.hard_crash_seeds:
            os._exit(137)
        if k < args.updates and holds_after(k, args.seed):
            print(f"holding after update {k}", flush=True)
            time.sleep(HOLD_MAX_S)  # a test's signal ends it (SIGINT: the handler above)
    steps = args.updates * steps_per_update
    writer.finish("completed", summary={"env_steps": steps, "frames": steps,
                                        "wall_time_s": time.monotonic() - t0, "mean_sps": 1.0,
                                        "updates": args.updates, "episodes": args.updates})
    if args.ledger:
        with open(args.ledger, "a") as f:
            f.write(f"{args.run_id} {os.getpid()}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
