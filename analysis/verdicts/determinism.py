"""Which bitwise claim a comparison of two groups can rely on, from the `determinism`
blocks of their manifests (runrecord.determinism, docs/deterministic.md): the line that
`python -m analysis equivalence` and the report print under each pair's verdict."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from analysis.scoring.scores import GroupScores

MEANINGFUL = ("bitwise comparison meaningful: both sides deterministic on the same device "
              "kind, jax/jaxlib and XLA flags")
NOT_EXPECTED = "bitwise not expected: "  # then what differs
UNKNOWN = "unknown: records without a determinism block (written before it, or imported)"

# What must be equal for equal bits, with its name in the line. On CPU the split of work
# over threads also depends on the virtual device count and the usable cores.
SAME_EVERYWHERE = (("deterministic_groups", "deterministic groups"),
                   ("platform", "platform"), ("device_kind", "device kind"),
                   ("jax", "jax"), ("jaxlib", "jaxlib"), ("xla_flags", "XLA flags"),
                   ("default_matmul_precision", "default matmul precision"),
                   ("prng_impl", "PRNG implementation"), ("cuda", "CUDA/cuDNN"))
SAME_ON_CPU = (("device_count", "device count"), ("usable_cpus", "usable CPU cores"),
               ("cpu", "CPU"))
# Keys added to the block after it was introduced: a record without one says nothing about
# it (compared only among the records that have it).
LATER_KEYS = frozenset({"cpu", "prng_impl", "cuda"})


def _differs(name: str, key: str, values: list[Any]) -> str | None:
    if key == "xla_flags":
        sets = [frozenset(str(v).split()) for v in values]
        uneven = sorted(frozenset.union(*sets) - frozenset.intersection(*sets))
        return f"{name} differ (not in every run: {' '.join(uneven)})" if uneven else None
    distinct = sorted({str(v) for v in values})
    return f"{name} differs ({' vs '.join(distinct)})" if len(distinct) > 1 else None


def determinism_tier(blocks_a: Sequence[Mapping[str, Any] | None],
                     blocks_b: Sequence[Mapping[str, Any] | None]) -> str:
    """The tier of a comparison of runs A with reference runs B, from their determinism
    blocks (None: a record without one): MEANINGFUL, "bitwise not expected: <what
    differs>" or UNKNOWN."""
    blocks = [*blocks_a, *blocks_b]
    if not blocks_a or not blocks_b:
        return "unknown: no run records to read"
    missing = sum(b is None for b in blocks)
    if missing:
        return f"{UNKNOWN} ({missing} of {len(blocks)} runs)"
    reasons = [f"deterministic mode off in {side}"
               for side, group in (("A", blocks_a), ("the reference", blocks_b))
               if not all(b and b.get("deterministic") for b in group)]
    keys: tuple[tuple[str, str], ...] = SAME_EVERYWHERE
    if all(b and b.get("platform") == "cpu" for b in blocks):
        keys += SAME_ON_CPU
    for key, name in keys:
        values = [b.get(key) for b in blocks
                  if b is not None and (key not in LATER_KEYS or b.get(key) is not None)]
        reason = _differs(name, key, values) if values else None
        if reason:
            reasons.append(reason)
    return f"{NOT_EXPECTED}{'; '.join(reasons)}" if reasons else MEANINGFUL


def group_determinism_tier(a: GroupScores, b: GroupScores) -> str:
    """determinism_tier of every run of two groups (their manifests' blocks)."""
    return determinism_tier([r.manifest.get("determinism") for r in a.runs.values()],
                            [r.manifest.get("determinism") for r in b.runs.values()])
