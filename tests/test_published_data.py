"""The paper's published tables ship with the project.

README and docs once pointed at `--published ../shared/paper-data/main_10CPU.csv`, a file
outside the repository: a clone had no published tables at all. Now the tables (and the
Atari-5 dataset) are package data with their source and licence
(analysis/data/published/README.md), named without a path (`cleanba:main_10CPU`) by every
command and the sweep file; a path still works; an unknown name is exit 2 naming the
valid ones; and nothing the project ships, documents or tests reads ../shared.
"""

from __future__ import annotations

import re
import subprocess
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import pytest
from harness_cli import ROOT
from synthetic_records import write_final_score_run

from analysis.cli import main
from analysis.errors import AnalysisError
from analysis.inputs.published_data import (
    ATARI5_DATASET,
    CLEANBA_TABLES,
    PUBLISHED_DIR,
    published_table_names,
    resolve_published_table,
)

NAMES = ["cleanba:cleanrl", "cleanba:main_10CPU", "cleanba:ppo_vs_impala_fair",
         "cleanba:smootheness", "cleanba:smootheness_complete", "cleanba:spec_out",
         "cleanba:sync_or_not_sync"]
COLUMN = "Cleanba IMPALA, 1 A100, 10 CPU"


def test_the_shipped_names_and_files():
    assert published_table_names() == NAMES
    for name in NAMES:
        path = resolve_published_table(name)
        assert path.parent == CLEANBA_TABLES and path.stem == name.split(":")[1]
        assert path.with_name(f"{path.stem}_runtimes.csv").is_file()  # its twin, beside it
    assert resolve_published_table("cleanba:main_10CPU.csv").name == "main_10CPU.csv"
    assert ATARI5_DATASET.is_file() and ATARI5_DATASET.stat().st_size > 400_000


def test_every_shipped_file_has_its_source_and_licence():
    readme = (PUBLISHED_DIR / "README.md").read_text(encoding="utf-8")
    for folder, holder, source in (("cleanba", "Costa Huang", "github.com/vwxyzjn/cleanba"),
                                   ("atari5", "Matthew Aitchison", "github.com/maitchison/Atari-5")):
        licence = (PUBLISHED_DIR / folder / "LICENSE").read_text(encoding="utf-8")
        assert "MIT License" in licence and holder in licence and source in licence
        assert source in readme and f"{folder}/LICENSE" in readme
    for name in NAMES:
        assert f"`{name}`" in readme, name


def test_package_data_carries_every_shipped_file():
    """pyproject's package-data globs match every file under analysis/data/published (so
    `pip install cleanba-bench` has them; test_core_install runs this module there)."""
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"]["analysis"]
    files = [p.relative_to(ROOT / "analysis").as_posix()
             for p in PUBLISHED_DIR.rglob("*") if p.is_file()]
    assert len(files) == 18  # README, 14 Cleanba tables, the dataset, 2 licences
    assert not [f for f in files if not any(fnmatch(f, g) for g in globs)]


def test_a_path_still_works_and_a_bad_name_lists_the_valid_ones(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("mine.csv").write_bytes((CLEANBA_TABLES / "spec_out.csv").read_bytes())
    assert resolve_published_table("mine.csv") == Path("mine.csv")
    assert resolve_published_table(tmp_path / "mine.csv") == tmp_path / "mine.csv"
    with pytest.raises(AnalysisError) as e:
        resolve_published_table("cleanba:main_10cpu")
    assert "did you mean 'cleanba:main_10CPU'" in str(e.value)
    assert all(n in str(e.value) for n in NAMES)
    with pytest.raises(AnalysisError) as e:
        resolve_published_table("cleanba:main_10CPU_runtimes")  # a twin, not a score table
    with pytest.raises(AnalysisError) as e:
        resolve_published_table("../shared/paper-data/main_10CPU.csv")
    assert "no such table" in str(e.value) and "cleanba:main_10CPU" in str(e.value)


def test_the_commands_take_a_name(tmp_path, capsys, monkeypatch):
    """paper-tables --table, atari5 --table and reproduce --published by name, from a
    folder with nothing beside it; an unknown name is exit 2 with nothing written."""
    monkeypatch.chdir(tmp_path)
    assert main(["paper-tables", "--table", "cleanba:main_10CPU"]) == 0
    assert re.search(r"\| Cleanba IMPALA, 1 A100, 10 CPU +\| 165\.8%", capsys.readouterr().out)
    assert main(["paper-tables", "--table", str(CLEANBA_TABLES / "main_10CPU.csv")]) == 0
    assert "165.8%" in capsys.readouterr().out
    assert main(["atari5", "--table", "cleanba:main_10CPU"]) == 0
    assert "Cleanba IMPALA, 1 A100, 10 CPU" in capsys.readouterr().out
    from analysis.reproduce import published_column

    col = published_column("cleanba:main_10CPU", COLUMN)
    for seed in (1, 2, 3):
        for game in ("Breakout-v5", "Pong-v5"):
            write_final_score_run(tmp_path / "mine", final=float(col.mean[col.index(game)]),
                                  env_id=game, seed=seed)
    assert main(["reproduce", "--runs", "mine", "--published", "cleanba:main_10CPU",
                 "--column", COLUMN, "--reps", "2000"]) == 0
    assert "(main_10CPU.csv)" in capsys.readouterr().out
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["reproduce", "--runs", "mine", "--published", "cleanba:nope",
                 "--column", COLUMN, "--out", "out"]) == 2
    err = capsys.readouterr().err
    assert "no published table named 'cleanba:nope'" in err and "cleanba:spec_out" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written


def test_a_sweep_file_names_a_shipped_table(tmp_path):
    """The sweep file's check; the report reads it by name in tests/test_harness_reproduce.py."""
    from harness.sweep import SweepError, parse_sweep

    def text(table: str) -> str:
        return (f'name = "repro"\nsystems = ["cleanba-impala"]\nlayouts = ["a0-l0-d1"]\n'
                f'games = ["Pong-v5"]\nseeds = [1, 2]\nframes = 200000000\n[report]\n'
                f'reps = 100\npublished = {{table = "{table}", column = "{COLUMN}"}}\n')

    with pytest.raises(SweepError) as e:
        parse_sweep(text("cleanba:main10"), tmp_path / "x.toml", check_games=False)
    assert "line 9" in str(e.value) and "cleanba:main_10CPU" in str(e.value)
    sweep = parse_sweep(text("cleanba:main_10CPU"), tmp_path / "x.toml", check_games=False)
    assert sweep.report["published"]["table"] == "cleanba:main_10CPU"


def test_nothing_reads_from_outside_the_repository():
    """No tracked file names ../shared (the folder a clone does not have)."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=False).stdout.split()
    if not files:
        pytest.skip("not a git checkout")
    this = Path(__file__).relative_to(ROOT).as_posix()
    hits = []
    for rel in files:
        if rel in (this, "CHANGELOG.md") or not (ROOT / rel).is_file() \
                or rel.endswith((".csv", ".png", ".pdf")):
            continue
        text = (ROOT / rel).read_text(encoding="utf-8", errors="replace")
        hits += [f"{rel}: {m}" for m in re.findall(r".{0,30}\.\./shared/(?:paper-data|"
                                                   r"published-scores).{0,30}", text)]
        hits += [f"{rel}: {m}" for m in re.findall(r".{0,30}shared_data.{0,30}", text)]
    assert not hits, "\n".join(hits)
