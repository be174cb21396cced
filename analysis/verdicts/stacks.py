"""Whether the two sides of a comparison ran the same software and device: the jax,
jaxlib and EnvPool versions and the device kind each run's manifest records. A verdict
between layouts is read as a verdict about the layouts only when these agree; when they
differ, `python -m analysis equivalence` and the report say so under the verdict (the
comparison then also spans the versions or the hardware)."""

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


def _values(stacks: Sequence[Mapping[str, str]], key: str) -> list[str]:
    return sorted({s[key] for s in stacks})


def compare_stacks(manifests_a: Sequence[Mapping[str, Any]],
                   manifests_b: Sequence[Mapping[str, Any]]) -> StackComparison:
    """run_stack of every run of side A against the reference side B. A fact differs when
    the values recorded on the two sides differ (a side mixing versions shows all of them);
    a fact some run lacks is listed as not recorded (in A, the reference or both)."""
    stacks_a = [run_stack(m) for m in manifests_a]
    stacks_b = [run_stack(m) for m in manifests_b]
    keys = (*STACK_PACKAGES, DEVICE_KIND)
    a = {k: _values(stacks_a, k) for k in keys}
    b = {k: _values(stacks_b, k) for k in keys}
    differences, unrecorded = [], []
    for k in keys:
        known_a = [v for v in a[k] if v != NOT_RECORDED]
        known_b = [v for v in b[k] if v != NOT_RECORDED]
        if known_a and known_b and known_a != known_b:
            differences.append(f"{NAMES[k]} {' / '.join(known_a)} (A) vs "
                               f"{' / '.join(known_b)} (reference)")
        sides = [side for side, values in (("A", a[k]), ("the reference", b[k]))
                 if NOT_RECORDED in values]
        if sides:
            unrecorded.append(f"{NAMES[k]} (in {' and '.join(sides)})")
    return StackComparison(a, b, differences, unrecorded)


def group_stacks(a: GroupScores, b: GroupScores) -> StackComparison:
    """compare_stacks of every run of two groups (their manifests)."""
    return compare_stacks([r.manifest for r in a.runs.values()],
                          [r.manifest for r in b.runs.values()])
