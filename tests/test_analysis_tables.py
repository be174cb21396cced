"""Tables out: `aggregate`, `equivalence`, `regression` and
`reproduce --format markdown|latex|csv|json`.

Every format of every command is parsed back (csv module, json.loads, the LaTeX and
Markdown cells) and its numbers are checked against the command's own JSON result
(--json-out, aggregates.json, reproduce.json), which no table code writes.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import shutil
import subprocess
from typing import Any

import numpy as np
import pytest
from harness_cli import ROOT
from synthetic_records import write_final_score_run

from analysis.cli import main
from analysis.inputs.published_data import CLEANBA_TABLES
from analysis.reproduce import published_column
from analysis.scoring.tables import Column, Estimate, TableData, latex_escape

REFERENCE = ROOT / "results" / "reference" / "smoke-cartpole"
TABLE = CLEANBA_TABLES / "main_10CPU.csv"
COLUMN = "Cleanba IMPALA, 1 A100, 10 CPU"
FORMATS = ("markdown", "latex", "csv", "json")
NUMBER = r"[+-]?(?:\d+\.\d+|n/a)"
ESTIMATE = re.compile(rf"^({NUMBER})(?: \[({NUMBER}), ({NUMBER})\])?$")


# ---------------------------------------------------------------- pure functions

def _toy() -> TableData:
    cols = (Column("name", "run_name"), Column("n", "seeds", "count"),
            Column("score", "score (%)", "estimate", signed=True),
            Column("x", "x & y", "number", 2))
    return TableData.keyed(cols, [
        {"name": "a_b #1 50%", "n": 3, "score": Estimate(0.5123456789, 0.43, 0.598),
         "x": 1 / 3},
        {"name": "c~d", "n": 1, "score": Estimate(-0.25), "x": math.nan}])


def test_latex_is_a_booktabs_tabular_with_escaped_cells():
    text = _toy().latex()
    lines = text.strip().splitlines()
    assert lines[0] == r"\begin{tabular}{lrrr}" and lines[-1] == r"\end{tabular}"
    assert lines[1] == r"\toprule" and lines[3] == r"\midrule" and lines[-2] == r"\bottomrule"
    assert "documentclass" not in text
    assert lines[2] == r"run\_name & seeds & score (\%) & x \& y \\"
    assert lines[4] == r"a\_b \#1 50\% & 3 & +0.512 [+0.430, +0.598] & 0.33 \\"
    assert lines[5] == r"c\textasciitilde{}d & 1 & -0.250 & n/a \\"
    assert latex_escape("P(X > Y) ±0.2 {x}^\\") == (
        r"P(X \textgreater{} Y) $\pm$0.2 \{x\}\textasciicircum{}\textbackslash{}")


def test_csv_and_json_split_estimates_at_full_precision():
    rows = list(csv.reader(io.StringIO(_toy().csv())))
    assert rows[0] == ["name", "n", "score", "score_low", "score_high", "x"]
    assert rows[1] == ["a_b #1 50%", "3", "0.5123456789", "0.43", "0.598", repr(1 / 3)]
    assert rows[2] == ["c~d", "1", "-0.25", "", "", ""]  # NaN: empty
    objs = json.loads(_toy().json())
    assert objs[0] == {"name": "a_b #1 50%", "n": 3, "score": 0.5123456789,
                       "score_low": 0.43, "score_high": 0.598, "x": 1 / 3}
    assert objs[1]["score_low"] is None and objs[1]["x"] is None


def test_markdown_has_one_line_per_row():
    lines = _toy().markdown().strip().splitlines()
    assert len(lines) == 4 and lines[1].startswith("|--")
    assert "| +0.512 [+0.430, +0.598] |" in lines[2]


TEX_REQUIRED = "HARNESS_TEX_REQUIRED"
"""Set (by .ci/run, where scripts/setup.sh --tex installs TeX Live) to make a missing TeX
engine fail the compile test instead of skipping it."""


def _tex_engine() -> str:
    engine = shutil.which("pdflatex") or shutil.which("lualatex")
    if engine is None:
        if os.environ.get(TEX_REQUIRED):
            pytest.fail(f"{TEX_REQUIRED} is set but no pdflatex or lualatex is installed "
                        "(scripts/setup.sh --tex installs TeX Live)")
        pytest.skip("no TeX engine installed (scripts/setup.sh --tex installs one)")
    return engine


def test_latex_compiles(tmp_path, capsys):
    """What `aggregate`, `equivalence`, `regression` and `reproduce --format latex` print,
    and the toy table's escaped cells, each `\\input` into one article with booktabs,
    compile with pdflatex."""
    engine = _tex_engine()
    col = published_column(TABLE, COLUMN)
    for seed in (1, 2):
        write_final_score_run(tmp_path / "runs", final=float(col.mean[col.games.index("Pong-v5")]),
                              env_id="Pong-v5", seed=seed)
    commands = {
        "aggregate": ["aggregate", str(REFERENCE), "--no-cache", "--reps", "100"],
        "equivalence": ["equivalence", str(REFERENCE), "--no-cache",
                        "--where", "system=cleanba-impala"],
        "regression": ["regression", "--new", str(REFERENCE), "--reference", "0.3",
                       "--reference-exact", "--where", "system=cleanba-ppo"],
        "reproduce": ["reproduce", "--runs", str(tmp_path / "runs"), "--published", str(TABLE),
                      "--column", COLUMN, "--reps", "100"],
    }
    (tmp_path / "toy.tex").write_text(_toy().latex())
    for name, argv in commands.items():
        _, out = _run([*argv, "--format", "latex"], capsys)
        assert out.startswith(r"\begin{tabular}"), (name, out[:200])
        (tmp_path / f"{name}.tex").write_text(out)
    body = "\n\n".join(f"\\input{{{name}}}" for name in ("toy", *commands))
    (tmp_path / "doc.tex").write_text("\\documentclass{article}\\usepackage{booktabs}\n"
                                      "\\usepackage[landscape,margin=1cm]{geometry}\n"
                                      f"\\begin{{document}}\n{body}\n\\end{{document}}\n")
    done = subprocess.run([str(engine), "-interaction=nonstopmode", "-halt-on-error",
                           "doc.tex"], cwd=tmp_path, capture_output=True, timeout=300)
    assert done.returncode == 0, done.stdout.decode(errors="replace")[-2000:]
    assert (tmp_path / "doc.pdf").stat().st_size > 0


# ---------------------------------------------------------------- parsing back

def _number(text: str) -> float:
    return math.nan if text == "n/a" else float(text)


def _parse(fmt: str, text: str) -> list[list[str]]:
    """Body cells of a rendered table (LaTeX unescaped), checking each format's frame."""
    if fmt == "csv":
        return list(csv.reader(io.StringIO(text)))[1:]
    lines = text.strip().splitlines()
    if fmt == "markdown":
        assert lines[1].startswith("|--")
        return [[c.strip() for c in ln.strip("|").split(" | ")] for ln in lines[2:]]
    assert lines[0].startswith(r"\begin{tabular}{") and lines[-1] == r"\end{tabular}"
    assert [lines[1], lines[3], lines[-2]] == [r"\toprule", r"\midrule", r"\bottomrule"]
    body = lines[2:3] + lines[4:-2]
    assert len({ln.count(" & ") for ln in body}) == 1  # one column count in every row
    assert all(ln.endswith(r" \\") for ln in body)
    unescape = {r"\_": "_", r"\%": "%", r"\&": "&", r"\#": "#", r"$\pm$": "±"}
    out = []
    for ln in lines[4:-2]:
        cells = ln[:-3].split(" & ")
        for esc, ch in unescape.items():
            cells = [c.replace(esc, ch) for c in cells]
        out.append(cells)
    return out


def _displayed(cells: list[str], columns: tuple[Column, ...]) -> dict[str, Any]:
    """A Markdown/LaTeX row back into flat values (estimates split into KEY_low/high)."""
    out: dict[str, Any] = {}
    for c, cell in zip(columns, cells, strict=True):
        if c.kind == "estimate":
            m = ESTIMATE.match(cell)
            assert m, cell
            out[c.key] = _number(m[1])
            if m[2] is not None:
                out[f"{c.key}_low"], out[f"{c.key}_high"] = _number(m[2]), _number(m[3])
        elif c.kind == "number":
            out[c.key] = _number(cell)
        elif c.kind == "count":
            out[c.key] = None if cell == "n/a" else int(cell)
        else:
            out[c.key] = cell
    return out


def _check(fmt: str, text: str, columns: tuple[Column, ...],
           expected: list[dict[str, Any]]) -> None:
    """The table in `text` has the expected rows: text equal, numbers equal (rounded as
    the column shows them in Markdown and LaTeX)."""
    if fmt == "json":
        got = json.loads(text)
    elif fmt == "csv":
        header = next(csv.reader(io.StringIO(text)))
        got = [dict(zip(header, r, strict=True)) for r in _parse(fmt, text)]
    else:
        got = [_displayed(r, columns) for r in _parse(fmt, text)]
    assert len(got) == len(expected)
    digits = {k: c.digits for c in columns for k in (c.key, f"{c.key}_low", f"{c.key}_high")}
    for g, e in zip(got, expected, strict=True):
        for k, v in e.items():
            if isinstance(v, str):
                assert g[k] == v, (k, g[k], v)
                continue
            value = _number(g[k]) if isinstance(g[k], str) else g[k]
            if fmt in ("csv", "json"):  # full precision
                assert value == v, (fmt, k, value, v)
            else:
                assert value == pytest.approx(v, abs=0.51 * 10 ** -digits[k]), (fmt, k)


def _run(argv: list[str], capsys) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().out


# ---------------------------------------------------------------- the four commands

def test_aggregate_tables(tmp_path, capsys):
    from analysis.scoring.tables import aggregate_columns

    base = ["aggregate", str(REFERENCE), "--no-cache", "--reps", "200"]
    assert _run([*base, "--out", str(tmp_path)], capsys)[0] == 0
    truth = json.loads((tmp_path / "aggregates.json").read_text())
    expected = [{"group": g, **{k: v for m, iv in ms.items() for k, v in
                                ((m, iv["point"]), (f"{m}_low", iv["low"]),
                                 (f"{m}_high", iv["high"]))}} for g, ms in truth.items()]
    columns = aggregate_columns(list(next(iter(truth.values()))))
    for fmt in FORMATS:
        code, out = _run([*base, "--format", fmt], capsys)
        assert code == 0
        _check(fmt, out, columns, expected)


def _equivalence_expected(results: list[dict]) -> list[dict[str, Any]]:
    rows = []
    for r in results:
        for name in ("final", "auc"):
            w = r[name]
            rows.append({"group": r["group_a"], "reference": r["reference"],
                         "mean": w["mean_a"], "reference_mean": w["mean_b"],
                         "diff": w["diff"], "diff_low": w["ci90"][0],
                         "diff_high": w["ci90"][1], "delta": r["delta"],
                         "verdict": r["label"]})
    return rows


def test_equivalence_tables(tmp_path, capsys):
    from analysis.output.tables import EQUIVALENCE_COLUMNS

    base = ["equivalence", str(REFERENCE), "--no-cache", "--where", "system=cleanba-impala"]
    code, _ = _run([*base, "--json-out", str(tmp_path / "eq.json")], capsys)
    truth = json.loads((tmp_path / "eq.json").read_text())
    results = truth.get("comparisons", [truth])
    columns = EQUIVALENCE_COLUMNS  # one suite: no suite column
    assert len(results) == 3
    for fmt in FORMATS:
        got_code, out = _run([*base, "--format", fmt], capsys)
        assert got_code == code
        _check(fmt, out, columns, _equivalence_expected(results))


def test_regression_tables(tmp_path, capsys):
    from analysis.output.tables import regression_columns

    base = ["regression", "--new", str(REFERENCE), "--reference", "0.3", "--reference-exact",
            "--where", "system=cleanba-ppo"]
    code, _ = _run([*base, "--json-out", str(tmp_path / "gate.json")], capsys)
    t = json.loads((tmp_path / "gate.json").read_text())
    expected = [{"subject": t["subject"], "new_mean": t["new_mean"],
                 "reference_mean": t["reference_mean"], "diff": t["diff"],
                 "diff_low": t["lower_bound"], "diff_high": 2 * t["diff"] - t["lower_bound"],
                 "delta": t["delta"], "new_seeds": t["n_new"], "verdict": t["verdict"]}]
    columns = regression_columns(t["confidence"])
    for fmt in FORMATS:
        got_code, out = _run([*base, "--format", fmt], capsys)
        assert got_code == code
        if fmt == "csv":  # 2 diff - lower: full precision up to one rounding
            expected[0]["diff_high"] = float(next(csv.DictReader(io.StringIO(out)))["diff_high"])
            assert expected[0]["diff_high"] == pytest.approx(2 * t["diff"] - t["lower_bound"])
        _check(fmt, out, columns, expected)


def test_reproduce_tables(tmp_path, capsys):
    from analysis.reproduce.section import GAME_COLUMNS

    col = published_column(TABLE, COLUMN)
    rng = np.random.default_rng(5)
    for game in ("Pong-v5", "Breakout-v5"):
        j = col.games.index(game)
        for seed, v in enumerate(rng.normal(col.mean[j], col.sd[j], 3), start=1):
            write_final_score_run(tmp_path / "runs", final=float(v), env_id=game, seed=seed)
    base = ["reproduce", "--runs", str(tmp_path / "runs"), "--published", str(TABLE),
            "--column", COLUMN, "--reps", "100"]
    code, out = _run([*base, "--out", str(tmp_path / "out"), "--format", "json"], capsys)
    assert not out.lstrip().startswith("wrote")  # "wrote ..." went to stderr
    truth = json.loads((tmp_path / "out" / "reproduce.json").read_text())
    expected = [{"game": g["game"], "published_hns": g["published_hns"],
                 "user_hns": g["user_hns"], "diff": g["diff_hns"], "diff_low": g["ci90"][0],
                 "diff_high": g["ci90"][1], "margin": g["margin_hns"],
                 "verdict": g["verdict"]} for g in truth["games"]]
    _check("json", out, GAME_COLUMNS, expected)
    for fmt in ("markdown", "latex", "csv"):
        got_code, out = _run([*base, "--format", fmt], capsys)
        assert got_code == code
        _check(fmt, out, GAME_COLUMNS, expected)


def test_console_stays_the_default(capsys):
    code, out = _run(["regression", "--new", str(REFERENCE), "--reference", "0.3",
                      "--reference-exact", "--where", "system=cleanba-ppo"], capsys)
    assert out.startswith("regression: ") and code == 0


# ---------------------------------------------------------------- --out files

def _assert_booktabs_file(path, rows: int) -> None:
    """`path` is a booktabs tabular with a header and `rows` body lines."""
    text = path.read_text()
    lines = text.splitlines()
    assert lines[0].startswith(r"\begin{tabular}") and lines[1] == r"\toprule"
    assert lines[3] == r"\midrule" and lines[-2:] == [r"\bottomrule", r"\end{tabular}"]
    assert len(lines[4:-2]) == rows


def _markdown_rows(path) -> int:
    """Body rows of a written <name>.md (its title, header and rule lines left out)."""
    return sum(1 for x in path.read_text().splitlines() if x.startswith("| ")) - 1


def test_out_tables_are_also_latex(tmp_path, capsys):
    """Every table `--out` writes (aggregate, paper-tables, reproduce) has its .tex beside
    its .md and .csv, one LaTeX row per table row, and the "wrote" line names it."""
    out = tmp_path / "agg"
    assert main(["aggregate", str(REFERENCE), "--no-cache", "--reps", "100",
                 "--out", str(out)]) == 0
    said = capsys.readouterr().out
    truth = json.loads((out / "aggregates.json").read_text())
    for name in ("aggregates", "probability_of_improvement"):
        assert str(out / f"{name}.tex") in said
        rows = len(truth) if name == "aggregates" else _markdown_rows(out / f"{name}.md")
        assert len(list(csv.reader((out / f"{name}.csv").open()))) == rows + 1
        _assert_booktabs_file(out / f"{name}.tex", rows)

    paper = tmp_path / "paper"
    assert main(["paper-tables", "--table", str(TABLE), "--out", str(paper)]) == 0
    assert str(paper / "paper_main_10CPU.tex") in capsys.readouterr().out
    _assert_booktabs_file(paper / "paper_main_10CPU.tex",
                          _markdown_rows(paper / "paper_main_10CPU.md"))

    col = published_column(TABLE, COLUMN)
    j = col.games.index("Pong-v5")
    for seed in (1, 2):
        write_final_score_run(tmp_path / "runs", final=float(col.mean[j]), env_id="Pong-v5",
                              seed=seed)
    rep = tmp_path / "rep"
    main(["reproduce", "--runs", str(tmp_path / "runs"), "--published", str(TABLE),
          "--column", COLUMN, "--reps", "100", "--out", str(rep)])
    assert str(rep / "reproduce_per_game.tex") in capsys.readouterr().out
    _assert_booktabs_file(rep / "reproduce_per_game.tex", 1)
