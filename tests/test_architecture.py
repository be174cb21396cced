"""The import graph of the project's packages: no cycle anywhere, and imports only go
down, between packages and between the layers of analysis/.

Every .py file of the packages is parsed with `ast`; each import (module level and inside
functions, but not under `if TYPE_CHECKING:`, which never runs) is an edge from the module
to the module it names (`from pkg import name` names pkg.name when that is a module, else
pkg). The allowed directions are the two tables below: adjust them, not the code, when a
package or layer is added.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PACKAGE_IMPORTS: dict[str, set[str]] = {
    # lowest first; each package may import only the packages listed for it
    "runrecord": set(),  # the run-record contract and exit codes
    "benchenv": set(),  # env construction, protocol and seeds (no JAX)
    "cleanba": {"runrecord", "benchenv"},  # the trainer
    "baselines": {"runrecord", "benchenv"},  # other systems' adapters (no cleanba today)
    "analysis": {"runrecord", "benchenv"},  # never the trainer or the harness
    "harness": {"runrecord", "benchenv", "cleanba", "baselines", "analysis"},
}
"""Allowed package order, lowest first: runrecord, benchenv, cleanba, baselines, analysis,
harness. The harness launches and checks trainers, so it alone imports cleanba and
baselines."""

ANALYSIS_LAYERS: list[tuple[str, tuple[str, ...]]] = [
    # lowest first; a module may import modules of its own layer and of the layers above
    # it in this list (cycles are refused separately)
    ("base", ("analysis.errors", "analysis.json_file")),  # errors and JSON files
    ("stats", ("analysis.stats",)),
    ("scales", ("analysis.scales",)),
    ("inputs", ("analysis.inputs",)),
    ("importers", ("analysis.importers",)),  # other tools' runs -> run records
    ("scoring", ("analysis.scoring",)),
    ("atari5", ("analysis.atari5",)),
    ("verdicts", ("analysis.verdicts",)),
    ("output", ("analysis.output",)),
    ("reproduce", ("analysis.reproduce",)),
    ("sequential", ("analysis.sequential",)),  # adaptive seeds: only calibration, cli, harness
    ("calibration", ("analysis.calibration",)),
    ("entry points", ("analysis.cli", "analysis.__main__", "analysis")),
]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    return {module_name(p): p for pkg in PACKAGE_IMPORTS for p in (ROOT / pkg).rglob("*.py")}


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node except those under `if TYPE_CHECKING:` (type checkers only)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from (n for child in node.orelse for n in [child, *_runtime_nodes(child)])
            continue
        yield node
        yield from _runtime_nodes(node)


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules that module `name` imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for a in node.names:
                out.add(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base)
    return {m for m in out if m in modules and m != name}


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        m = stack.pop()
                        on_stack.discard(m)
                        component.append(m)
                        if m == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def analysis_layer(module: str) -> int:
    """Index of the analysis layer of `module` (longest matching prefix wins)."""
    best, best_len = -1, -1
    for i, (_, prefixes) in enumerate(ANALYSIS_LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best_len:
                best, best_len = i, len(p)
    return best


def test_graph_sees_imports():
    """The parser finds real edges, function-level ones included (a check that can fail)."""
    graph = import_graph()
    assert "analysis.inputs.load" in graph["analysis.inputs.orb"]
    assert "analysis.verdicts.gate" in graph["harness.report"]
    assert len(graph) > 60


def test_no_import_cycle_anywhere():
    assert cycles(import_graph()) == []


def test_packages_import_only_downward():
    bad = [f"{m} imports {d}" for m, deps in import_graph().items() for d in deps
           if d.split(".")[0] != m.split(".")[0]
           and d.split(".")[0] not in PACKAGE_IMPORTS[m.split(".")[0]]]
    assert bad == []


def test_analysis_layers_import_only_downward():
    graph = import_graph()
    unplaced = [m for m in graph if m.startswith("analysis") and analysis_layer(m) < 0]
    assert unplaced == []
    bad = [f"{m} ({ANALYSIS_LAYERS[analysis_layer(m)][0]}) imports {d} "
           f"({ANALYSIS_LAYERS[analysis_layer(d)][0]})"
           for m, deps in graph.items() if m.startswith("analysis")
           for d in deps if d.startswith("analysis") and analysis_layer(d) > analysis_layer(m)]
    assert bad == []


def test_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
