"""Whether the two sides of a comparison ran the same software and device: the jax,
jaxlib and EnvPool versions and the device kind each run's manifest records. A verdict
between layouts is read as a verdict about the layouts only when these agree; when they
differ, `python -m analysis equivalence` and the report say so under the verdict (the
comparison then also spans the versions or the hardware). And which bitwise claim the
comparison can rely on, from the `determinism` blocks of the manifests
(runrecord.determinism, docs/deterministic.md), printed on the line under the verdict."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from analysis.scoring.scores import GroupScores

# (key in the result, name in the line). Packages come from provenance.packages.
STACK_PACKAGES = ("jax", "jaxlib", "envpool")
DEVICE_KIND = "device_kind"
NAMES = {"jax": "jax", "jaxlib": "jaxlib", "envpool": "EnvPool", DEVICE_KIND: "device kind"}
NOT_RECORDED = "not recorded"


def run_stack(manifest: Mapping[str, Any]) -> dict[str, str]:
    """The stack facts of one run: the versions in provenance.packages (for jax/jaxlib,
    else the determinism block's, which trainers also write) and the device kinds of its
    layout ('cpu', 'NVIDIA H100 80GB HBM3'; several joined by ' + '). NOT_RECORDED for a
    fact the manifest lacks (a baseline has no jax; a synthetic record has no versions)."""
    packages = (manifest.get("provenance") or {}).get("packages") or {}
    block = manifest.get("determinism") or {}
    out = {name: packages.get(name) or block.get(name) for name in STACK_PACKAGES}
    kinds = sorted({str(d) for d in (manifest.get("layout") or {}).get("devices") or []})
    out[DEVICE_KIND] = " + ".join(kinds) or block.get(DEVICE_KIND)
    return {key: str(value) if value else NOT_RECORDED for key, value in out.items()}


@dataclass
class StackComparison:
    """What each side ran (every distinct value per fact, sorted), what differs between
    the sides and which facts some runs did not record (so cannot be compared)."""

    a: dict[str, list[str]]
    reference: dict[str, list[str]]
    differences: list[str]
    unrecorded: list[str]

    @property
    def same(self) -> bool:
        return not self.differences and not self.unrecorded

    def line(self, group_a: str, reference: str) -> str:
        """The line printed under a pair's verdict."""
        head = f"software and device of {group_a} and reference {reference}: "
        if self.differences:
            return (head + "DIFFER: " + "; ".join(self.differences)
                    + " (the verdict spans these too, not only the layouts)"
                    + (f"; {NOT_RECORDED}: {', '.join(self.unrecorded)}"
                       if self.unrecorded else ""))
        facts = ", ".join(f"{NAMES[k]} {' / '.join(v)}" for k, v in self.a.items()
                          if NOT_RECORDED not in v)
        if self.unrecorded:
            return (head + f"same where recorded ({facts or 'nothing'}); "
                    f"{NOT_RECORDED}: {', '.join(self.unrecorded)}")
        return head + f"same ({facts})"

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "same": self.same}


def compare_stacks(manifests_a: Sequence[Mapping[str, Any]],
                   manifests_b: Sequence[Mapping[str, Any]]) -> StackComparison:
    """run_stack of every run of side A against the reference side B. A fact differs when
    the values recorded on the two sides differ (a side mixing versions shows all of them);
    a fact some run lacks is listed as not recorded (in the group, the reference or both)."""
    stacks_a = [run_stack(m) for m in manifests_a]
    stacks_b = [run_stack(m) for m in manifests_b]
    keys = (*STACK_PACKAGES, DEVICE_KIND)
    a = {k: sorted({s[k] for s in stacks_a}) for k in keys}
    b = {k: sorted({s[k] for s in stacks_b}) for k in keys}
    differences, unrecorded = [], []
    for k in keys:
        known_a = [v for v in a[k] if v != NOT_RECORDED]
        known_b = [v for v in b[k] if v != NOT_RECORDED]
        if known_a and known_b and known_a != known_b:
            differences.append(f"{NAMES[k]} {' / '.join(known_a)} (group) vs "
                               f"{' / '.join(known_b)} (reference)")
        sides = [side for side, values in (("the group", a[k]), ("the reference", b[k]))
                 if NOT_RECORDED in values]
        if sides:
            unrecorded.append(f"{NAMES[k]} (in {' and '.join(sides)})")
    return StackComparison(a, b, differences, unrecorded)


def group_stacks(a: GroupScores, b: GroupScores) -> StackComparison:
    """compare_stacks of every run of two groups (their manifests)."""
    return compare_stacks([r.manifest for r in a.runs.values()],
                          [r.manifest for r in b.runs.values()])


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
    off = [side for side, group in (("the group", blocks_a), ("the reference", blocks_b))
           if not all(b and b.get("deterministic") for b in group)]
    reasons = (["deterministic mode off on both sides"] if len(off) == 2
               else [f"deterministic mode off in {side}" for side in off])
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
