"""Checkpoints of a run's whole training state, and finding the one to resume from.

A checkpoint is the state between update C and rollout C + 1, for C a multiple of
--checkpoint-every (never after the last update). Everything the run does after it
depends only on what the checkpoint holds:
- the learner's train state after update C (params, optimizer state, step count);
- the params the actors act with from rollout C + 1 on (under cleanba's queue of one,
  version C: the learner trains on the second-latest policy; sync and async take C + 1,
  the learner's);
- the action-sampling key (minibatch orders come from (seed, update, epoch), so no other
  PRNG state moves during a run);
- the rows of updates.csv and episodes.csv written through update C, and the running
  digest of row C (runrecord.digest), which the rows after it chain on.
- with a backend whose envs restore exactly (benchenv.EXACT_STATE_BACKENDS: ale-exact),
  every actor thread's envs and what it carries across the boundary (actors.bin,
  cleanba/core/actor_state.py), as the actors snapshot them at the end of rollout C.
With the other backends (EnvPool has no such call; ale-py's vector env exposes no per-env
state) there is no env state or episode accumulator to save: at every checkpoint boundary
each actor re-seeds its envs (env seeds of segment C, benchenv.env_seeds) and starts new
episodes, cutting the running ones (not recorded in episodes.csv: they never finished),
and the env protocol records it (`recorded_protocol`). Either way rollout C + 1, which may
already be in the rollout queue when the checkpoint is taken, is made again, the same bits
under --deterministic, by the resumed run (docs/cleanba.md).

On disk, in the record: checkpoints/<C>/ holds learner_state.msgpack, actor_params.msgpack
(flax.serialization) and meta.json (update, rows, key, fingerprint, each file's size and
SHA-256), written into a temporary folder, fsynced and renamed, so a folder named
checkpoints/<C> is complete; a file torn or missing after that (a disk fault, a hand) is
caught by its digest. Only the newest --checkpoint-keep folders stay; an older one is
deleted only after the newer one is durable.

Multi-process runs (--distributed) hold no state of their own beyond this: the action key
is the same on every process, the learner's state is replicated (every process holds the
same bits), the actors' params are this replica's, env seeds are a function of the global
env index, and episodes and the digest are process 0's, gathered there. So process 0 alone
writes the checkpoint (one folder, as above), and on resume process 0 alone reads the
record and picks the checkpoint; it sends it to the other processes whole (`pack`, one
broadcast: they need no view of process 0's disk), each checks it against its own code and
stack, and if any refuses it every process starts from update 0 together
(cleanba/core/runtime.py, agree_on_resume).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchenv import defining_protocol, restores_exactly
from cleanba.core.config import BOOKKEEPING_FIELDS
from runrecord.digest import DIGEST_COLUMN
from runrecord.flag_bounds import flag_name
from runrecord.ids import canonical_json
from runrecord.writer import atomic_write, fsync_dir, write_synced

CHECKPOINTS_DIR = "checkpoints"
META_FILE = "meta.json"
LEARNER_STATE_FILE = "learner_state.msgpack"
ACTOR_PARAMS_FILE = "actor_params.msgpack"
ACTORS_FILE = "actors.bin"  # exact-state backends only (cleanba/core/actor_state.py)
FORMAT_VERSION = 1
# Facts of the determinism block that can change between an attempt and its resumption
# without changing a single bit of the training (the CPUs a requeued job may use).
_STACK_FACTS_LEFT_OUT = ("usable_cpus",)


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint read back and checked: its files' bytes and its meta.json."""

    folder: Path
    update: int
    updates_rows: int
    episodes_rows: int
    actor_version: int
    wall_time_s: float
    action_key: list[int]
    learner_state: bytes
    actor_params: bytes
    records_digest: str  # the running digest of the last row it keeps (runrecord.digest)
    fingerprint: dict[str, Any] = field(default_factory=dict)  # the meta.json's
    actor_state: bytes = b""  # ACTORS_FILE's bytes; b"": the run re-seeds its envs


RESEED_PROTOCOL_KEY = "reseed_every_updates"


def reseed_every(protocol: Mapping[str, Any], every: int) -> int:
    """Every how many updates the run re-seeds its envs: `every` (the checkpoint interval),
    or 0 when its backend restores env state exactly (checkpoints then hold the envs)."""
    return 0 if restores_exactly(dict(protocol)) else every


def recorded_protocol(protocol: Mapping[str, Any], every: int) -> dict[str, Any]:
    """The env protocol the record states: with checkpoints that re-seed, every env is
    re-seeded every `every` updates, the episodes running then cut (a defining key: such
    runs never pool with runs without it). An exact-state backend's run is the run without
    checkpoints: its protocol, and run id, unchanged."""
    every = reseed_every(protocol, every)
    return {**protocol, RESEED_PROTOCOL_KEY: every} if every > 0 else dict(protocol)


def is_boundary(update: int, every: int, num_updates: int) -> bool:
    """Whether the run checkpoints (and re-seeds its envs) after `update`."""
    return every > 0 and update % every == 0 and 0 < update < num_updates


def env_segment(iteration: int, every: int) -> int:
    """The env-seed segment of rollout `iteration` (1-based): the last checkpoint boundary
    before it, 0 before the first (or with no checkpoints)."""
    return 0 if every <= 0 else (iteration - 1) // every * every


def fingerprint(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """What must match for a checkpoint to be used: the configuration (every defining
    flag, the env protocol, the layout), the code (git commit and dirty flag, package
    versions) and the stack (the determinism block: platform, device, jax, XLA flags)."""
    hp = {k: v for k, v in manifest["hyperparameters"].items() if k not in BOOKKEEPING_FIELDS}
    provenance = manifest["provenance"]
    git = provenance.get("git") or {}
    return {
        "configuration": {
            "system": manifest["system"], "env_id": manifest["env_id"],
            "seed": manifest["seed"], "hyperparameters": hp,
            "env_protocol": defining_protocol(manifest["env_protocol"]),
            "layout": {k: v for k, v in manifest["layout"].items() if k != "num_cpus"},
        },
        "code": {"git_sha": git.get("sha"), "git_dirty": git.get("dirty"),
                 "packages": provenance.get("packages")},
        "stack": {k: v for k, v in (manifest.get("determinism") or {}).items()
                  if k not in _STACK_FACTS_LEFT_OUT},
    }


def fingerprint_difference(saved: Mapping[str, Any], current: Mapping[str, Any]) -> str:
    """'' when they match, else which parts differ, in words."""
    parts = []
    for part in ("configuration", "code", "stack"):
        a, b = canonical_json(saved.get(part)), canonical_json(current.get(part))
        if a == b:
            continue
        old, new = saved.get(part) or {}, current.get(part) or {}
        keys = sorted(k for k in set(old) | set(new)
                      if canonical_json(old.get(k)) != canonical_json(new.get(k)))
        if "hyperparameters" in keys:
            hp_old, hp_new = old.get("hyperparameters") or {}, new.get("hyperparameters") or {}
            keys.remove("hyperparameters")
            keys += sorted(flag_name(k) for k in set(hp_old) | set(hp_new)
                           if hp_old.get(k) != hp_new.get(k))
        parts.append(f"another {part} ({', '.join(keys)})")
    return "; ".join(parts)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write(run_dir: Path, update: int, files: Mapping[str, bytes], meta: Mapping[str, Any],
          keep: int) -> Path:
    """Write checkpoints/<update>/ atomically (temp folder, fsync, rename, fsync), then
    delete all but the newest `keep` checkpoints. Returns the folder."""
    root = Path(run_dir) / CHECKPOINTS_DIR
    root.mkdir(exist_ok=True)
    final = root / str(update)
    tmp = root / f".tmp-{update}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    for name, data in files.items():
        write_synced(tmp / name, data)
    full_meta = {"format": FORMAT_VERSION, "update": update, **meta,
                 "files": {name: {"bytes": len(data), "sha256": _sha256(data)}
                           for name, data in files.items()}}
    # meta.json last: a folder whose meta.json names every file is complete
    write_synced(tmp / META_FILE, (json.dumps(full_meta, indent=1) + "\n").encode())
    fsync_dir(tmp)
    if final.exists():  # a resumed run passing the boundary it resumed from again
        shutil.rmtree(final)
    os.rename(tmp, final)
    fsync_dir(root)
    for old in updates_on_disk(run_dir)[keep:]:
        shutil.rmtree(root / str(old), ignore_errors=True)
    return final


def updates_on_disk(run_dir: Path) -> list[int]:
    """The updates of the checkpoint folders in the record, newest first."""
    root = Path(run_dir) / CHECKPOINTS_DIR
    if not root.is_dir():
        return []
    return sorted((int(p.name) for p in root.iterdir() if p.name.isdigit()), reverse=True)


def read(folder: Path, current_fingerprint: Mapping[str, Any],
         csv_rows: Mapping[str, int]) -> Checkpoint:
    """The checkpoint in `folder`, checked: ValueError saying why it cannot be used (torn:
    meta.json or a file missing, truncated or not matching its digest; another
    configuration, code or stack; the record holds fewer rows than it names)."""
    try:
        meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"torn: {META_FILE} missing or unreadable ({type(exc).__name__})") \
            from None
    data: dict[str, bytes] = {}
    optional = [ACTORS_FILE] if ACTORS_FILE in (meta.get("files") or {}) else []
    for name in (LEARNER_STATE_FILE, ACTOR_PARAMS_FILE, *optional):
        entry = (meta.get("files") or {}).get(name)
        try:
            data[name] = (folder / name).read_bytes()
        except OSError:
            raise ValueError(f"torn: {name} missing") from None
        if entry is None or len(data[name]) != entry["bytes"] \
                or _sha256(data[name]) != entry["sha256"]:
            raise ValueError(f"torn: {name} does not match the size and SHA-256 in {META_FILE}")
    if meta.get("format") != FORMAT_VERSION:
        raise ValueError(f"format {meta.get('format')}, this code reads {FORMAT_VERSION}")
    difference = fingerprint_difference(meta.get("fingerprint") or {}, current_fingerprint)
    if difference:
        raise ValueError(difference)
    rows = meta["rows"]
    for name, needed in rows.items():
        if csv_rows.get(name, 0) < needed:
            raise ValueError(f"the record's {name} holds {csv_rows.get(name, 0)} rows, fewer "
                             f"than the {needed} it names")
    return Checkpoint(folder, int(meta["update"]), int(rows["updates.csv"]),
                      int(rows["episodes.csv"]), int(meta["actor_version"]),
                      float(meta["wall_time_s"]), list(meta["action_key"]),
                      data[LEARNER_STATE_FILE], data[ACTOR_PARAMS_FILE],
                      str(meta.get(DIGEST_COLUMN, "")), dict(meta.get("fingerprint") or {}),
                      data.get(ACTORS_FILE, b""))


_STATE_FIELDS = ("learner_state", "actor_params", "actor_state")


def pack(found: Checkpoint) -> bytes:
    """A checkpoint as one byte string (a header's length, the JSON header, the state
    files' bytes): what process 0 sends the other processes of a run on resume."""
    head = {k: v for k, v in asdict(found).items() if k not in _STATE_FIELDS}
    head["folder"] = str(found.folder)
    head["sizes"] = [len(found.learner_state), len(found.actor_params)]
    text = json.dumps(head).encode()
    return (len(text).to_bytes(8, "little") + text + found.learner_state + found.actor_params
            + found.actor_state)


def unpack(data: bytes) -> Checkpoint:
    """The checkpoint `pack` made."""
    n = int.from_bytes(data[:8], "little")
    head = json.loads(data[8:8 + n])
    state_size, params_size = head.pop("sizes")
    body = data[8 + n:]
    head["folder"] = Path(head["folder"])
    return Checkpoint(**head, learner_state=body[:state_size],
                      actor_params=body[state_size:state_size + params_size],
                      actor_state=body[state_size + params_size:])


def newest_usable(run_dir: Path, current_fingerprint: Mapping[str, Any],
                  csv_rows: Mapping[str, int]) -> tuple[Checkpoint | None, list[str]]:
    """The newest checkpoint of the record that `read` accepts, and one line per newer
    checkpoint skipped (why), for the console and the manifest."""
    skipped: list[str] = []
    for update in updates_on_disk(run_dir):
        folder = Path(run_dir) / CHECKPOINTS_DIR / str(update)
        try:
            return read(folder, current_fingerprint, csv_rows), skipped
        except ValueError as exc:
            skipped.append(f"checkpoints/{update} not used: {exc}")
    return None, skipped


def state_files(learner_state: Any, actor_params: Any) -> dict[str, bytes]:
    """The checkpoint's files of a train state and the actors' params (host or device
    pytrees; one replica), in flax's msgpack: every array's exact bytes."""
    import jax
    from flax import serialization

    return {LEARNER_STATE_FILE: serialization.to_bytes(jax.device_get(learner_state)),
            ACTOR_PARAMS_FILE: serialization.to_bytes(jax.device_get(actor_params))}


def restored_state(checkpoint: Checkpoint, template_state: Any) -> tuple[Any, Any]:
    """(learner train state, actors' params) of `checkpoint` in the structure of
    `template_state` (a freshly initialised train state, on the host)."""
    from flax import serialization

    state = serialization.from_bytes(template_state, checkpoint.learner_state)
    params = serialization.from_bytes(template_state.params, checkpoint.actor_params)
    return state, params


def complete_rows(path: Path) -> int:
    """Data rows of a CSV record file (a torn last line, without its newline, not counted)."""
    try:
        text = Path(path).read_bytes()
    except OSError:
        return 0
    return max(0, text.count(b"\n") - 1)


def truncate_rows(path: Path, rows: int) -> None:
    """Keep the header and the first `rows` data rows of a CSV record file, replacing it
    atomically (temp file, fsync, rename): a kill leaves the old file or the new one."""
    path = Path(path)
    lines = path.read_bytes().split(b"\n")
    kept = b"".join(line + b"\n" for line in lines[: 1 + rows])
    atomic_write(path, lambda f: f.write(kept))
