"""The staleness audit users run is one function whoever calls it: `audit_run` on a run
held in memory, `audit` (what `python -m analysis staleness`, the analysis report, the
harness report and certify run) with its per-run rows computed or read back from the
derived cache as JSON, and the same runs written as run records and read back parsed,
from the analysis cache's stored columns (cold and warm), by the CLI and by the report,
give the same per-run checks, violations and verdict line on 10,000 random cases: lag 0,
1, 2 and mixed, gaps, NaN versions, missing optional columns, runs with no rows, cleanba,
sync, IMPALA-style async and an unknown architecture, several runs per group."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from analysis.cli import main
from analysis.inputs.cache import CACHE_DIR, DERIVED_DIR, CachedRun
from analysis.inputs.load import group_key, load_runs
from analysis.output.report import build_report_assets
from analysis.scoring.grouping import group_keys
from analysis.verdicts.staleness import (
    StalenessReport,
    _audit_row,
    _from_row,
    audit,
    audit_run,
    pooled,
)
from runrecord import Run, schema
from runrecord.reader import Table

CASES = 10_000
ON_DISK = 150  # of them also written as run records and read through every file path
THROUGH_REPORT = 3  # of those, also through the report (figures make it the costly one)
ARCHS = ("cleanba", "sync", "async", "impala")
KEYS = group_keys("layout.name")  # as the CLI and the report group (system, architecture)
KINDS = ("lag0", "lag1", "cleanba", "lag2", "mixed", "gaps", "nan", "empty", "no optional",
         "newer", "no update number")


def _versions(rng: np.random.Generator, kind: str, arch: str, n: int) -> dict:
    update = np.arange(1.0, n + 1)
    if kind == "gaps":  # updates lost from the record (e.g. a torn file repaired)
        update = np.sort(rng.choice(np.arange(1.0, 3 * n + 2), n, replace=False))
    lv = update + 1
    lag = {"lag0": np.zeros(n), "lag1": np.ones(n), "lag2": np.full(n, 2.0),
           "newer": np.full(n, -1.0),  # data from a policy the learner has not made
           "cleanba": np.where(update <= 1, 0.0, 1.0)}.get(kind)
    if lag is None:  # mixed, IMPALA-style: each batch spans several versions
        lag = rng.integers(0, 3, n).astype(float)
        if arch == "cleanba" and rng.random() < 0.5:
            lag = np.where(update <= 1, 0.0, 1.0)
    spread = rng.integers(0, 2, n) if kind == "mixed" or arch == "async" else np.zeros(n)
    vmin = lv - 1 - lag - spread
    vmax = lv - 1 - lag
    if kind == "nan":
        (vmin if rng.random() < 0.5 else vmax)[int(rng.integers(n))] = np.nan
    if kind == "no update number":  # an empty update cell; the versions are recorded
        update = update.copy()
        update[int(rng.integers(n))] = np.nan
    cols = {"update": update, "learner_version": lv, "rollout_policy_version_min": vmin,
            "rollout_policy_version_max": vmax}
    if kind != "no optional":
        cols["num_rollouts"] = rng.integers(1, 9, n).astype(float)
        cols["policy_changes_mid_rollout"] = np.minimum(spread * rng.integers(0, 3, n),
                                                        cols["num_rollouts"])
    return cols


def _case(rng: np.random.Generator, i: int) -> list[Run]:
    runs = []
    for j in range(int(rng.integers(1, 4))):
        arch = str(rng.choice(ARCHS))
        kind = str(rng.choice(KINDS))
        n = 0 if kind == "empty" else int(rng.integers(1, 7))
        cols = _versions(rng, kind, arch, n)
        manifest = {"run_id": f"c{i}-r{j}", "system": "cleanba-impala", "architecture": arch,
                    "env_id": "CartPole-v1", "seed": j + 1, "status": schema.COMPLETED,
                    "layout": {"name": f"g{int(rng.integers(2))}"}}
        runs.append(Run(Path(manifest["run_id"]), manifest, None,  # type: ignore[arg-type]
                        Table(cols, n)))
    return runs


def _outcome(rep: StalenessReport) -> tuple:
    """Everything a caller shows of an audit: verdict, exit code, lines, cells, JSON."""
    return (rep.verdict, rep.exit_code, rep.lines(per_run=True), rep.cells(),
            json.dumps(rep.as_dict(), sort_keys=True, default=str))


def _direct(runs: list[Run]) -> StalenessReport:
    per_run = [audit_run(r, group_key(r, KEYS)) for r in runs]
    return StalenessReport(per_run, pooled(per_run))


def _read_back(runs: list[Run]) -> StalenessReport:
    """As from the derived cache: each run's row stored as JSON and read back."""
    rows = [json.loads(json.dumps(_audit_row(r))) for r in runs]
    per_run = [_from_row(row, group_key(r, KEYS))
               for r, row in zip(runs, rows, strict=True)]
    return StalenessReport(per_run, pooled(per_run))


def _null_nan(obj: object) -> object:
    if isinstance(obj, dict):
        return {k: _null_nan(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_null_nan(v) for v in obj]
    return None if isinstance(obj, float) and obj != obj else obj


def _write(run: Run, root: Path) -> None:
    d = root / run.run_id
    d.mkdir(parents=True)
    (d / schema.MANIFEST_FILE).write_text(json.dumps({"schema_version": 1, **run.manifest}))
    (d / schema.EPISODES_FILE).write_text(",".join(schema.EPISODE_COLUMNS)
                                          + "\n1,1,0.1,0,10.0,10\n")
    u = run.updates
    lines = [",".join(schema.UPDATE_COLUMNS[:-1])]
    for k in range(len(u)):
        lines.append(",".join("" if c not in u or np.isnan(u[c][k]) else repr(float(u[c][k]))
                              for c in schema.UPDATE_COLUMNS[:-1]))
    (d / schema.UPDATES_FILE).write_text("\n".join(lines) + "\n")


def _by_case(runs: list[Run]) -> dict[str, list[Run]]:
    out: dict[str, list[Run]] = {}
    for r in runs:
        out.setdefault(r.run_id.split("-")[0], []).append(r)
    return out


def test_every_path_to_a_staleness_verdict_agrees(tmp_path, capsys):
    rng = np.random.default_rng(2026_12_07)
    cases = [_case(rng, i) for i in range(CASES)]
    seen: dict[str, int] = {}
    disagree = []
    for i, runs in enumerate(cases):
        got = _outcome(audit(runs, KEYS))
        seen[got[0]] = seen.get(got[0], 0) + 1
        for name, path in (("direct", _direct), ("read back", _read_back)):
            if _outcome(path(runs)) != got:
                disagree.append((i, name))
    assert disagree == [], f"{len(disagree)} of {CASES} cases differ, e.g. {disagree[:3]}"
    assert all(seen.get(v, 0) > CASES // 20 for v in ("PASS", "FAIL", "UNDECIDED")), seen

    on_disk = cases[:ON_DISK]
    root = tmp_path / "runs"
    for runs in on_disk:
        for r in runs:
            _write(r, root / r.run_id.split("-")[0])
    expected = [_outcome(audit(runs, KEYS)) for runs in on_disk]
    rows = root / CACHE_DIR / DERIVED_DIR / "staleness.json"
    for label, use_cache in (("parsed", False), ("cache, cold", True), ("cache, warm", True),
                             ("cache, warm, rows from its stored columns", True)):
        if label.endswith("stored columns"):
            rows.unlink()  # audit_run reads the cache entry's columns (CachedRun.audit_table)
        loaded = _by_case(load_runs([root], use_cache=use_cache).included)
        for i, want in enumerate(expected):
            runs = loaded.get(f"c{i}", [])
            assert [r.run_id for r in runs] == [r.run_id for r in on_disk[i]], (label, i)
            assert _outcome(audit(runs, KEYS)) == want, (label, i)
        assert rows.exists() == use_cache, label
        if label.startswith("cache, warm"):  # nothing parsed: the cache answered
            assert all(isinstance(r, CachedRun) and "updates" not in vars(r)
                       for runs in loaded.values() for r in runs), label
    for i, want in enumerate(expected):  # what the CLI (and certify, which runs it) prints
        capsys.readouterr()
        code = main(["staleness", str(root / f"c{i}"), "--per-run", "--group-by",
                     "layout.name"])
        out = capsys.readouterr().out
        assert code == want[1] and out.endswith("\n".join(want[2]) + "\n"), (i, out)
    for i, want in enumerate(expected[:THROUGH_REPORT]):  # the analysis and harness report
        res = build_report_assets([root / f"c{i}"], tmp_path / f"report{i}")
        v = next(v for v in res["verdicts"] if v["kind"] == "staleness")
        assert (v["verdict"], v["line"], v["cells"]) == (want[0], want[2][-1], want[3]), i
        stored = json.loads(Path(v["json"]).read_text())  # written with NaN as null
        assert stored == _null_nan(json.loads(want[4])), i

