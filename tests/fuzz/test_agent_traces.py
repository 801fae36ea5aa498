"""The agent-trace parser (`tokometer.datasets.agentic`) on generated text: every line is a session or one
`DatasetError` of one line, never another exception; a valid generated trace reads back as written, and every
turn waits only for turns before it (no cycle can be read)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tokometer.datasets.agentic import MAIN_AGENT, parse_session
from tokometer.util.errors import DatasetError

_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=4)
                     | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                     max_leaves=20)
_turn = st.fixed_dictionaries({"input_tokens": st.integers(-2, 50) | _json, "output_tokens": st.integers(-2, 50)},
                              optional={"id": st.sampled_from(["a", "b", "c", "d"]) | _json,
                                        "agent": st.sampled_from(["main", "x", "y"]) | _json,
                                        "after": st.lists(st.sampled_from(["a", "b", "zz"]), max_size=3) | _json,
                                        "tool_ms": st.floats(-1, 1e4) | _json})
_session = st.fixed_dictionaries({"turns": st.lists(_turn, max_size=5) | _json},
                                 optional={"session": _json, "start_ms": _json,
                                           "prefix": st.fixed_dictionaries({"id": _json, "tokens": _json}) | _json})


@given(st.one_of(_session.map(json.dumps), st.text(max_size=200)))
def test_a_line_is_a_session_or_one_clean_error(line: str) -> None:
    try:
        session = parse_session(line, "trace:1", "session 1")
    except DatasetError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("trace:1")
        return
    for k, turn in enumerate(session.turns):
        assert all(0 <= j < k for j in turn.after)  # waits only for earlier turns: no cycle


@st.composite
def _valid(draw: Any) -> dict[str, Any]:
    n = draw(st.integers(1, 8))
    turns = []
    for k in range(n):
        turn: dict[str, Any] = {"id": f"t{k}", "agent": draw(st.sampled_from([MAIN_AGENT, "a", "b"])),
                                "input_tokens": draw(st.integers(1, 100)), "output_tokens": draw(st.integers(1, 100)),
                                "tool_ms": draw(st.integers(0, 1000))}
        if k:
            turn["after"] = draw(st.lists(st.sampled_from([f"t{j}" for j in range(k)]), max_size=3, unique=True))
        turns.append(turn)
    return {"session": "s", "start_ms": draw(st.integers(0, 10**6)), "turns": turns}


@given(_valid())
def test_a_valid_session_reads_back_as_written(obj: dict[str, Any]) -> None:
    session = parse_session(json.dumps(obj), "trace:1", "session 1")
    assert [t.id for t in session.turns] == [t["id"] for t in obj["turns"]]
    last: dict[str, int] = {}
    for k, (turn, raw) in enumerate(zip(session.turns, obj["turns"], strict=True)):
        named = [int(ref[1:]) for ref in raw.get("after", [])]
        assert set(turn.after) == set(named) | ({last[turn.agent]} if turn.agent in last else set())
        assert turn.tool_ms == raw["tool_ms"] and turn.input_tokens == raw["input_tokens"]
        last[turn.agent] = k
