"""The lists of modules a checkpoint keeps unquantised, as the fnmatch patterns `tokometer.perf.unquantized`
matches against a model's module names, each list read by the rule the engines read it by.

    compressed-tensors ``ignore``   a module's exact name, or ``re:`` and a regular expression matched from the
                                    name's start (``re.match``): read where it is made of ``.*``, ``.+``, ``.``,
                                    escaped punctuation, literal text and alternatives (at the top, or in groups
                                    neither nested nor quantified but ``?``), as the fnmatch patterns that match
                                    the same names, at most `MAX_ALTERNATIVES` an entry; never run, as a
                                    checkpoint's regular expression's time is not bounded (`ignored`)
    ``modules_to_not_convert``      as vLLM's ``is_layer_skipped`` reads it: fp8 and fbgemm_fp8 keys whole
                                    names, AWQ keys parts of names (`not_converted`)

A list beyond `tokometer.perf.unquantized.MAX_PATTERNS` patterns, as written or expanded, is refused (ValueError,
or passed on for `tokometer.perf.unquantized` to say why), as is a regular expression beyond these. The targets of
compressed-tensors ``config_groups`` name modules by the ``ignore`` rule and are read by it too (`entry_globs`,
`tokometer.perf.schemetargets`).
"""

from __future__ import annotations

from typing import Any

from tokometer.perf.unquantized import MAX_PATTERNS
from tokometer.util.shown import FIELD_CHARS, quoted

__all__ = ["MAX_ALTERNATIVES", "entry_globs", "ignored", "literal", "not_converted", "regex_as_globs"]

def literal(text: str) -> str:
    """``text`` as an fnmatch pattern that matches it alone (its wildcard characters bracketed)."""
    return "".join(f"[{ch}]" if ch in "*?[" else ch for ch in text)


def not_converted(keys: Any, substring: bool) -> Any:
    """A ``modules_to_not_convert`` list as fnmatch patterns, matched as vLLM matches it
    (``vllm/model_executor/layers/quantization/utils/quant_utils.py``, ``is_layer_skipped``): an AWQ checkpoint's
    keys as parts of a module's name (``substring``: ``*key*``), an fp8 or fbgemm_fp8 one's as whole names (a
    name under a layer's ``experts`` names that layer's fused experts, which vLLM then skips whole). The routed
    experts are matched by their layer's fused module (``CheckpointFormat.experts_by_layer``); anything but a list
    of strings is passed on as written, for `tokometer.perf.unquantized` to say why it is not read."""
    if not isinstance(keys, list) or not all(isinstance(k, str) and k for k in keys):
        return keys
    if substring:
        return [f"*{literal(key)}*" for key in keys]
    return [literal(key[:key.index(".experts") + 8]) if ".experts" in key else literal(key) for key in keys]


_REGEX_LITERAL = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-/:")
"""Characters an ``re:`` entry may hold as literal text, unescaped."""

MAX_ALTERNATIVES = 64
"""The most fnmatch patterns one ``re:`` entry's alternatives may expand to."""


def entry_globs(entry: str, what: str = "ignore entry") -> list[str]:
    """A compressed-tensors module entry (an ``ignore`` entry, a ``config_groups`` target) as the fnmatch patterns
    that match the names it matches: a module's exact name as itself, an ``re:`` entry by `regex_as_globs`
    (ValueError where it cannot be, naming it as ``what``)."""
    return regex_as_globs(entry[3:], what) if entry.startswith("re:") else [literal(entry)]


def regex_as_globs(regex: str, what: str = "ignore entry") -> list[str]:
    """A compressed-tensors ``re:`` entry as the fnmatch patterns that together match the same names: its
    alternatives (``a|b``, and groups ``(a|b)`` or ``(?:a|b)``, not nested, optional with ``?`` after them, of no
    other quantifier) expanded, at most `MAX_ALTERNATIVES` of them, each read by `_regex_as_glob` (Kimi K2
    Thinking's ``re:.*mlp\\.(gate|up|gate_up|down)_proj.*`` is four); ValueError for any other, naming the entry as
    ``what``."""
    expanded = [""]
    for part in _regex_parts(regex, what):
        expanded = [head + tail for head in expanded for tail in part]
        if len(expanded) > MAX_ALTERNATIVES:
            raise ValueError(f"its {what} {_entry(regex)} expands to more than {MAX_ALTERNATIVES} alternatives")
    return [_regex_as_glob(alternative, what) for alternative in expanded]


def _regex_parts(regex: str, what: str) -> list[list[str]]:
    """``regex`` cut into a sequence of choices: text outside groups one choice each, a group its alternatives
    (module docstring of `regex_as_globs`); a top-level ``|`` makes the whole a group. ValueError for a nested
    group, an unclosed one, a quantifier after one other than ``?``, or a group of another kind than ``(?:``."""
    beyond = _beyond(regex, what)
    tokens = _tokens(regex)
    top = _split_alternatives(tokens)
    if len(top) > 1:
        if any("(" in alternative for alternative in top):
            raise beyond  # a group inside a top-level alternative
        return [["".join(alternative) for alternative in top]]
    parts: list[list[str]] = []
    text: list[str] = []
    i = 0
    while i < len(tokens):
        if tokens[i] == ")":
            raise beyond
        if tokens[i] != "(":
            text.append(tokens[i])
            i += 1
            continue
        close = tokens.index(")", i) if ")" in tokens[i:] else -1
        inner = tokens[i + 1:close]
        if close < 0 or "(" in inner:
            raise beyond  # unclosed, or nested
        if inner[:1] == ["?"]:
            if inner[1:2] != [":"]:
                raise beyond
            inner = inner[2:]
        choices = ["".join(alternative) for alternative in _split_alternatives(inner)]
        after = tokens[close + 1:close + 3]
        if after[:1] == ["?"] and after[1:] not in (["?"], ["+"]):
            choices, close = [*choices, ""], close + 1
        elif after and after[0] in ("*", "+", "{", "?"):
            raise beyond
        parts += [["".join(text)], choices]
        text, i = [], close + 1
    return [*parts, ["".join(text)]]


def _entry(regex: str) -> str:
    """An ``re:`` entry as a message quotes it."""
    return quoted("re:" + regex, FIELD_CHARS)


def _beyond(regex: str, what: str) -> ValueError:
    """The refusal of an ``re:`` entry this module does not read, named as ``what``."""
    return ValueError(f"its {what} {_entry(regex)} is a regular expression beyond '.*', '.', alternatives and "
                      "literal text")


def _tokens(text: str) -> list[str]:
    """``text`` as a regular expression's atoms: an escaped character (``\\x``) one, any other character one."""
    out, i = [], 0
    while i < len(text):
        step = 2 if text[i] == "\\" else 1
        out.append(text[i:i + step])
        i += step
    return out


def _split_alternatives(tokens: list[str]) -> list[list[str]]:
    """``tokens`` cut at each ``|`` outside a group (an escaped one is a token of its own, not cut at)."""
    out: list[list[str]] = [[]]
    depth = 0
    for token in tokens:
        depth += 1 if token == "(" else -1 if token == ")" else 0
        if token == "|" and depth == 0:
            out.append([])
        else:
            out[-1].append(token)
    return out


def _regex_as_glob(regex: str, what: str) -> str:
    """A compressed-tensors ``re:`` entry (matched with ``re.match``: from the name's start) as the fnmatch pattern
    that matches the same names, for the regular expressions made of ``.*``, ``.+``, ``.``, escaped punctuation,
    letters, digits and ``_-/:``, with an optional ``^`` first and ``$`` last; ValueError for any other (this does
    not run a checkpoint's regular expression, whose time is not bounded)."""
    body, end = regex[1:] if regex.startswith("^") else regex, "*"
    if body.endswith("$") and not body.endswith("\\$"):
        body, end = body[:-1], ""
    out, i = [], 0
    while i < len(body):
        ch, nxt = body[i], body[i + 1:i + 2]
        if ch == "." and nxt and nxt in "*+":
            out.append("*" if nxt == "*" else "?*")
            i += 2
        elif ch == ".":
            out.append("?")
            i += 1
        elif ch == "\\" and nxt and not nxt.isalnum():
            out.append(literal(nxt))
            i += 2
        elif ch in _REGEX_LITERAL:
            out.append(ch)
            i += 1
        else:
            raise _beyond(regex, what)
    return "".join(out) + end


def ignored(entries: Any) -> Any:
    """compressed-tensors' ``ignore`` list as fnmatch patterns: a module's exact name as itself, an ``re:`` entry by
    `regex_as_globs` (ValueError where it cannot be, or where the list expands beyond `MAX_PATTERNS`); anything
    but a list of strings, or a longer list, as written, for `tokometer.perf.unquantized` to say why it is not
    read."""
    if not isinstance(entries, list) or len(entries) > MAX_PATTERNS or not all(isinstance(e, str) and e
                                                                               for e in entries):
        return entries  # `kept_modules` says why (not a list of strings, or too long)
    globs: list[str] = []
    for entry in entries:
        globs += entry_globs(entry)
        if len(globs) > MAX_PATTERNS:
            raise ValueError(f"its ignore list expands to more than {MAX_PATTERNS:,} patterns")
    return globs
