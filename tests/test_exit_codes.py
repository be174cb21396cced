"""One exit-code table: runrecord.exits.EXIT_CODES is the source;
the top-level help of `python -m analysis` and `python -m harness`, every deciding
command's --help, README.md and the docs show it as rendered from there; no statement in
them pairs a verdict word with another code; and the commands exit as the table says:
`equivalence` 4 on INCONCLUSIVE (1 with --strict), `harness status` 0 unless a run failed.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from harness_cli import ROOT
from synthetic_records import write_final_score_run
from test_help_texts import HELP_COMMANDS, _flat, help_text

from runrecord.exits import (
    EXIT_BAD_INPUT,
    EXIT_CODES,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNDECIDED,
    exit_code_markdown,
    exit_code_text,
)

BEGIN = "<!-- exit-codes: runrecord/exits.py; tests/test_exit_codes.py checks this table -->"
END = "<!-- /exit-codes -->"
DOCS_WITH_TABLE = ("README.md", "docs/analysis.md", "docs/harness.md", "docs/reproduce.md",
                   "results/README.md")
DECIDING = ("python -m analysis", "python -m harness",
            *(f"python -m analysis {s}" for s in ("equivalence", "regression", "staleness",
                                                    "reproduce")),
            "python -m calibration",
            *(f"python -m harness {s}" for s in ("run", "status", "regress",
                                                   "determinism-check")),
            "python -m cleanba.determinism_check", "python -m analysis.atari5.fit")
"""Commands whose --help must end with the table (their exit code reports an outcome)."""

VERDICT_CODES = {
    "PASS": EXIT_OK, "REPRODUCED": EXIT_OK, "IDENTICAL": EXIT_OK, "VERIFIED": EXIT_OK,
    "DIFFERENT": EXIT_FAILED, "REGRESSION": EXIT_FAILED, "NOT REPRODUCED": EXIT_FAILED,
    "NOT IDENTICAL": EXIT_FAILED, "MISMATCH": EXIT_FAILED,
    "INCONCLUSIVE": EXIT_UNDECIDED, "UNDECIDED": EXIT_UNDECIDED,
    "NOT SHOWN": EXIT_UNDECIDED, "UNDECIDED AT CAP": EXIT_UNDECIDED,
    "NOT CHECKABLE": EXIT_UNDECIDED,
}
"""Each verdict word's exit code (without --strict)."""
WORD = "|".join(sorted(map(re.escape, VERDICT_CODES), key=len, reverse=True))
# "WORD (exit N" / "WORD (N)" and "exit N WORD" / ", N WORD" inside a sentence about exits;
# "(1 with --strict)", "1 under --strict" and "exit 1 on UNDECIDED too" are the strict
# variant, not a contradiction.
WORD_THEN_CODE = re.compile(rf"(?<![A-Z] )\b({WORD})\b\s*\((?:exit(?: code)?\s+)?(\d+)\b"
                            r"(?!\s*(?:with|under) `?--strict)")
CODE_THEN_WORD = re.compile(rf"\b(\d+)\s+\(?(?:for |on |every \w+ |all |an? )?(?<![A-Z] )({WORD})\b"
                            r"(?! too)")  # --strict's "Exit 1 on UNDECIDED too"


def doc_tables(text: str) -> list[str]:
    return re.findall(rf"{re.escape(BEGIN)}\n(.*?)\n{re.escape(END)}", text, re.S)


def test_the_table_is_complete():
    codes = [c for c, _, _ in EXIT_CODES]
    assert codes == sorted(set(codes)) == [0, 1, 2, 3, 4, 130]
    text = exit_code_text()
    assert all(len(line) <= 79 for line in text.splitlines())
    for code, outcome, _ in EXIT_CODES:
        assert re.search(rf"^\s+{code}\s+{re.escape(outcome)}\s", text, re.M), code
        assert f"| {code} | {outcome} |" in exit_code_markdown()


@pytest.mark.parametrize("doc", DOCS_WITH_TABLE)
def test_the_docs_show_the_one_table(doc):
    tables = doc_tables((ROOT / doc).read_text(encoding="utf-8"))
    assert tables, f"{doc}: no exit-code table between {BEGIN!r} and {END!r}"
    for t in tables:
        assert t == exit_code_markdown(), (
            f"{doc}: its exit-code table differs from runrecord/exits.py; paste:\n"
            f"{exit_code_markdown()}")


def test_every_deciding_help_shows_the_table(capsys):
    want = _flat(exit_code_text())
    for command in DECIDING:
        assert command in HELP_COMMANDS, command
        assert want in _flat(help_text(command, capsys)), f"{command} --help lacks the table"


def exit_statements(text: str) -> list[tuple[str, int, str]]:
    """(verdict word, code, the sentence) for each place a text pairs a verdict word with
    an exit code: "REPRODUCED (exit 0", "PASS (0)", "Exit 0 PASS, 1 REGRESSION"."""
    out = []
    for sentence in re.split(r"(?<=[.!?])\s+|\n\n", " ".join(text.split("\n"))):
        if "xit" not in sentence:
            continue
        for word, code in WORD_THEN_CODE.findall(sentence):
            out.append((word, int(code), sentence))
        for code, word in CODE_THEN_WORD.findall(sentence):
            out.append((word, int(code), sentence))
    return out


def test_the_contradiction_scan_finds_the_old_statements():
    """What finding 3 quoted is caught."""
    old = [("`equivalence` Exit 0 all PASS, 1 a DIFFERENT/INCONCLUSIVE, 2 error.",
            ("PASS", 0), ("DIFFERENT", 1)),
           ("the gate exits 1 for INCONCLUSIVE.", ("INCONCLUSIVE", 1)),
           ("NOT SHOWN (exit 4, `--strict` makes it 1)", ("NOT SHOWN", 4)),
           ("Exit 0 PASS, 1 REGRESSION, 4 UNDECIDED (1 with --strict), 2 error.",
            ("PASS", 0), ("REGRESSION", 1), ("UNDECIDED", 4))]
    for text, *pairs in old:
        found = {(w, c) for w, c, _ in exit_statements(text)}
        assert set(pairs) <= found, (text, found)
    assert not [s for s in exit_statements("Exit 0 PASS, 1 REGRESSION, 4 UNDECIDED (1 with "
                                           "--strict)") if VERDICT_CODES[s[0]] != s[1]]
    bad = exit_statements("equivalence: exit 1 INCONCLUSIVE")
    assert [(w, c) for w, c, _ in bad] == [("INCONCLUSIVE", 1)]


def test_no_doc_or_help_contradicts_the_table(capsys):
    texts = {p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8")
             for p in [ROOT / "README.md", ROOT / "results" / "README.md",
                       *sorted((ROOT / "docs").glob("*.md"))]}
    for command in HELP_COMMANDS:
        if command.startswith(("python -m analysis", "python -m harness")):
            texts[command] = _flat(help_text(command, capsys))
    wrong = [(where, w, c, s[:160]) for where, text in texts.items()
             for w, c, s in exit_statements(text) if VERDICT_CODES[w] != c]
    assert not wrong, "statements that pair a verdict with another exit code:\n" + \
        "\n".join(map(str, wrong))


# ------------------------------------------------------------------ the commands' codes

def _layouts(root: Path, finals: dict[str, list[float]]) -> Path:
    """CartPole records: per layout, one run per seed with these final returns."""
    for layout, values in finals.items():
        for seed, final in enumerate(values, start=1):
            write_final_score_run(root, final=final, env_id="CartPole-v1", seed=seed,
                                  system="cleanba-ppo", layout=layout, total_frames=100_000)
    return root


@pytest.mark.parametrize("finals, verdict, code, strict_code", [
    ({"a0-l0-d1": [250, 251, 252], "a0-l1-d1": [251, 252, 250]}, "PASS", 0, 0),
    ({"a0-l0-d1": [100, 102, 101], "a0-l1-d1": [400, 402, 401]}, "DIFFERENT", 1, 1),
    ({"a0-l0-d1": [100, 400], "a0-l1-d1": [450, 150]}, "INCONCLUSIVE", 4, 1),
])
def test_equivalence_exits_by_the_table(tmp_path, capsys, finals, verdict, code, strict_code):
    """INCONCLUSIVE is the third outcome, exit 4 (it was 1, the code of DIFFERENT);
    --strict makes it 1, as for the gate's UNDECIDED."""
    from analysis.cli import main

    root = _layouts(tmp_path, finals)
    assert main(["equivalence", str(root), "--group-by", "layout.name"]) == code
    assert verdict in capsys.readouterr().out
    assert main(["equivalence", str(root), "--group-by", "layout.name", "--strict"]) \
        == strict_code
    capsys.readouterr()


def test_an_error_outranks_every_verdict(tmp_path, capsys):
    from analysis.cli import main

    root = _layouts(tmp_path, {"a0-l0-d1": [100, 400], "a0-l1-d1": [150, 450]})
    assert main(["equivalence", str(root), "--group-by", "layout.name",
                 "--a", "no-such-layout"]) == EXIT_BAD_INPUT
    capsys.readouterr()


@pytest.mark.parametrize("command", [["analysis", "equivalence", "--help"],
                                     ["harness", "plan", "--help"],
                                     ["analysis", "summary", str(ROOT / "results/reference/smoke-cartpole")]])
def test_a_closed_pipe_ends_quietly(command):
    """`python -m analysis ... | head`: the reader gone before the first line, the command
    ends with 0 and says nothing on stderr (no BrokenPipeError traceback)."""
    import os
    import subprocess
    import sys

    read_end, write_end = os.pipe()
    os.close(read_end)  # no reader: the command's first write to stdout fails with EPIPE
    try:
        proc = subprocess.run([sys.executable, "-m", *command], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=120)
    finally:
        os.close(write_end)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
