"""The child process of every step of `benchmarks/gpu_suite.py` (internal; not a user tool).

    python benchmarks/measured_run.py SPEC.json

SPEC names a task and its settings and where to write the result (JSON). Each step runs in
its own process so the suite's own process never starts a JAX backend (on a GPU it would
take the device's memory from the runs it measures) and so each run's peak RSS is its own.

Tasks: `environment` (versions, devices, CPU), `envpool-raw` and `actor-overhead`
(cleanba.tools.throughput), `speed-bound` (cleanba.tools.speed_bound), `train` (our trainer, `python -m MODULE ARGS`) and `reference` (the
patched reference script). For the last two a sampler thread reads the device memory
(`Device.memory_stats`, GPU) once the trainer has started JAX, and the wall-clock time of
every learner update is recorded: our trainer's `RunWriter.log_update` calls (wrapped
here, nothing in the trainer changes), or the reference's `losses/loss` scalars. The
result file is rewritten after every update, so a run cut off still leaves its figures.
"""

from __future__ import annotations

import json
import os
import platform
import runpy
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def write_json(path: str, data: dict) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=2)
    os.replace(tmp, path)


def nvidia_smi() -> list[dict[str, str]]:
    fields = "name,memory.total,driver_version"
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [dict(zip(fields.split(","), (x.strip() for x in line.split(",")), strict=False))
            for line in out.strip().splitlines()]


def environment() -> dict[str, Any]:
    import envpool
    import jax
    import jaxlib

    from runrecord.provenance import cpu_model

    info: dict[str, Any] = {
        "python": platform.python_version(), "jax": jax.__version__,
        "jaxlib": jaxlib.__version__, "envpool": envpool.__version__,
        "cpu_model": cpu_model(), "cpu_cores": os.cpu_count(),
        "cpu_cores_usable": len(os.sched_getaffinity(0)),
        "load_average": list(os.getloadavg()), "nvidia_smi": nvidia_smi(),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
    }
    devices = []
    for d in jax.local_devices():
        stats = d.memory_stats() or {}
        devices.append({"platform": d.platform, "kind": d.device_kind,
                        "memory_limit_bytes": stats.get("bytes_limit")})
    info["devices"] = devices
    try:
        from jax._src.lib import cuda_versions
    except ImportError:
        cuda_versions = None
    if cuda_versions is not None:
        for name in ("cuda_runtime_get_version", "cuda_driver_get_version", "cudnn_get_version",
                     "cublas_get_version"):
            fn = getattr(cuda_versions, name, None)
            if fn is not None:
                try:
                    info[name.replace("_get_version", "")] = fn()
                except Exception as exc:  # noqa: BLE001 - a version we cannot read is noted
                    info[name.replace("_get_version", "")] = f"unreadable: {exc}"
    return info


class Measurer:
    """Update times and device memory of the run in this process, saved after each update."""

    def __init__(self, out: str, launched_at: float):
        self.out = out
        self.data: dict[str, Any] = {"launched_at": launched_at, "update_times": [],
                                     "device_memory": None}
        self.lock = threading.Lock()

    def sample_memory(self) -> None:
        from jax._src import xla_bridge

        if not xla_bridge.backends_are_initialized():
            return  # never start JAX here: the trainer sets its XLA flags first
        import jax

        peak, limit, kinds = 0, 0, set()
        found = False
        for d in jax.local_devices():
            stats = d.memory_stats()
            kinds.add(d.device_kind)
            if stats:
                found = True
                peak = max(peak, int(stats.get("peak_bytes_in_use", 0)))
                limit = max(limit, int(stats.get("bytes_limit", 0)))
        with self.lock:
            self.data["device_kinds"] = sorted(kinds)
            if found:
                self.data["device_memory"] = {"peak_bytes_in_use": peak, "bytes_limit": limit}

    def update_done(self) -> None:
        with self.lock:
            self.data["update_times"].append(time.time())
        self.save()

    def save(self) -> None:
        self.sample_memory()
        with self.lock:
            write_json(self.out, self.data)

    def sample_forever(self, interval_s: float = 0.5) -> None:
        while True:
            time.sleep(interval_s)
            try:
                self.save()
            except Exception:  # noqa: BLE001 - a failed sample must not stop the run
                pass


def run_measured(spec: dict[str, Any]) -> None:
    measurer = Measurer(spec["out"], spec["launched_at"])
    measurer.save()
    threading.Thread(target=measurer.sample_forever, daemon=True).start()
    if spec["task"] == "train":
        from runrecord import writer

        original = writer.RunWriter.log_update

        def log_update(self: Any, row: Any) -> None:
            original(self, row)
            measurer.update_done()

        writer.RunWriter.log_update = log_update  # type: ignore[method-assign,assignment]
        sys.argv = [spec["module"], *spec["argv"]]
        target = lambda: runpy.run_module(spec["module"], run_name="__main__")  # noqa: E731
    else:
        os.environ["CLEANBA_BENCH_SCALARS"] = spec["scalars"]
        sys.path.insert(0, str(Path(spec["script"]).parent))
        os.chdir(Path(spec["script"]).parent)
        sys.argv = [spec["script"], *spec["argv"]]
        target = lambda: runpy.run_path(spec["script"], run_name="__main__")  # noqa: E731
    code = 0
    try:
        target()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    measurer.save()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # the reference leaves non-daemon actor threads waiting


def main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    task = spec["task"]
    if task == "environment":
        write_json(spec["out"], environment())
    elif task == "envpool-raw":
        from cleanba.tools import throughput

        rate = throughput.raw_env_rate(spec["env_id"], spec["num_envs"], spec["num_threads"],
                                       spec["steps_per_thread"], backend="envpool")
        write_json(spec["out"], {"steps_per_s": rate.steps_per_s, "env_steps": rate.env_steps,
                                 "seconds": rate.seconds})
    elif task == "actor-overhead":
        write_json(spec["out"], actor_overhead(spec))
    elif task in ("train", "reference"):
        run_measured(spec)
    elif task == "speed-bound":  # the GPU campaign's chunk (c) (benchmarks/campaign_lease.py)
        from cleanba.tools.speed_bound import SpeedBoundConfig, measure

        write_json(spec["out"], measure(SpeedBoundConfig(**spec["config"])))
    else:
        raise SystemExit(f"measured_run: unknown task {task!r}")


def actor_overhead(spec: dict[str, Any]) -> dict[str, Any]:
    """Raw EnvPool and no-op actor loop, alternated `repeats` times per (envs, threads)."""
    from cleanba.tools import throughput

    rows = []
    for num_envs, num_threads in spec["grid"]:
        # the same env steps per thread for both: the actor loop's rollouts after its warm-up
        timed_rollouts = max(1, -(-spec["timed_steps"] // (num_envs * spec["num_steps"])))
        rollouts = throughput.WARMUP_ROLLOUTS + timed_rollouts
        steps_per_thread = timed_rollouts * spec["num_steps"]
        raw, loop = [], []
        for _ in range(spec["repeats"]):
            raw.append(throughput.raw_env_rate(spec["env_id"], num_envs, num_threads,
                                               steps_per_thread, backend="envpool"))
            loop.append(throughput.actor_loop_rate(spec["env_id"], num_envs, num_threads,
                                                   spec["num_steps"], rollouts))
        rows.append({"num_envs": num_envs, "num_threads": num_threads,
                     "raw": [r.steps_per_s for r in raw],
                     "actor_loop": [a.steps_per_s for a in loop],
                     "ratios": [a.steps_per_s / r.steps_per_s for a, r in zip(loop, raw, strict=True)],
                     "raw_per_cpu_s": [r.steps_per_cpu_s for r in raw],
                     "actor_loop_per_cpu_s": [a.steps_per_cpu_s for a in loop],
                     "cpu_ratios": [a.steps_per_cpu_s / r.steps_per_cpu_s
                                    for a, r in zip(loop, raw, strict=True)],
                     "env_steps_each": num_envs * steps_per_thread,
                     "load_average": list(os.getloadavg())})
        write_json(spec["out"], {"rows": rows})  # a run cut off keeps the settings done
    return {"rows": rows}


if __name__ == "__main__":
    main(sys.argv[1])
