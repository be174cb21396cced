"""Published per-seed runs from openrlbenchmark's cache (analysis.importers.orb) against ours.

The cache is written exactly as openrlbenchmark 0.3.1's CachedRun writes it
(<cache>/<entity>/<project>/<run id>/run_df.csv via pandas DataFrame.to_csv of the
scan_history rows, and run.json with id, name, state, url, project, entity, config, tags,
path, user), named as the Cleanba projects are.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pandas as pd
from synthetic_records import final_score_history, write_final_score_run

from analysis.cli import main
from analysis.importers.declare import declaration
from analysis.importers.orb import load_orb_cache, read_cached_run, write_cached_run

ENTITY, PROJECT, EXP = "openrlbenchmark", "cleanba", "cleanba_impala_a0_l0_d1_cpu10"
# Seeds 1 HNS apart at most (per-seed IQM sd ~0.03 HNS): equal data passes at delta 0.16.
FINALS = {("Breakout-v5", 1): 480.0, ("Breakout-v5", 2): 481.0, ("Breakout-v5", 3): 482.5,
          ("Pong-v5", 1): 18.9, ("Pong-v5", 2): 19.0, ("Pong-v5", 3): 19.2}


def _history_rows(final: float, total_frames: int) -> list[dict]:
    """wandb scan_history rows: one per logged step with the return, plus rows that log
    only charts/SPS (no return: dropped, as openrlbenchmark's dropna does)."""
    h = final_score_history(final, total_frames=total_frames)
    rows = []
    for i, (step, ret, wall) in enumerate(zip(h["env_steps"], h["episode_return"],
                                              h["wall_time_s"], strict=True)):
        rows.append({"_step": 2 * i, "global_step": int(step), "_runtime": float(wall),
                     "charts/avg_episodic_return": float(ret), "_timestamp": 1.7e9 + wall})
        rows.append({"_step": 2 * i + 1, "global_step": int(step), "charts/SPS": 9000.0,
                     "_runtime": float(wall)})
    return rows


def write_orb_cache(cache: Path, finals=FINALS, state: str = "finished") -> list[str]:
    """openrlbenchmark's layout, written as its CachedRun does (pandas + json.dump)."""
    ids = []
    for (game, seed), final in finals.items():
        rid = f"{game[:4].lower()}{seed}x7q"
        run_dir = cache / ENTITY / PROJECT / rid
        run_dir.mkdir(parents=True)
        pd.DataFrame(_history_rows(final, 200_000_000)).to_csv(run_dir / "run_df.csv")
        meta = {"id": rid, "name": f"{game}__{EXP}__{seed}__1680000000", "state": state,
                "url": f"https://wandb.ai/{ENTITY}/{PROJECT}/runs/{rid}", "project": PROJECT,
                "entity": ENTITY, "config": {"env_id": game, "exp_name": EXP, "seed": seed,
                                             "total_timesteps": 50_000_000},
                "tags": ["v0.1.0", "cleanba"], "path": [ENTITY, PROJECT, rid],
                "user": {"username": "vwxyzjn", "name": "Costa Huang"}}
        with open(run_dir / "run.json", "w") as f:
            json.dump(meta, f)
        ids.append(rid)
    return ids


def write_native(root: Path, total_frames: int = 200_000_000) -> None:
    """The same scores as our own run records (cleanba-impala on a0-l0-d1)."""
    for (game, seed), final in FINALS.items():
        write_final_score_run(root, final=final, env_id=game, seed=seed,
                              total_frames=total_frames)


def test_cache_reads_with_provenance_and_imported_marks(tmp_path, capsys):
    cache = tmp_path / "cache"
    ids = write_orb_cache(cache)
    # A crashed run and a legacy-format run are left out, each with its reason.
    write_orb_cache(tmp_path / "crashed", {("Pong-v5", 4): 10.0}, state="crashed")
    crashed = next((tmp_path / "crashed").rglob("run.json")).parent
    crashed.rename(cache / ENTITY / PROJECT / crashed.name)
    legacy = cache / ENTITY / PROJECT / "legacy1"
    legacy.mkdir()
    (legacy / "run.json").write_text(json.dumps({"_attrs": {}}))
    (legacy / "run_df.csv").write_text(",global_step\n0,1\n")

    rs = load_orb_cache(cache, declaration("paper", 200e6))
    assert len(rs.included) == 6
    reasons = {x.run_id: x.reason for x in rs.left_out}
    assert any("wandb state crashed" in r for r in reasons.values())
    assert any("legacy cache format" in r for r in reasons.values())
    run = next(r for r in rs.included if r.manifest["seed"] == 1
               and r.manifest["env_id"] == "Breakout-v5")
    p = run.manifest["imported"]
    assert (p["entity"], p["project"], p["wandb_run_id"]) == (ENTITY, PROJECT, ids[0])
    assert p["url"] == f"https://wandb.ai/{ENTITY}/{PROJECT}/runs/{ids[0]}"
    assert p["tags"] == ["v0.1.0", "cleanba"] and p["metric"] == "charts/avg_episodic_return"
    assert run.manifest["system"] == EXP and run.manifest["env_protocol"]["frame_skip"] == 4
    assert len(run.episodes) == 150  # SPS-only rows dropped
    assert np.array_equal(run.episodes["frames"], 4 * run.episodes["env_steps"])

    assert main(["summary", "--orb", str(cache), "--return-column",
                 "charts/avg_episodic_return", "--orb-protocol", "paper"]) == 0
    out = capsys.readouterr().out
    assert f"imported: wandb:{ENTITY}/{PROJECT}/{ids[0]} Breakout-v5 seed 1" in out
    assert f"https://wandb.ai/{ENTITY}/{PROJECT}/runs/{ids[0]}" in out
    assert "protocol paper, frame budget unknown (declared on import)" in out
    assert f"imported:{ENTITY}/{PROJECT}" in out  # in the group label of the summary table


def test_imported_vs_same_data_as_native_records_is_pass(tmp_path, capsys):
    cache, mine = tmp_path / "cache", tmp_path / "mine"
    write_orb_cache(cache)
    write_native(mine)
    out = tmp_path / "out"
    base = ["reproduce", "--runs", str(mine), "--orb", str(cache), "--out", str(out)]
    assert main(base) == 2  # protocol undeclared: unknown
    err = capsys.readouterr().err
    assert "repeat_action_probability: 'unknown' (imported" in err
    assert "not declared on import" in err and "--orb-protocol paper" in err
    assert main([*base, "--orb-protocol", "paper"]) == 2  # budget undeclared
    assert "frame_budget" in capsys.readouterr().err
    assert not out.exists()
    declared = [*base, "--orb-protocol", "paper", "--orb-frames", "200e6"]
    assert main([*declared, "--games", "Pongg"]) == 2  # an unknown game: nearest matches
    assert "unknown game 'Pongg'" in (err := capsys.readouterr().err) and "Pong-v5" in err
    assert not out.exists()
    assert main(declared) == 0
    text = capsys.readouterr().out
    assert "PASS" in text and "3 vs 3 independent seeds" in text and "2 tasks" in text
    assert "note: power: if yours truly equals the published runs, PASS has probability" in text
    assert f"vs reference {EXP} / imported:{ENTITY}/{PROJECT}" in text and "/ None /" not in text
    assert text.count("imported: wandb:") == 6
    data = json.loads((out / "reproduce_runs.json").read_text())
    assert data["comparisons"][0]["verdict"] == "PASS" and data["frames_note"] == ""
    assert (out / "reproduce_iqm_vs_frames.png").exists()


def test_shorter_user_runs_are_compared_on_their_frame_range(tmp_path, capsys):
    cache, mine = tmp_path / "cache", tmp_path / "mine"
    write_orb_cache(cache)
    write_native(mine, total_frames=50_000_000)
    base = ["reproduce", "--runs", str(mine), "--orb", str(cache), "--orb-protocol", "paper",
            "--orb-frames", "200e6"]
    assert main(base) == 2
    assert "50,000,000" in capsys.readouterr().err
    assert main([*base, "--allow-budget-mismatch"]) == 1  # the synthetic runs are not the imported ones
    text = capsys.readouterr().out
    assert "compared on your frame range 0..50,000,000" in text
    line = next(x for x in text.splitlines() if x.startswith("equivalence"))
    assert "compared on your frame range" in line
    assert ": DIFFERENT; " in line


def test_our_cache_writer_matches_openrlbenchmarks(tmp_path):
    """write_cached_run (the wandb path's writer) gives what pandas' to_csv gives, byte for
    byte on these rows (ints, floats, missing values)."""
    theirs = tmp_path / "theirs"
    (rid,) = write_orb_cache(theirs, {("Pong-v5", 1): 19.0})
    src = theirs / ENTITY / PROJECT / rid
    meta = json.loads((src / "run.json").read_text())
    ours_dir = write_cached_run(tmp_path / "ours", meta, _history_rows(19.0, 200_000_000))
    assert ours_dir == tmp_path / "ours" / ENTITY / PROJECT / rid
    a, b = pd.read_csv(src / "run_df.csv"), pd.read_csv(ours_dir / "run_df.csv")
    pd.testing.assert_frame_equal(a, b)
    assert (src / "run_df.csv").read_bytes() == (ours_dir / "run_df.csv").read_bytes()
    assert json.loads((ours_dir / "run.json").read_text()) == meta
    ra, rb = read_cached_run(src), read_cached_run(ours_dir)
    for col in ("env_steps", "frames", "episode_return", "wall_time_s"):
        assert np.array_equal(ra.episodes[col], rb.episodes[col])


def test_imported_records_are_marked_in_summary_and_report(tmp_path, capsys):
    from analysis.output.report import build_report_assets

    cache, recs = tmp_path / "cache", tmp_path / "imported"
    write_orb_cache(cache)
    assert main(["orb-import", str(cache), "--out", str(recs), "--protocol", "paper",
                 "--frames", "200e6"]) == 0
    assert capsys.readouterr().out.count("wrote ") == 6
    assert main(["summary", str(recs)]) == 0
    out = capsys.readouterr().out
    assert out.count("imported: wandb:openrlbenchmark/cleanba/") == 6
    assert "protocol paper, frame budget 200,000,000 (declared on import)" in out
    write_native(tmp_path / "mine")
    res = build_report_assets([recs, tmp_path / "mine"], tmp_path / "report", reps=50,
                              aggregate_reps=100)
    table = next(t for t in res["tables"] if t["name"] == "imported_runs")
    assert table["markdown"].count("https://wandb.ai/openrlbenchmark/cleanba/runs/") == 6
    assert any("imported:openrlbenchmark/cleanba" in t["markdown"] for t in res["tables"]
               if t["name"] == "per_game")


def test_orb_import_and_a_table_import_of_the_same_episodes_write_the_same_record(tmp_path):
    """One writer of imported records: the same episodes from openrlbenchmark's cache and
    from a long table give byte-identical episodes.csv and updates.csv and the same
    manifest (fields, their order, summary, provenance's keys); only where each came from
    (run_id, `imported`) and when it was written differ."""
    from analysis.importers import TableColumns, import_runs

    cache = tmp_path / "cache"
    write_orb_cache(cache, {("Pong-v5", 1): 19.0})
    orb = tmp_path / "orb" / "imported"
    assert main(["orb-import", str(cache), "--out", str(orb), "--protocol", "paper",
                 "--frames", "200e6"]) == 0
    (run,) = load_orb_cache(cache).included
    ep = run.episodes
    table = tmp_path / "runs.csv"
    with open(table, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["task", "seed", "return", "step", "time"])
        w.writerows(["Pong-v5", 1, *map(repr, row)] for row in zip(
            *(ep[c].tolist() for c in ("episode_return", "env_steps", "wall_time_s")),
            strict=True))
    tab = tmp_path / "table" / "imported"
    import_runs("table", table, tab, protocol="paper", frames=200e6, frames_per_step=4,
                system=EXP, layout=f"imported:{ENTITY}/{PROJECT}",
                columns=TableColumns(step="step", time="time"))
    (a,), (b,) = (list((d / "runs").iterdir()) for d in (orb, tab))
    for name in ("episodes.csv", "updates.csv"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    ma, mb = (json.loads((d / "manifest.json").read_text()) for d in (a, b))
    assert list(ma) == list(mb)
    assert set(ma["provenance"]) == set(mb["provenance"]) and ma["provenance"]
    differ = {"run_id", "imported", "started_at", "finished_at", "provenance"}
    assert {k: v for k, v in ma.items() if k not in differ} == {
        k: v for k, v in mb.items() if k not in differ}


def test_orb_reimport_keeps_the_same_import_and_refuses_another(tmp_path, capsys):
    cache, recs = tmp_path / "cache", tmp_path / "imported"
    write_orb_cache(cache, {("Pong-v5", 1): 19.0})
    args = ["orb-import", str(cache), "--out", str(recs), "--protocol", "paper"]
    assert main([*args, "--frames", "200e6"]) == 0
    before = {p: p.read_bytes() for p in recs.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert main([*args, "--frames", "200e6"]) == 0
    assert capsys.readouterr().out.startswith("already imported (same files): ")
    assert main([*args, "--frames", "100e6"]) == 2
    assert "holds an import of wandb run openrlbenchmark/cleanba/" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in recs.rglob("*") if p.is_file()} == before


def test_orb_protocol_is_read_as_import_protocols_are(tmp_path, capsys):
    """--orb-protocol and orb-import's --protocol take parse_protocol's words (a preset,
    a JSON file, KEY=VALUE, unknown); an error names the flag; none: undeclared."""
    assert declaration().protocol is None and declaration().protocol_text == "unknown"
    paper = declaration("paper", 200e6)
    assert paper.protocol_text == "paper" and paper.frames == 200e6
    pairs = declaration("frame_skip=4")
    assert pairs.protocol == {"frame_skip": 4} and pairs.protocol_text == "frame_skip=4"
    assert declaration("unknown").protocol == {"declared": "unknown",
                                               "import": "openrlbenchmark"}
    assert main(["summary", "--orb", str(tmp_path), "--orb-protocol", "sticky"]) == 2
    assert capsys.readouterr().err == ("error: --orb-protocol 'sticky': not a preset (paper), "
                                       "a JSON file, 'unknown' or KEY=VALUE\n")
    assert main(["summary", "--orb", str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err == (
        f"error: {tmp_path / 'nope'}: no such folder (expected openrlbenchmark's cache: "
        "<entity>/<project>/<run id>/run.json + run_df.csv)\n")
