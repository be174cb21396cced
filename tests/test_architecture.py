"""The import graph of the project's packages: no cycle anywhere, and imports only go
down, between packages, between the layers of analysis/ and harness/ and between the
rooms of cleanba/.

Every .py file of the packages is parsed with `ast`; each import (module level, inside
functions, and under `if TYPE_CHECKING:`: a type-only import still ties the two modules
together, so a cycle through one is a cycle) is an edge from the module to the module it
names (`from pkg import name` names pkg.name when that is a module, else pkg). The
allowed directions are the tables below: adjust them, not the code, when a package or
layer is added.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from harness_cli import ROOT

PACKAGE_IMPORTS: dict[str, set[str]] = {
    # lowest first; each package may import only the packages listed for it
    "runrecord": set(),  # the run-record contract and exit codes
    "benchenv": set(),  # env construction, protocol and seeds (no JAX)
    "cleanba": {"runrecord", "benchenv"},  # the trainer
    "baselines": {"runrecord", "benchenv"},  # other systems' adapters (no cleanba today)
    "analysis": {"runrecord", "benchenv"},  # never the trainer or the harness
    "calibration": {"runrecord", "benchenv", "analysis"},  # measures analysis's verdicts
    "harness": {"runrecord", "benchenv", "cleanba", "baselines", "analysis"},
}
"""Allowed package order, lowest first: runrecord, benchenv, cleanba, baselines, analysis,
calibration, harness. The harness launches and checks trainers, so it alone imports
cleanba and baselines; calibration is a tool that measures analysis's verdicts, so
analysis never imports it and nothing but its own command and tests needs it."""

ANALYSIS_LAYERS: list[tuple[str, tuple[str, ...]]] = [
    # lowest first; a module may import modules of its own layer and of the layers above
    # it in this list (cycles are refused separately)
    ("base", ("analysis.errors", "analysis.json_file")),  # errors and JSON files
    ("stats", ("analysis.stats",)),
    ("scales", ("analysis.scales",)),
    ("inputs", ("analysis.inputs",)),
    ("importers", ("analysis.importers",)),  # other tools' runs (openrlbenchmark too) -> records
    ("scoring", ("analysis.scoring",)),
    ("atari5", ("analysis.atari5",)),
    ("verdicts", ("analysis.verdicts",)),
    ("output", ("analysis.output",)),
    ("reproduce", ("analysis.reproduce",)),
    ("sequential", ("analysis.sequential",)),  # adaptive seeds: only cli, harness, calibration
    ("rly", ("analysis.rly",)),  # the rliable drop-in: stats, verdicts, palette
    ("entry points", ("analysis.cli", "analysis.__main__", "analysis")),
]

HARNESS_LAYERS: list[tuple[str, tuple[str, ...]]] = [
    # lowest first, as ANALYSIS_LAYERS; harness.sweep/ and harness.adaptive/ are wings
    ("sweep", ("harness.sweep",)),  # the sweep file: read, checked, its values, expansion
    ("page", ("harness.page",)),  # the report page's HTML pieces: style, tables, table files
    ("records", ("harness.store",)),  # run folders, locks, run states, failure kinds
    # (retried or not) and which checkpoint a run resumes from
    ("adaptive", ("harness.adaptive",)),  # looks, their store, their report section
    ("launchers", ("harness._child", "harness.validate", "harness.execute", "harness.local",
                   "harness.slurm", "harness.slurm_wait",
                   "harness.curve_monitor")),
    ("certify", ("harness.certify",)),  # certificates: certify, verify (tiers 1 and 2)
    ("report", ("harness.hardware", "harness.report")),
    ("entry points", ("harness.cli_flags", "harness.cli", "harness.__main__", "harness")),
]

def wing(package: str, *layers: str) -> list[tuple[str, tuple[str, ...]]]:
    """The layers of a wing's modules, lowest first, each written as its module names
    (space-separated); the package's own __init__ (what other code imports) on top."""
    return [*((names, tuple(f"{package}.{n}" for n in names.split())) for names in layers),
            ("entry", (package,))]


# harness/sweep/: values before the checks that make them; harness/adaptive/: the looks
SWEEP_LAYERS = wing("harness.sweep", "keys tomlpos", "systems", "model", "checker",
                    "checks", "expand", "read")
ADAPTIVE_LAYERS = wing("harness.adaptive", "looks", "curves", "run")
# harness/certify/: the pure hashing and facts, what is bound, the file, then its checks
CERTIFY_LAYERS = wing("harness.certify", "flags merkle facts consistency segments", "claims bind",
                      "certificate", "tier1", "replay", "verify report_section")

CLEANBA_ROOMS: list[tuple[str, tuple[str, ...]]] = [
    # lowest first, as HARNESS_LAYERS: the trainer core imports the numerics, the
    # algorithms the core, the tools all three; nothing imports a room above its own
    ("numerics", ("cleanba.numerics",)),  # networks, losses, learner mesh, deterministic
    ("core", ("cleanba.core",)),  # config, layout, record, actor/learner threads, runtime
    ("algorithms", ("cleanba.ppo", "cleanba.impala")),  # `python -m cleanba.ppo|impala`
    ("tools", ("cleanba.tools",)),  # benchmarks, the no-op forward pass, determinism check
    # the tools' commands (`python -m cleanba.bench|determinism_check`) and the package's
    # __init__ (the stop-signal watcher and XLA flag of an entry point, before JAX)
    ("entry points", ("cleanba.bench", "cleanba.determinism_check", "cleanba.speed_bound",
                      "cleanba")),
]

# cleanba/numerics/: the losses and the mesh before what combines them; cleanba/core/: a
# run's settings before the threads that read them, the runtime that starts them on top
NUMERICS_LAYERS = wing("cleanba.numerics", "losses networks parallel", "deterministic")
CORE_LAYERS = wing("cleanba.core", "stopping xla_flags rollout_buffers actor_clock actor_state",
                   "config", "layout records checkpoint", "control channel", "algorithm checks",
                   "context", "actor", "actor_pipelined learner", "runtime", "cli")
TOOLS_LAYERS = wing("cleanba.tools", "actor_hook",
                    "throughput bench determinism_check speed_bound")

CLEANBA_TOOLS = "cleanba.tools"
"""Tools beside the trainer (benchmarks, the determinism check, the no-op forward pass):
they import the trainer, never the other way round."""

LAYERED = {"analysis": ANALYSIS_LAYERS, "harness": HARNESS_LAYERS,
           "harness.sweep": SWEEP_LAYERS, "harness.adaptive": ADAPTIVE_LAYERS,
           "harness.certify": CERTIFY_LAYERS,
           "cleanba": CLEANBA_ROOMS, "cleanba.numerics": NUMERICS_LAYERS,
           "cleanba.core": CORE_LAYERS, "cleanba.tools": TOOLS_LAYERS}
"""Each layered package (or wing, or room) and its layers: a module inside it may import
modules of its own layer and of lower ones, never higher."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    return {module_name(p): p for pkg in PACKAGE_IMPORTS for p in (ROOT / pkg).rglob("*.py")}


def type_only_imports(tree: ast.AST) -> Iterator[ast.AST]:
    """The import statements under `if TYPE_CHECKING:` (they never run, but they count)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from (n for child in node.body for n in ast.walk(child)
                        if isinstance(n, (ast.Import, ast.ImportFrom)))


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules that module `name` imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
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


def layer_of(module: str, layers: list[tuple[str, tuple[str, ...]]]) -> int:
    """Index of the layer of `module` in `layers` (longest matching prefix wins)."""
    best, best_len = -1, -1
    for i, (_, prefixes) in enumerate(layers):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best_len:
                best, best_len = i, len(p)
    return best


def analysis_layer(module: str) -> int:
    return layer_of(module, ANALYSIS_LAYERS)


def in_package(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def upward_imports(graph: dict[str, set[str]], package: str) -> tuple[list[str], list[str]]:
    """(modules of `package` that no layer of LAYERED[package] names, imports between two
    of its modules that go up a layer)."""
    layers = LAYERED[package]
    mine = [m for m in graph if in_package(m, package)]
    unplaced = [m for m in mine if layer_of(m, layers) < 0]
    bad = [f"{m} ({layers[layer_of(m, layers)][0]}) imports {d} "
           f"({layers[layer_of(d, layers)][0]})"
           for m in mine if layer_of(m, layers) >= 0
           for d in graph[m] if in_package(d, package) and layer_of(d, layers) > layer_of(m, layers)]
    return unplaced, bad


def test_graph_sees_imports():
    """The parser finds real edges, function-level ones included (a check that can fail)."""
    graph = import_graph()
    assert "analysis.inputs.load" in graph["analysis.importers.orb"]
    assert "analysis.inputs.load" in graph["harness.adaptive.run"]
    assert "analysis.verdicts.equivalence" in graph["calibration.pairs"]  # a package above
    assert len(graph) > 60


def test_harness_report_reads_analysis_through_its_public_api():
    """harness/report.py imports only `analysis` (analysis/__init__.py), never its
    internal modules: what it needs is API a notebook user has too."""
    assert {m for m in import_graph()["harness.report"] if in_package(m, "analysis")} \
        == {"analysis"}


def test_graph_sees_type_only_imports():
    """An import under `if TYPE_CHECKING:` is an edge too: a cycle through one is a cycle
    (the test once missed adaptive_design -> sweep_toml, which was one)."""
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                     "    from harness.sweep.checks import validate_sweep\n")
    assert len(list(type_only_imports(tree))) == 1
    graph = import_graph()
    assert "analysis.sequential" in graph["harness.sweep.model"]  # type-only there


def test_no_import_cycle_anywhere():
    assert cycles(import_graph()) == []


def test_packages_import_only_downward():
    bad = [f"{m} imports {d}" for m, deps in import_graph().items() for d in deps
           if d.split(".")[0] != m.split(".")[0]
           and d.split(".")[0] not in PACKAGE_IMPORTS[m.split(".")[0]]]
    assert bad == []


def test_analysis_layers_import_only_downward():
    assert upward_imports(import_graph(), "analysis") == ([], [])


def test_harness_layers_and_wings_import_only_downward():
    graph = import_graph()
    for package in ("harness", "harness.sweep", "harness.adaptive"):
        assert upward_imports(graph, package) == ([], []), package


def test_layer_check_finds_an_upward_import():
    graph = {"harness.sweep.model": {"harness.sweep.checks"}, "harness.sweep.checks": set()}
    assert upward_imports(graph, "harness.sweep")[1] == [
        "harness.sweep.model (model) imports harness.sweep.checks (checks)"]


def test_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_cleanba_rooms_import_only_downward():
    graph = import_graph()
    for package in ("cleanba", "cleanba.numerics", "cleanba.core", "cleanba.tools"):
        assert upward_imports(graph, package) == ([], []), package


def test_the_trainer_imports_none_of_its_tools():
    """A tool enters the trainer through a seam it owns (e.g. Context.actor_forward),
    never by being imported by it; only the tools' own commands import them."""
    graph = import_graph()
    tools = {m for m in graph if in_package(m, CLEANBA_TOOLS)}
    assert {"cleanba.tools.bench", "cleanba.tools.actor_hook"} <= tools
    commands = {"cleanba.bench", "cleanba.determinism_check", "cleanba.speed_bound"}
    bad = [f"{m} imports {d}" for m, deps in graph.items()
           if in_package(m, "cleanba") and m not in tools | commands
           for d in deps if d in tools]
    assert bad == []


# ---------------------------------------------------------------- third-party imports

TRAINER_STACK = {"jax", "jaxlib", "flax", "optax", "envpool", "ale_py", "torch"}
"""Not in the core install (`pip install cleanba-bench`): only the [train] extra has them."""


def external_imports(path: Path, *, module_level: bool) -> set[str]:
    """Top-level names of the modules a file imports (all of them, or only those imported
    when the module itself is imported: outside functions)."""
    def nodes(tree: ast.AST) -> Iterator[ast.AST]:
        for node in ast.walk(tree) if not module_level else ast.iter_child_nodes(tree):
            if module_level and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                  ast.Lambda)):
                continue
            if module_level and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(
                    node.test):
                continue
            yield node
            if module_level:
                yield from nodes(node)

    out: set[str] = set()
    for node in nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.add(node.module.split(".")[0])
    return out


def test_analysis_imports_no_trainer_stack_anywhere():
    """analysis and runrecord never import JAX, EnvPool, Flax, Optax or torch, not even
    inside a function; wandb only inside functions (an importer's optional reader)."""
    modules = project_modules()
    bad = []
    for name, path in modules.items():
        if name.split(".")[0] not in ("analysis", "runrecord"):
            continue
        anywhere = external_imports(path, module_level=False)
        bad += [f"{name} imports {m}" for m in sorted(anywhere & TRAINER_STACK)]
        if "wandb" in external_imports(path, module_level=True):
            bad.append(f"{name} imports wandb at module level")
    assert bad == []


def test_benchenv_imports_envpool_only_when_an_env_is_made():
    """analysis imports benchenv (the protocol): benchenv's module level has neither
    backend (EnvPool, ale-py)."""
    modules = project_modules()
    bad = [f"{name} imports {m} at module level" for name, path in modules.items()
           if name.split(".")[0] == "benchenv"
           for m in sorted(external_imports(path, module_level=True) & TRAINER_STACK)]
    assert bad == []
    # the walker sees function-level imports when asked (a check that can fail)
    assert "envpool" in external_imports(ROOT / "benchenv" / "envpool_env.py", module_level=False)
    assert "ale_py" in external_imports(ROOT / "benchenv" / "ale_env.py", module_level=False)
    assert "ale_py" in external_imports(ROOT / "benchenv" / "ale_exact.py", module_level=False)
