"""AIPerf's ``multi_turn`` and ``mooncake_trace`` files read as agent sessions (`tokometer.datasets.agentic_aiperf`):
each field mapped as documented (docs/reference/agent-trace.md), the format told by the first line or named, and
each field tokometer cannot replay refused in one line naming it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tokometer.datasets.agentic_workload import agent_sessions
from tokometer.util.errors import DatasetError


def _write(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(obj) + "\n" for obj in lines))
    return path


def test_a_multi_turn_session_maps_turn_by_turn(tmp_path: Path) -> None:
    path = _write(tmp_path / "mt.jsonl", [
        {"type": "multi_turn", "session_id": "late", "turns": [
            {"text": "hello", "timestamp": 500, "output_length": 7},
            {"texts": ["a", "b"], "delay": 250, "role": "user"},
            {"text": "tool says 3", "role": "tool", "timestamp": 2500, "output_length": 2}]},
        {"session_id": "early", "turns": [{"text": "hi", "timestamp": 100, "output_length": 1}]},
    ])
    sessions, name = agent_sessions(str(path), output_tokens=33)
    assert name == "mt.jsonl"
    assert [s.label for s in sessions] == ["early", "late"]  # sorted by start
    late = sessions[1]
    assert late.start_ms == 400  # from the earliest timestamp: "early"'s 100
    assert [(t.input_text, t.output_tokens, t.tool_ms, t.at_ms, t.after) for t in late.turns] == [
        ("hello", 7, 0.0, None, ()), ("a\n\nb", 33, 250.0, None, (0,)), ("tool says 3", 2, 0.0, 2000.0, (1,))]
    assert {t.agent for t in late.turns} == {"main"}


def test_mooncake_lines_group_by_session_id(tmp_path: Path) -> None:
    path = _write(tmp_path / "mc.jsonl", [
        {"session_id": "s", "timestamp": 0, "input_length": 40, "hash_ids": [1, 2], "output_length": 5},
        {"timestamp": 10, "text_input": "alone", "output_length": 3},
        {"session_id": "s", "delay": 120, "messages": [{"role": "user", "content": "next"},
                                                       {"role": "tool", "content": "42"}], "output_length": 4},
    ])
    sessions, name = agent_sessions(f"aiperf:{path}")
    assert name == "aiperf:mc.jsonl"
    assert [s.label for s in sessions] == ["s", "request 2"]
    first, second = sessions[0].turns
    assert (first.input_tokens, first.output_tokens, second.input_text, second.tool_ms, second.after) == (
        40, 5, "next\n\n42", 120.0, (0,))
    assert sessions[1].start_ms == 10 and sessions[1].turns[0].input_text == "alone"


def test_texts_may_be_aiperfs_text_objects(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.jsonl", [{"session_id": "s", "turns": [
        {"texts": [{"name": "q", "contents": ["one", "two"]}, "three"], "output_length": 2}]}])
    (session,), _ = agent_sessions(str(path))
    assert session.turns[0].input_text == "one\n\ntwo\n\nthree"


def test_timestamps_from_an_epoch_count_from_the_earliest(tmp_path: Path) -> None:
    epoch = 1_764_000_000_000
    path = _write(tmp_path / "e.jsonl", [{"session_id": "b", "timestamp": epoch + 900, "input_length": 4},
                                         {"session_id": "a", "timestamp": epoch + 100, "input_length": 4},
                                         {"session_id": "a", "timestamp": epoch + 400, "input_length": 4}])
    sessions, _ = agent_sessions(f"aiperf:{path}", output_tokens=2)
    assert [(s.label, s.start_ms) for s in sessions] == [("a", 0.0), ("b", 800.0)]
    assert sessions[0].turns[1].at_ms == 300.0


def test_sessions_spread_over_more_than_a_week_are_refused(tmp_path: Path) -> None:
    path = _write(tmp_path / "w.jsonl", [{"timestamp": 0, "input_length": 4},
                                         {"timestamp": 8 * 86_400_000, "input_length": 4}])
    with pytest.raises(DatasetError, match="a week"):
        agent_sessions(f"aiperf:{path}", output_tokens=2)


def test_tokometers_own_format_is_still_read_as_its_own(tmp_path: Path) -> None:
    path = _write(tmp_path / "own.jsonl", [{"turns": [{"input_tokens": 3, "output_tokens": 2, "at_ms": 40}]}])
    (session,), _ = agent_sessions(str(path))
    assert session.turns[0].input_tokens == 3 and session.turns[0].at_ms == 40


@pytest.mark.parametrize(("line", "words"), [
    ({"type": "single_turn", "text": "x"}, "'type' 'single_turn' is not one of AIPerf's session formats"),
    ({"type": "multi_turn", "turns": [{"text": "x", "image": "a.png"}]}, "turn 1: 'image': media are not replayed"),
    ({"type": "multi_turn", "turns": [{"text": "x", "role": "assistant"}]}, "'role' 'assistant'"),
    ({"type": "multi_turn", "turns": [{"text": "x", "role": ["user"]}]}, "'role' 'list'"),
    ({"type": "multi_turn", "turns": [{"text": "x", "colour": 1}]}, "unknown field 'colour'"),
    ({"type": "multi_turn", "turns": [{"text": "x", "timestamp": 5, "delay": 5}]}, "'timestamp' or 'delay'"),
    ({"type": "multi_turn", "turns": [{"text": "x", "delay": -1}]}, "'delay' must be a number of milliseconds"),
    ({"type": "multi_turn", "turns": [{"text": "x", "output_length": True}]}, "'output_length' must be a whole"),
    ({"type": "multi_turn", "turns": []}, "'turns' must be a non-empty list"),
    ({"type": "multi_turn", "turns": [{"texts": [{"contents": [3]}]}]}, "'texts' must be a non-empty list"),
    ({"type": "multi_turn", "turns": [{"texts": []}]}, "'texts' must be a non-empty list"),
    ({"input_length": 10, "payload": {"prompt": "x"}}, "'payload': a fixed request body"),
    ({"messages": [{"role": "user", "content": "x"}], "message_mode": "history"}, "only 'delta' messages"),
    ({"input_length": 10, "text_input": "x"}, "give one of 'input_length', 'text_input' and 'messages'"),
    ({"text_input": "x", "hash_ids": [1]}, "'hash_ids' go with 'input_length' only"),
    ({"input_length": 10, "hash_ids": [-1]}, "'hash_ids' must be a list"),
    ({"input_length": 10, "session_id": 7}, "'session_id' must be a non-empty string"),
    ({"input_length": 0}, "'input_length' must be a whole number"),
    ({"input_length": 10}, "no 'output_length'"),
])
def test_each_field_it_cannot_replay_is_one_line_naming_it(tmp_path: Path, line: dict[str, Any], words: str) -> None:
    path = _write(tmp_path / "bad.jsonl", [line])
    with pytest.raises(DatasetError) as caught:
        agent_sessions(f"aiperf:{path}")
    assert words in str(caught.value) and "\n" not in str(caught.value) and str(path) in str(caught.value)


def test_a_later_turn_before_its_sessions_start_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.jsonl", [{"session_id": "s", "timestamp": 100, "input_length": 1},
                                         {"session_id": "s", "timestamp": 50, "input_length": 1}])
    with pytest.raises(DatasetError, match="before its session's start"):
        agent_sessions(f"aiperf:{path}", output_tokens=4)
