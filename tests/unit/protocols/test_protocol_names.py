"""The rule that keeps a protocol in its package: no code outside `tokometer.protocols` branches on a protocol's name.

What differs between protocols is a fact or a method of its `tokometer.protocols.registry.Protocol`; code
elsewhere asks the protocol (``protocol(spec.api).lists_models``), never compares ``api`` with a name. The
test reads every module's syntax tree and fails on a string equal to a registered protocol's name (or a
family prefix of one: ``openai``, ``anthropic``) used in a comparison, an ``in`` test, a ``startswith`` /
``endswith`` call or a ``match`` case.
"""

from __future__ import annotations

import ast
from pathlib import Path

import tokometer
from tokometer.protocols.registry import PROTOCOLS

SRC = Path(tokometer.__file__).parent
FAMILIES = frozenset({"openai", "anthropic", "openai-", "anthropic-"})
NAMES = frozenset(PROTOCOLS) | FAMILIES
ENGINE_NAMES = {"tokometer/cli/serve.py": {"llamacpp"}, "tokometer/observe/scrape.py": {"llamacpp"}}
"""Where a protocol's name is also something else's, compared as that: ``llamacpp`` is an engine
(``tokometer serve --engine llamacpp``) and a metrics dialect (`tokometer.observe`) as well as a protocol.
The one allowance: per file and per name, so a protocol branch there on any other name still fails."""


def _names_in(node: ast.AST) -> list[str]:
    """The protocol names a constant, or a tuple/list/set of constants, holds."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in NAMES:
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [name for elt in node.elts for name in _names_in(elt)]
    return []


def _branches(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, name) of each place the tree branches on a protocol's name."""
    found = []
    for node in ast.walk(tree):
        operands: list[ast.AST] = []
        if isinstance(node, ast.Compare) and any(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn))
                                                 for op in node.ops):
            operands = [node.left, *node.comparators]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("startswith", "endswith")):
            operands = list(node.args)
        elif isinstance(node, ast.MatchValue):
            operands = [node.value]
        found += [(getattr(node, "lineno", 0), name) for operand in operands for name in _names_in(operand)]
        found += _table(node)
    return found


def _table(node: ast.AST) -> list[tuple[int, str]]:
    """A tuple, list, set or dict whose items (keys) are all registered protocols' names, two or more: a
    hand-written table of protocols (a table of engines that holds ``llamacpp`` and ``vllm`` is not one)."""
    items: list[ast.expr | None] = []
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        items = list(node.elts)
    elif isinstance(node, ast.Dict):
        items = list(node.keys)
    strings = [item.value for item in items if isinstance(item, ast.Constant) and isinstance(item.value, str)]
    if len(set(strings)) < 2 or len(strings) < len(items) or not set(strings) <= PROTOCOLS.keys():
        return []
    return [(getattr(node, "lineno", 0), f"table of {sorted(set(strings))}")]


def test_the_scan_finds_a_branch_on_a_name() -> None:
    code = ('if api == "ollama": pass\nif api in ("tgi", "x"): pass\nif api.startswith("openai"): pass\n'
            'match api:\n    case "rerank": pass\n')
    assert [name for _, name in _branches(ast.parse(code))] == ["ollama", "tgi", "openai", "rerank"]


def test_the_scan_finds_a_table_of_protocols() -> None:
    code = ('PATHS = {"ollama": "/api/tags", "tgi": "/info"}\n'
            'NOT_RELAYED = frozenset({"rerank", "openai-embeddings"})\n'
            'ENGINES = ("llamacpp", "vllm", "ollama")\n')
    assert [name for _, name in _branches(ast.parse(code))] == ["table of ['ollama', 'tgi']",
                                                                 "table of ['openai-embeddings', 'rerank']"]


def test_no_code_outside_the_protocol_packages_branches_on_a_protocol_name() -> None:
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        if (SRC / "protocols") in path.parents:
            continue
        where = path.relative_to(SRC.parent).as_posix()
        offenders += [f"{where}:{line}: {name!r}" for line, name in _branches(ast.parse(path.read_text(), where))
                      if name not in ENGINE_NAMES.get(where, set())]
    assert offenders == [], "ask the protocol's registry entry instead:\n" + "\n".join(offenders)


def test_the_protocol_layer_does_not_import_the_prompt_sources() -> None:
    """The protocols send a `tokometer.prompt.Prompt`; where prompts come from (`tokometer.datasets`) sits above."""
    offenders = []
    for path in sorted((SRC / "protocols").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            modules = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                       else [alias.name for alias in node.names] if isinstance(node, ast.Import) else [])
            offenders += [f"{path.relative_to(SRC.parent)}: {m}" for m in modules
                          if m == "tokometer.datasets" or m.startswith("tokometer.datasets.")]
    assert offenders == []
