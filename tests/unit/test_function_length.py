"""No function in ``src/tokometer`` is longer than `MAX_LINES` lines: a longer one does several things, and each
of them wants a name (and a docstring) of its own.

Every module is parsed with `ast` (nothing is imported). A function's length is ``end_lineno - lineno + 1``:
from its ``def`` line (its decorators not counted) to its last line, docstring, comments and blank lines
included. Methods and nested functions count like the others; a nested function is named after the functions
and classes around it (``create_app.generate``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "tokometer"
MAX_LINES = 60

# Functions allowed over the limit: none. Keep it so; a function that must be longer says why here.
ALLOWED: frozenset[str] = frozenset()


def _functions(node: ast.AST, prefix: str = "") -> Iterator[tuple[str, int]]:
    """Each function under ``node`` as (its qualified name, its length in lines)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = prefix + child.name
            assert child.end_lineno is not None
            yield name, child.end_lineno - child.lineno + 1
            yield from _functions(child, f"{name}.")
        elif isinstance(child, ast.ClassDef):
            yield from _functions(child, f"{prefix}{child.name}.")
        else:
            yield from _functions(child, prefix)


def function_lengths() -> dict[str, int]:
    """``path:qualified.name`` (the path relative to src/tokometer) -> the function's length in lines."""
    lengths: dict[str, int] = {}
    for path in sorted(SRC.rglob("*.py")):
        module = path.relative_to(SRC).as_posix()
        for name, lines in _functions(ast.parse(path.read_text("utf-8"), str(path))):
            lengths[f"{module}:{name}"] = max(lines, lengths.get(f"{module}:{name}", 0))
    return lengths


def _allowed(function: str) -> bool:
    """Whether ``function`` is an allowed one, or nested in one."""
    return any(function == entry or function.startswith(f"{entry}.") for entry in ALLOWED)


def test_the_finder_sees_methods_nested_and_async_functions() -> None:
    tree = ast.parse("class A:\n    def f(self):\n        async def g():\n            pass\n\n"
                     "        return g\n\n\nasync def h():\n    if True:\n        def k():\n            pass\n")
    assert dict(_functions(tree)) == {"A.f": 5, "A.f.g": 2, "h": 4, "h.k": 2}
    lengths = function_lengths()
    assert lengths["engines/vllm.py:plan_vllm"] > 1
    assert lengths["load/processes.py:_Workers.close"] > 1


def test_no_function_is_over_the_limit() -> None:
    over = {name: lines for name, lines in function_lengths().items() if lines > MAX_LINES}
    offenders = sorted(f"{name} ({lines} lines)" for name, lines in over.items() if not _allowed(name))
    assert not offenders, f"functions over {MAX_LINES} lines, split them: " + "; ".join(offenders)
    gone = sorted(entry for entry in ALLOWED if entry not in over)
    assert not gone, f"no longer over {MAX_LINES} lines (or gone), delete from ALLOWED: {gone}"
