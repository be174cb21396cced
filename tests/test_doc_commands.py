"""Every command in README.md, docs/*.md and results/README.md runs from a fresh clone with
nothing beside it.

Each command block (tests/doc_blocks.py) runs in its own copy of the repository's files
(git's tracked and untracked-not-ignored files: what a clone has, plus work in progress),
with no ../shared beside it, the project's venv on PATH (and as .venv) and HOME in the
test's folder. Every command must exit 0, or 4 (UNDECIDED: a verdict on few seeds), unless
an `exit N` marker says otherwise; a console block's output lines must appear in what its
commands print. The trainers' CartPole commands get a tiny budget (TINY_BUDGET appended).
Before the blocks run, FIXTURES makes the records they read: results/smoke is the shipped
reference (results/reference/smoke-cartpole) as the smoke preset's store, results/my-sweep
an Atari sweep at the published Cleanba IMPALA means (two layouts, three seeds, the
Atari-5 games), the imports' files, an openrlbenchmark cache in ~/orb-cache.

A block that cannot run here carries a marker with its reason (docs/architecture.md,
"Documented commands"); test_every_block_runs_or_says_why checks that every block does one
or the other, and that every marker still matches a command.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from doc_blocks import ROOT, Block, all_blocks, code, squash

TINY_BUDGET = "--total-timesteps 1024"
"""Appended to `python -m cleanba.{ppo,impala} cartpole ...` (one update of the preset)."""
TRAINER_CARTPOLE = re.compile(r"^python -m cleanba\.(ppo|impala) cartpole\b(?!.*--help)")
ATARI_SWEEP_GAMES = ("BattleZone-v5", "DoubleDunk-v5", "NameThisGame-v5", "Phoenix-v5",
                     "Qbert-v5", "Breakout-v5", "Pong-v5")
COLUMN = "Cleanba IMPALA, 1 A100, 10 CPU"
OK_CODES = (0, 4)
BLOCK_TIMEOUT_S = 900


def clone_files() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, text=True, check=False)
    return [f for f in out.stdout.splitlines() if (ROOT / f).is_file()]


def atari_sweep(root: Path) -> None:
    """An Atari sweep: cleanba-impala on a0-l0-d1 and a0-l1,2,3-d1 (copies of each seed),
    seeds 1-3, at the published Cleanba IMPALA means (+-0.2% per seed), 200M frames."""
    from synthetic_records import write_final_score_run

    from analysis.reproduce import published_column

    col = published_column("cleanba:main_10CPU", COLUMN)
    for game in ATARI_SWEEP_GAMES:
        mean = float(col.mean[col.index(game)])
        for seed in (1, 2, 3):
            for layout in ("a0-l0-d1", "a0-l1,2,3-d1"):
                write_final_score_run(root, final=mean * (1 + 0.002 * (seed - 2)),
                                      env_id=game, seed=seed, layout=layout,
                                      sweep=root.name)


def foreign_files(clone: Path) -> None:
    """README's import examples: CleanRL TensorBoard runs in runs/, SB3 Monitor CSVs of
    CartPole in logs/ (tests/foreign_runs.py writes them as the real writers do)."""
    from foreign_runs import cleanrl_run_dir, history, write_monitor_run, write_tensorboard_run

    for seed in (1, 2):
        write_tensorboard_run(cleanrl_run_dir(clone / "runs", "Breakout-v5", seed),
                              history(480.0, seed))
        write_monitor_run(clone / "logs" / f"CartPole-v1__seed{seed}", history(200.0, seed),
                          "CartPole-v1", envs=2)


def make_fixtures(clone: Path, home: Path) -> None:
    """FIXTURES: the records and files the documented commands read."""
    from test_orb import write_orb_cache

    ref = clone / "results" / "reference" / "smoke-cartpole"
    shutil.copytree(ref, clone / "results" / "smoke" / "runs")  # the smoke preset's store
    for name in ("my-pilot", "pilot"):
        shutil.copytree(ref, clone / "results" / name)
    for name in ("my-sweep", "new", "ref", "my-atari5-sweep"):
        atari_sweep(clone / "results" / name)
    foreign_files(clone)
    write_orb_cache(home / "orb-cache")


FIXTURES = ("results/smoke", "results/my-pilot", "results/pilot", "results/my-sweep",
            "results/new", "results/ref", "results/my-atari5-sweep", "runs/", "logs/",
            "~/orb-cache")
"""What make_fixtures makes (the docs may name these as if the user had them)."""


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> tuple[Path, Path]:
    """A copy of the repository's files with the fixtures in it, and a HOME beside it."""
    files = clone_files()
    if not files:
        pytest.skip("not a git checkout")
    base = tmp_path_factory.mktemp("doc-commands")
    clone, home = base / "clone", base / "home"
    for rel in files:
        (clone / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, clone / rel)
    (clone / ".venv").symlink_to(Path(sys.prefix))
    home.mkdir()
    make_fixtures(clone, home)
    assert not (base / "shared").exists() and not (clone.parent / "shared").exists()
    return clone, home


def command_blocks() -> list[Block]:
    return [b for b in all_blocks() if b.is_commands]


def planned(block: Block) -> list[tuple[str, int] | None]:
    """Per command of the block: (the command as run, its expected exit code), or None
    when a marker leaves it out."""
    out: list[tuple[str, int] | None] = []
    for command in block.commands():
        if any(m.kind == "skip" and block.applies(m, command) for m in block.markers):
            out.append(None)
            continue
        expected = next((int(m.arg) for m in block.markers
                         if m.kind == "exit" and block.applies(m, command)), None)
        if TRAINER_CARTPOLE.match(command):
            body = code(command).rstrip("\\ \n")
            command = f"{body} {TINY_BUDGET}"
        out.append((command, -1 if expected is None else expected))
    return out


def script(block: Block, clone: Path) -> str:
    """The block as one bash script: each command, then a check of its exit code."""
    lines = [f"cd {shlex.quote(str(clone))}", "rc=0"]
    for i, item in enumerate(planned(block)):
        if item is None:
            continue
        command, expected = item
        ok = f'[ "$rc" = {expected} ]' if expected >= 0 else \
            " || ".join(f'[ "$rc" = {c} ]' for c in OK_CODES)
        lines += [f"echo {shlex.quote(f'=== doc-commands [{i + 1}]: ' + squash(command))}",
                  "t0=$EPOCHREALTIME",
                  "(exit $rc)",  # $? is the previous command's, as in a terminal
                  command, "rc=$?",
                  f'echo "=== doc-commands [{i + 1}] exit $rc after '
                  '$(awk "BEGIN {printf \\"%.1f\\", $EPOCHREALTIME - $t0}") s"',
                  f"if ! {{ {ok}; }}; then echo \"=== doc-commands [{i + 1}] exited $rc\"; "
                  "exit 97; fi"]
    return "\n".join(lines) + "\n"


def env_for(clone: Path, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env.update(HOME=str(home), PATH=f"{clone / '.venv' / 'bin'}:{env.get('PATH', '')}",
               WANDB_MODE="offline", WANDB_SILENT="true", JAX_PLATFORMS="cpu",
               XLA_FLAGS="--xla_force_host_platform_device_count=4", MPLBACKEND="Agg",
               PYTHONUNBUFFERED="1")
    return env


def test_every_block_runs_or_says_why():
    """Every command block is run here or carries a reason; every marker has a reason and
    matches a command; a run-by file really runs it; the fixtures cover what blocks read."""
    problems = []
    for b in command_blocks():
        commands = b.commands()
        for m in b.markers:
            if m.kind in ("skip", "run-by") and not m.arg.strip():
                problems.append(f"{b.where}: marker on line {m.line} gives no reason")
            if m.text is not None and not any(b.applies(m, c) for c in commands):
                problems.append(f"{b.where}: marker on line {m.line}: {m.text!r} matches no "
                                "command of the block")
            if m.kind == "run-by":
                target = ROOT / m.arg.split()[0]
                if not target.is_file():
                    problems.append(f"{b.where}: run-by {target} does not exist")
                    continue
                text = squash(target.read_text(encoding="utf-8"))
                missing = [c for c in commands if squash(code(c)) not in text]
                if missing and b.doc not in text:
                    problems.append(f"{b.where}: run-by {m.arg.split()[0]} neither holds "
                                    f"{missing[0]!r} nor names {b.doc}")
        if not b.skips_whole() and not any(planned(b)):
            problems.append(f"{b.where}: every command is skipped: mark the block instead")
    assert not problems, "\n".join(problems)


def _runnable() -> list[Block]:
    return [b for b in command_blocks() if not b.skips_whole()]


@pytest.mark.slow
@pytest.mark.parametrize("block", _runnable(), ids=lambda b: b.where)
def test_documented_commands_run(block, template, tmp_path):
    clone_template, home = template
    clone = tmp_path / "clone"
    shutil.copytree(clone_template, clone, symlinks=True)
    start = time.monotonic()
    p = subprocess.run(["bash", "-c", script(block, clone)], env=env_for(clone, home),
                       capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S)
    took = time.monotonic() - start
    out = p.stdout + p.stderr
    print(f"{block.where}: {took:.1f} s")
    print("\n".join(ln for ln in out.splitlines() if ln.startswith("=== doc-commands")))
    assert p.returncode == 0, f"{block.where} (after {took:.0f} s):\n{out[-6000:]}"
    printed = [squash(o) for o in out.splitlines()]
    for line in block.expected_output():  # a line as printed; "..." at its end: a prefix
        want = squash(line)
        cut = want.endswith("...")
        assert any(o == want or (cut and o.startswith(want[:-3])) for o in printed), \
            f"{block.where}: the doc shows {line!r}; the commands printed:\n{out[-3000:]}"
