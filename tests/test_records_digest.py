"""The running digest of a run's records (runrecord.digest, updates.csv's records_digest):
a trainer's record chains, each row over the row before, its params checksum and the
episodes that ended in its update; any change to one of those breaks the chain at the
row that covers it; a record without the column has no chain (no finding)."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from cleanba_runs import STANDARD, cached_run

from runrecord import schema
from runrecord.digest import (
    DIGEST_COLUMN,
    DIGEST_HEX,
    chain_break,
    last_digest,
    next_digest,
    record_chain_break,
)


def rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def write_rows(path: Path, table: list[dict[str, str]]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(table[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(table)


@pytest.fixture(scope="module")
def record() -> Path:
    return cached_run("ppo", *STANDARD)


def test_a_trainers_record_chains_row_by_row(record):
    updates, episodes = rows(record / schema.UPDATES_FILE), rows(record / schema.EPISODES_FILE)
    assert episodes, "the standard run ends episodes"
    digests = [u[DIGEST_COLUMN] for u in updates]
    assert all(len(d) == DIGEST_HEX and int(d, 16) >= 0 for d in digests)
    assert len(set(digests)) == len(digests)
    assert chain_break(updates, episodes) is None
    assert record_chain_break(record) is None
    assert last_digest(record) == digests[-1]
    # the first row by hand: "" before it, its checksum, the episodes of update 1
    first = [tuple(e[c] for c in ("env_steps", "frames", "env_index", "episode_return",
                                  "episode_length"))
             for e in episodes if int(e["env_steps"]) <= int(updates[0]["env_steps"])]
    assert digests[0] == next_digest("", updates[0]["params_checksum"], first)


def episode_update(updates: list[dict[str, str]], episode: dict[str, str]) -> int:
    """The 1-based row of the update in which `episode` ended."""
    return next(i for i, u in enumerate(updates, start=1)
                if int(episode["env_steps"]) <= int(u["env_steps"]))


@pytest.mark.parametrize("forgery", ["return x 3", "episode deleted", "length + 1",
                                     "env index", "checksum", "digest"])
def test_a_change_breaks_the_chain_at_the_row_that_covers_it(record, tmp_path, forgery):
    run = tmp_path / "run"
    shutil.copytree(record, run)
    updates, episodes = rows(run / schema.UPDATES_FILE), rows(run / schema.EPISODES_FILE)
    victim = len(episodes) // 2
    at = episode_update(updates, episodes[victim])
    if forgery == "return x 3":
        episodes[victim]["episode_return"] = repr(3 * float(episodes[victim]["episode_return"]))
    elif forgery == "episode deleted":
        del episodes[victim]
    elif forgery == "length + 1":
        episodes[victim]["episode_length"] = str(int(episodes[victim]["episode_length"]) + 1)
    elif forgery == "env index":
        episodes[victim]["env_index"] = str(int(episodes[victim]["env_index"]) ^ 1)
    elif forgery == "checksum":
        at = len(updates) - 1
        updates[at - 1]["params_checksum"] = "0" * 16
    else:
        at = 2
        updates[at - 1][DIGEST_COLUMN] = "f" * DIGEST_HEX
    write_rows(run / schema.UPDATES_FILE, updates)
    write_rows(run / schema.EPISODES_FILE, episodes)
    broken = record_chain_break(run)
    assert broken is not None and broken[0] == at, broken
    assert f"ended in update {updates[at - 1]['update']}" in broken[1]


def test_a_record_without_the_column_has_no_chain(record, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(record, run)
    updates = [{k: v for k, v in u.items() if k != DIGEST_COLUMN}
               for u in rows(run / schema.UPDATES_FILE)]
    write_rows(run / schema.UPDATES_FILE, updates)
    assert record_chain_break(run) is None and last_digest(run) is None
    blank = [{**u, DIGEST_COLUMN: ""} for u in updates]  # a baseline writes the cell empty
    write_rows(run / schema.UPDATES_FILE, blank)
    assert record_chain_break(run) is None and last_digest(run) is None


def test_a_checkpoint_holds_the_digest_its_rows_end_on(tmp_path):
    from cleanba_runs import TINY, run

    run_dir = tmp_path / "run"
    p = run("ppo", run_dir, *TINY, "--total-timesteps", str(4 * 16 * 5), "--checkpoint-every",
            "2")
    assert p.returncode == 0, p.stderr[-2000:]
    updates = rows(run_dir / schema.UPDATES_FILE)
    for k in (2, 4):
        meta = json.loads((run_dir / "checkpoints" / str(k) / "meta.json").read_text())
        assert meta[DIGEST_COLUMN] == updates[k - 1][DIGEST_COLUMN]
    assert record_chain_break(run_dir) is None
