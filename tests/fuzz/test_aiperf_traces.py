"""AIPerf trace files (`tokometer.datasets.agentic_aiperf`) on generated content: every file is a list of sessions
or one `DatasetError` of one line naming the file, never another exception; every session read waits only on its
own earlier turns, and every number it holds is within the agent trace's bounds."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from tokometer.datasets.agentic import MAX_START_MS, MAX_TOOL_MS
from tokometer.datasets.agentic_workload import agent_sessions
from tokometer.util.errors import DatasetError
from tokometer.util.limits import MAX_TOKENS

_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=4)
                     | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                     max_leaves=20)
_number = st.integers(-5, 10**6) | st.floats() | _json
_turn = st.fixed_dictionaries({}, optional={
    "text": st.text(max_size=6) | _json, "texts": st.lists(st.text(max_size=4), max_size=3) | _json,
    "timestamp": _number, "delay": _number, "role": st.sampled_from(["user", "tool", "assistant"]) | _json,
    "output_length": _number, "image": _json})
_multi = st.fixed_dictionaries({"turns": st.lists(_turn, max_size=4) | _json},
                               optional={"type": st.sampled_from(["multi_turn", "nope"]) | _json,
                                         "session_id": st.sampled_from(["a", "b", ""]) | _json})
_request = st.fixed_dictionaries({}, optional={
    "type": st.just("mooncake_trace"), "session_id": st.sampled_from(["a", "b"]) | _json,
    "input_length": _number, "text_input": st.text(max_size=6) | _json, "hash_ids": st.lists(_number, max_size=3),
    "messages": st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "tool", "system"]),
                                                "content": st.text(max_size=4)}), max_size=2) | _json,
    "message_mode": st.sampled_from(["delta", "history"]), "timestamp": _number, "delay": _number,
    "output_length": _number, "payload": _json})
_line = st.one_of(_multi.map(json.dumps), _request.map(json.dumps), st.text(max_size=60))


@given(st.lists(_line, min_size=1, max_size=5))
def test_a_file_is_sessions_or_one_clean_error(lines: list[str]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "t.jsonl"
        path.write_text("\n".join(lines) + "\n")
        try:
            sessions, _ = agent_sessions(f"aiperf:{path}", output_tokens=8)
        except DatasetError as exc:
            assert "\n" not in str(exc) and str(path) in str(exc)
            return
    for session in sessions:
        assert 0 <= session.start_ms <= MAX_START_MS
        for k, turn in enumerate(session.turns):
            assert all(0 <= j < k for j in turn.after)
            assert 1 <= turn.output_tokens <= MAX_TOKENS and 0 <= turn.tool_ms <= MAX_TOOL_MS
            assert turn.at_ms is None or 0 <= turn.at_ms <= MAX_START_MS
            assert (turn.input_text is None) != (turn.input_tokens is None)
