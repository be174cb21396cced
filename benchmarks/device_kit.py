"""Build the device kit: everything the lent GPU machine's image lacks, small enough to carry.

    python benchmarks/device_kit.py --out .device [--reference-path ~/src/cleanba]

The GPU image (../shared/GPU-IMAGE.md, docs/performance.md) has Python 3.12 with JAX 0.11.2
(CUDA 13), flax, optax, numpy, scipy, pandas, rich, psutil, but no EnvPool, gymnasium,
tyro or submitit, and no network. The kit holds, as wheels for CPython 3.12 on x86-64
Linux (installed there with `pip install --no-index --no-deps --target` into a temporary
folder by `run.sh`, never into the image's environment):

- EnvPool 1.2.5 reduced to Atari: its Python layer, the atari and classic_control modules,
  envpool.libs, and an entry.py that registers only those two families;
- envpool-assets 0.3.0 reduced to the ROMs of the suite's games (--games);
- whole: gymnasium, farama-notifications, dm-env, optree, tyro, docstring-parser, shtab,
  typeguard, submitit, cloudpickle.

Plus `run.sh` (benchmarks/device_run.sh: the one device call), README.md, MANIFEST.md (every
wheel with its version and sizes, and for each stripped wheel exactly what was kept) and
manifest.json (the same, for tests). With --reference-path, the reference Cleanba PPO
script and its LICENSE are copied into `reference/` (never committed: .device is
git-ignored) and README.md says where they came from. The wheels are downloaded once with
pip into --wheels (a cache) and reused.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from runrecord.cli_help import parse_config  # noqa: E402
from runrecord.exits import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK  # noqa: E402

RUN_SH = ROOT / "benchmarks" / "device_run.sh"
REFERENCE_FILES = ("cleanba/cleanba_ppo.py", "LICENSE")  # what the suite runs, and its licence
MIB = 1024 * 1024
# The GPU image's Python and platform (../shared/GPU-IMAGE.md); EnvPool 1.2.5's cp312 wheel is
# manylinux_2_28, the image's glibc is newer.
PIP_TARGET = ("--python-version", "3.12", "--implementation", "cp", "--abi", "cp312",
              "--abi", "abi3", "--abi", "none", "--platform", "manylinux_2_28_x86_64",
              "--platform", "manylinux_2_17_x86_64", "--platform", "manylinux2014_x86_64",
              "--platform", "any")
# Pinned to the versions this project tests with; none of them is in the GPU image.
WHEELS = (
    ("envpool", "1.2.5"), ("envpool-assets", "0.3.0"), ("gymnasium", "1.4.0"),
    ("farama-notifications", "0.0.6"), ("dm-env", "1.6"), ("optree", "0.20.0"),
    ("tyro", "1.0.17"), ("docstring-parser", "0.18.0"), ("shtab", "1.13.0"),
    ("typeguard", "4.6.1"), ("submitit", "1.5.4"), ("cloudpickle", "3.1.3"),
)
ENVPOOL_KEEP = ("envpool/__init__.py", "envpool/py.typed", "envpool/registration.py",
                "envpool/entry.py", "envpool/python/", "envpool/atari/",
                "envpool/classic_control/", "envpool.libs/")
ENVPOOL_ENTRY = '''"""Entry point for the env families of this Atari-only EnvPool (the cleanba-bench device
kit, benchmarks/device_kit.py): atari and classic_control; every other family removed."""

import envpool.atari.registration  # noqa: F401
import envpool.classic_control.registration  # noqa: F401
'''
DIST_INFO_KEEP = ("METADATA", "WHEEL", "top_level.txt", "licenses/", "LICENSE")


@dataclass
class KitConfig:
    """Build the device kit (docs/performance.md, "The one device call")."""

    out: Path
    """Kit folder (replaced if it holds an earlier kit); .device in the repo is git-ignored."""
    reference_path: Path | None = None
    """Checkout of vwxyzjn/cleanba: its cleanba/cleanba_ppo.py and LICENSE go into the kit."""
    wheels: Path = Path.home() / ".cache" / "cleanba-bench" / "device-wheels"
    """Where the downloaded wheels are kept (pip download fills it once)."""
    reference_note: str = ""
    """Where the reference checkout came from, said in the kit's README (e.g.
    github:vwxyzjn/cleanba@d1f8979c), for a checkout that is not a git repository."""
    games: tuple[str, ...] = ("Breakout-v5", "Pong-v5")
    """Atari games whose ROMs the kit holds (the suite runs Breakout-v5)."""
    max_mib: float = 24.0
    """The kit's size bound in MiB (the working tree travels at most 64 MiB in all)."""


# --------------------------------------------------------------------------------------
# pure parts


def rom_name(env_id: str) -> str:
    """`Breakout-v5` -> `breakout`, `SpaceInvaders-v5` -> `space_invaders` (EnvPool's ROMs)."""
    base = env_id.split("-")[0]
    if not base.isalnum() or not base[:1].isupper():
        raise ValueError(f"--games: {env_id!r} is not an Atari env id like Breakout-v5")
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in base).lstrip("_")


def keep_rule(name: str, games: tuple[str, ...]) -> tuple[tuple[str, ...], str]:
    """(path prefixes kept, what the rule keeps in words) of a wheel; () keeps it whole."""
    if name == "envpool":
        return ENVPOOL_KEEP, ("the Python layer (envpool/python), atari and classic_control, "
                             "envpool.libs, registration.py; entry.py replaced by one that "
                             "registers only atari and classic_control")
    if name == "envpool-assets":
        roms = tuple(f"envpool_assets/atari/roms/{rom_name(g)}.bin" for g in games)
        return ("envpool_assets/__init__.py", *roms), "envpool_assets/__init__.py and the ROMs " \
            + ", ".join(Path(r).name for r in roms)
    return (), "whole"


def kept(path: str, prefixes: tuple[str, ...]) -> bool:
    """Whether a wheel member stays: its dist-info essentials, and the rule's prefixes."""
    top, _, rest = path.partition("/")
    if top.endswith(".dist-info"):
        return rest != "RECORD" and rest.startswith(DIST_INFO_KEEP)
    return not prefixes or path.startswith(prefixes)


def record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


# --------------------------------------------------------------------------------------
# I/O


def download(wheels: Path) -> dict[str, Path]:
    """The wheel file of every WHEELS entry, downloaded into `wheels` if not there yet."""
    wheels.mkdir(parents=True, exist_ok=True)

    def find() -> dict[str, Path]:
        found = {}
        for name, version in WHEELS:
            stem = f"{name.replace('-', '_')}-{version}-"
            hits = sorted(p for p in wheels.glob("*.whl") if p.name.lower().startswith(stem))
            if hits:
                found[name] = hits[0]
        return found

    found = find()
    missing = [f"{n}=={v}" for n, v in WHEELS if n not in found]
    if missing:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               *PIP_TARGET, "--dest", str(wheels), *missing]
        print(f"[device_kit] pip download {' '.join(missing)}", flush=True)
        subprocess.run(cmd, check=True)
        found = find()
    return found


def strip_wheel(source: Path, target: Path, prefixes: tuple[str, ...]) -> tuple[int, int]:
    """Write `source` to `target` with only the kept members (and a fresh RECORD); returns
    (files kept, files dropped)."""
    n_kept = n_dropped = 0
    records = []
    record_path = ""
    with zipfile.ZipFile(source) as src, zipfile.ZipFile(
            target, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as dst:
        for info in src.infolist():
            if info.is_dir():
                continue
            if info.filename.endswith(".dist-info/RECORD"):
                record_path = info.filename
            if not kept(info.filename, prefixes):
                n_dropped += 1
                continue
            data = src.read(info)
            if info.filename == "envpool/entry.py":
                data = ENVPOOL_ENTRY.encode()
            out = zipfile.ZipInfo(info.filename, date_time=info.date_time)
            out.external_attr = info.external_attr
            out.compress_type = zipfile.ZIP_DEFLATED
            dst.writestr(out, data)
            records.append(record_line(info.filename, data))
            n_kept += 1
        dst.writestr(record_path, "\n".join([*records, f"{record_path},,"]) + "\n")
    return n_kept, n_dropped


def reference_provenance(checkout: Path) -> str:
    """Where the reference files came from: the checkout's path and git commit, if any."""
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", "-C", str(checkout), *args], capture_output=True,
                                  text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    commit = remote = ""
    top = git("rev-parse", "--show-toplevel")
    if top and Path(top).resolve() == checkout.resolve():  # not an enclosing repository's
        commit, remote = git("rev-parse", "HEAD"), git("remote", "get-url", "origin")
    return (f"copied from `{checkout.resolve()}`"
            + (f", git commit {commit}" if commit else " (not a git checkout: no commit known)")
            + (f", remote {remote}" if remote else ""))


def check_config(cfg: KitConfig) -> None:
    """Raises ValueError on bad input, before anything is written."""
    for game in cfg.games:
        rom_name(game)
    if cfg.reference_path is not None and not (cfg.reference_path / REFERENCE_FILES[0]).is_file():
        raise ValueError(f"--reference-path {cfg.reference_path}: no {REFERENCE_FILES[0]} "
                         "(expected a checkout of vwxyzjn/cleanba)")
    if cfg.out.exists() and not cfg.out.is_dir():
        raise ValueError(f"--out {cfg.out} exists and is not a folder")
    if cfg.out.is_dir() and any(cfg.out.iterdir()) and not (cfg.out / "manifest.json").exists():
        raise ValueError(f"--out {cfg.out} is a non-empty folder that is not a device kit; "
                         "name a new or kit folder")
    if cfg.reference_note and cfg.reference_path is None:
        raise ValueError("--reference-note needs --reference-path")
    if cfg.max_mib <= 0:
        raise ValueError("--max-mib must be positive")


def build(cfg: KitConfig) -> int:
    check_config(cfg)
    sources = download(cfg.wheels)
    cfg.out.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=".kit-", dir=cfg.out.parent))
    stage.chmod(0o755)
    try:
        (stage / "wheels").mkdir()
        entries = []
        for name, version in WHEELS:
            prefixes, rule = keep_rule(name, cfg.games)
            target = stage / "wheels" / sources[name].name
            n_kept, n_dropped = strip_wheel(sources[name], target, prefixes)
            entries.append({"name": name, "version": version, "wheel": target.name,
                            "source_bytes": sources[name].stat().st_size,
                            "kit_bytes": target.stat().st_size, "stripped": bool(prefixes),
                            "kept": rule, "files_kept": n_kept, "files_dropped": n_dropped})
        shutil.copy(RUN_SH, stage / "run.sh")
        (stage / "run.sh").chmod(0o755)
        provenance = None
        if cfg.reference_path is not None:
            provenance = reference_provenance(cfg.reference_path)
            if cfg.reference_note:
                provenance += f"; source: {cfg.reference_note}"
            for rel in REFERENCE_FILES:
                if (cfg.reference_path / rel).is_file():
                    (stage / "reference" / rel).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy(cfg.reference_path / rel, stage / "reference" / rel)
        manifest: dict[str, Any] = {"built_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                    "python": "cp312", "platform": "manylinux x86-64", "games": list(cfg.games),
                    "wheels": entries, "reference": provenance}
        (stage / "README.md").write_text(readme_text(provenance))
        (stage / "MANIFEST.md").write_text(manifest_text(manifest))
        total = -1
        while manifest.get("total_bytes") != total:  # the manifest counts itself (2 rounds)
            manifest["total_bytes"] = total
            (stage / "manifest.json").write_text(json.dumps(manifest, indent=2))
            total = sum(p.stat().st_size for p in stage.rglob("*") if p.is_file())
        if total > cfg.max_mib * MIB:
            print(f"error: the kit is {total / MIB:.1f} MiB, over --max-mib {cfg.max_mib}; "
                  f"not written to {cfg.out}", file=sys.stderr)
            return EXIT_FAILED
        if cfg.out.exists():
            shutil.rmtree(cfg.out)
        stage.rename(cfg.out)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    print(f"[device_kit] {cfg.out}: {total / MIB:.1f} MiB "
          f"({len(entries)} wheels{', reference' if provenance else ', no reference'})")
    return EXIT_OK


def manifest_text(manifest: dict) -> str:
    lines = ["# Device kit contents", "", f"Built {manifest['built_at']} UTC by "
             "benchmarks/device_kit.py, for CPython 3.12 on manylinux x86-64.", "",
             "| wheel | version | downloaded MiB | in kit MiB | files kept / dropped | kept |",
             "|---|---|---|---|---|---|"]
    for e in manifest["wheels"]:
        lines.append(f"| {e['name']} | {e['version']} | {e['source_bytes'] / MIB:.2f} | "
                     f"{e['kit_bytes'] / MIB:.2f} | {e['files_kept']} / {e['files_dropped']} | "
                     f"{e['kept']} |")
    lines += ["", "Dist-info of every wheel: METADATA, WHEEL, top_level.txt and licences kept; "
              "RECORD rewritten for the files kept.", "",
              f"Reference Cleanba: {manifest['reference'] or 'not in this kit'}."]
    return "\n".join(lines) + "\n"


def readme_text(provenance: str | None) -> str:
    ref = (f"`reference/` holds the reference Cleanba PPO script and its LICENSE, {provenance}. "
           "It is the user's copy of another project's code: never commit it."
           if provenance else "No reference Cleanba in this kit (build it with "
           "--reference-path to add one); the suite's reference row says 'not run'.")
    return f"""# cleanba-bench device kit

Built by `python benchmarks/device_kit.py`; git-ignored. On the GPU machine, from the repo
root (no network needed; nothing is installed into the image's environment):

    bash .device/run.sh --out $OUT            # the whole suite, at most 480 s
    bash .device/run.sh --tiny --out DIR      # small budgets (the CPU rehearsal)

`wheels/` are installed with `pip install --no-index --no-deps --target` into a temporary
folder put on PYTHONPATH with the checkout. MANIFEST.md lists every wheel, its version and
size, and what was kept of each stripped one.

{ref}
"""


if __name__ == "__main__":
    config = parse_config(KitConfig, description=__doc__.split("\n\n")[0])
    try:
        code = build(config)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        code = EXIT_BAD_INPUT
    except subprocess.CalledProcessError as exc:
        print(f"error: pip download failed ({exc}); the wheels can be put in --wheels by hand",
              file=sys.stderr)
        code = EXIT_FAILED
    sys.exit(code)
