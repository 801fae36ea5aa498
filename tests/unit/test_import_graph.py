"""No import cycles between tokometer's packages, nor between the modules of one package: the data flows one way.

Every module under ``src/tokometer`` is parsed with `ast` (nothing is imported). Each import of
``tokometer.X...`` from a module in package (or top-level module) ``Y`` is an edge Y → X; imports
inside packages (gateway's app → relay → prober) are not package edges. Every import counts: at module
level, inside functions (a lazy import is still a dependency; the engines ↔ perf cycle hid in one)
and under ``if TYPE_CHECKING:``. A cycle is a strongly connected set of two or more packages.

Inside a package the same holds between modules: an import of ``tokometer.X.Y`` (``from
tokometer.X import Y`` too, when ``Y`` is a submodule) from module ``tokometer.X.Z`` is an edge
Z → Y, and the package's ``__init__`` is a module like the others (``tokometer.X``): an
``__init__`` that re-exports from ``run`` while ``run`` imports a name from the ``__init__`` is a
cycle. Importing a submodule runs its package's ``__init__`` first; that implicit step is not an edge.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "tokometer"
ROOT = "tokometer"  # the package's own __init__ (``from tokometer import __version__``)

# Cycles present in code this test's author does not own, allowed until they are fixed. Each entry
# must still be a cycle (the test fails once one is gone: delete its entry then).
KNOWN_CYCLES: dict[frozenset[str], str] = {}
# The same between modules of one package (full dotted names).
KNOWN_MODULE_CYCLES: dict[frozenset[str], str] = {}


def _package_of(module: str) -> str:
    """``tokometer.engines.vllm`` -> ``engines``; ``tokometer.util.gguf`` -> ``util``; ``tokometer`` -> ROOT."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ROOT


def _modules() -> Iterator[tuple[str, bool, Path]]:
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        is_init = parts[-1] == "__init__"
        yield ".".join(parts[:-1] if is_init else parts), is_init, path


def _exists(module: str) -> bool:
    relative = Path(*module.split(".")[1:])
    return (SRC / relative).is_dir() or (SRC / relative).with_suffix(".py").is_file()


def _imported(module: str, is_init: bool, tree: ast.AST) -> Iterator[str]:
    """The tokometer modules ``module`` imports, anywhere in its body."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")[: None if is_init else -1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            # from tokometer import engines / __version__; from tokometer.metrics import request
            yield from (f"{target}.{a.name}" if _exists(f"{target}.{a.name}") else target for a in node.names)


def package_graph() -> dict[str, dict[str, set[str]]]:
    """package -> imported package -> the files (relative to src/tokometer) that import it."""
    graph: dict[str, dict[str, set[str]]] = {}
    for module, is_init, path in _modules():
        source = _package_of(module)
        graph.setdefault(source, {})
        for target in _imported(module, is_init, ast.parse(path.read_text("utf-8"), str(path))):
            if target != ROOT and not target.startswith(f"{ROOT}."):
                continue
            package = _package_of(target)
            if package != source:
                graph[source].setdefault(package, set()).add(str(path.relative_to(SRC)))
    return graph


def module_graph() -> dict[str, dict[str, set[str]]]:
    """module -> imported module of the same package -> the file that imports it (one, its own)."""
    graph: dict[str, dict[str, set[str]]] = {}
    for module, is_init, path in _modules():
        graph.setdefault(module, {})
        package = _package_of(module)
        for target in _imported(module, is_init, ast.parse(path.read_text("utf-8"), str(path))):
            if target == module or not target.startswith(f"{ROOT}.") or _package_of(target) != package:
                continue
            graph[module].setdefault(target, set()).add(str(path.relative_to(SRC)))
    return graph


def cycles(graph: dict[str, dict[str, set[str]]]) -> list[frozenset[str]]:
    """The strongly connected sets of two or more nodes (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, {}):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            members = set()
            while True:
                member = stack.pop()
                members.add(member)
                if member == node:
                    break
            if len(members) > 1:
                found.append(frozenset(members))

    for node in sorted(set(graph) | {t for targets in graph.values() for t in targets}):
        if node not in index:
            visit(node)
    return found


def _describe(cycle: frozenset[str], graph: dict[str, dict[str, set[str]]]) -> str:
    edges = [f"{a} → {b} ({', '.join(sorted(graph[a][b]))})" for a in sorted(cycle) for b in sorted(cycle)
             if b in graph.get(a, {})]
    return "; ".join(edges)


def test_the_graph_sees_lazy_and_relative_imports() -> None:
    graph = package_graph()
    assert "cli" in graph["__main__"]
    assert {"perf", "util", "bundled"} <= set(graph["engines"])  # the planner's perf import is at module level
    assert "tokens" in graph["cli"]  # cli imports its commands' libraries inside functions
    assert graph.get("util", {}) == {}  # the leaf utilities import no other package
    assert set(graph["bundled"]) <= {"util"}
    modules = module_graph()
    assert not modules.get("tokometer.util.errors")  # a leaf
    assert not modules.get("tokometer.util.gguf")  # the GGUF reader imports nothing from tokometer
    # the one writer of whole files, and the one resolver of what an output's name is
    assert set(modules["tokometer.util.atomicfile"]) == {"tokometer.util.errors", "tokometer.util.outputtarget"}
    assert set(modules["tokometer.util.outputtarget"]) == {"tokometer.util.errors"}


def test_the_cycle_finder() -> None:
    graph: dict[str, dict[str, set[str]]] = {"a": {"b": set()}, "b": {"c": set()}, "c": {"a": set(), "d": set()},
                                             "e": {"a": set()}}
    assert cycles(graph) == [frozenset("abc")]
    assert cycles({"engines": {"perf": set()}, "perf": {"errors": set()}}) == []


def test_no_cycles_between_packages() -> None:
    graph = package_graph()
    found = cycles(graph)
    new = [c for c in found if c not in KNOWN_CYCLES]
    assert not new, "import cycles between packages: " + " | ".join(_describe(c, graph) for c in new)
    gone = [KNOWN_CYCLES[c] for c in KNOWN_CYCLES if c not in found]
    assert not gone, f"no longer a cycle, delete it from KNOWN_CYCLES: {gone}"


def test_the_module_graph_sees_submodules_and_lazy_imports() -> None:
    graph = module_graph()
    assert "tokometer.metrics.request" in graph["tokometer.metrics.summary"]  # from tokometer.metrics import request
    assert "tokometer.metrics.summary" in graph["tokometer.metrics"]  # the __init__ re-exports summary's names
    assert "tokometer.doctor.finding" in graph["tokometer.doctor.run"]
    assert "tokometer.engines.build" in graph["tokometer.engines.binary"]  # lazy, inside find_llama_server
    assert "tokometer.perf.roofline" in graph["tokometer.perf.render"]  # under if TYPE_CHECKING:
    assert all(_package_of(t) == _package_of(m) for m, targets in graph.items() for t in targets)
    assert "tokometer.util.errors" not in graph["tokometer.engines.build"]  # another package: not a module edge


def test_no_cycles_between_modules_of_a_package() -> None:
    graph = module_graph()
    found = cycles(graph)
    new = [c for c in found if c not in KNOWN_MODULE_CYCLES]
    assert not new, "import cycles between modules: " + " | ".join(_describe(c, graph) for c in new)
    gone = [KNOWN_MODULE_CYCLES[c] for c in KNOWN_MODULE_CYCLES if c not in found]
    assert not gone, f"no longer a cycle, delete it from KNOWN_MODULE_CYCLES: {gone}"
