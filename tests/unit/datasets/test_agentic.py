"""Agent traces and synthetic agent sessions: the format's rules, hostile files, the generator's determinism."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from tokometer.datasets.agentic import (
    EXAMPLE_AGENT_TRACE,
    MAX_AGENT_LINE_BYTES,
    parse_session,
    read_agent_trace,
    session_offsets,
)
from tokometer.datasets.agentic_synth import AgentShape, parse_shape, synthetic_sessions
from tokometer.datasets.agentic_workload import open_agents
from tokometer.datasets.trace import MAX_TRACE_BYTES
from tokometer.util.errors import ConfigError, DatasetError
from tokometer.util.limits import MAX_TURNS


def _line(**fields: object) -> str:
    return json.dumps({"turns": [{"input_tokens": 5, "output_tokens": 2}], **fields})


def test_the_shipped_example_reads_and_branches() -> None:
    sessions = read_agent_trace("example")
    assert EXAMPLE_AGENT_TRACE.exists() and len(sessions) >= 2
    assert any(len(s.agents) > 1 for s in sessions)  # sub-agents
    assert session_offsets(sessions)[0] == 0


def test_an_agents_previous_turn_is_always_waited_for() -> None:
    s = parse_session(json.dumps({"turns": [
        {"id": "a", "input_tokens": 1, "output_tokens": 1},
        {"id": "x", "agent": "sub", "after": ["a"], "input_tokens": 1, "output_tokens": 1},
        {"id": "b", "input_tokens": 1, "output_tokens": 1},
        {"id": "c", "after": ["x"], "input_tokens": 1, "output_tokens": 1}]}), "t", "s")
    assert [t.after for t in s.turns] == [(), (0,), (0,), (2, 1)]
    assert s.agents == ("main", "sub")


@pytest.mark.parametrize(("line", "words"), [
    ('{"turns": [{"id": "a", "after": ["a"], "input_tokens": 1, "output_tokens": 1}]}', "not an earlier turn"),
    ('{"turns": [{"id": "a", "after": ["b"], "input_tokens": 1, "output_tokens": 1},'
     ' {"id": "b", "after": ["a"], "input_tokens": 1, "output_tokens": 1}]}', "a later one would be a cycle"),
    ('{"turns": [{"id": "a", "input_tokens": 1, "output_tokens": 1}, {"id": "a", "input_tokens": 1, '
     '"output_tokens": 1}]}', "already the id"),
    ('{"turns": [{"input_tokens": "5", "output_tokens": 1}]}', "'input_tokens' must be a whole number"),
    ('{"turns": [{"input_tokens": true, "output_tokens": 1}]}', "'input_tokens' must be a whole number"),
    ('{"turns": [{"input_tokens": 1, "output_tokens": 1, "tool_ms": -1}]}', "'tool_ms'"),
    ('{"turns": [{"input_tokens": 1, "output_tokens": 1, "tool_ms": 1e400}]}', "'tool_ms'"),
    ('{"turns": [{"input_tokens": 1, "output_tokens": 1, "after": "a"}]}', "'after' must be a list"),
    ('{"turns": []}', "'turns' must be a non-empty list"),
    ('{"turns": [1]}', "expected an object"),
    ('[1, 2]', "expected an object"),
    ('{"turns": [{"input": "", "output_tokens": 1}]}', "'input' must be non-empty text"),
    ('{"prefix": 3, ' + _line()[1:], "'prefix' must be an object"),
    ('{"turns": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deep"),
    ('{"turns": [', "not valid JSON"),
])
def test_bad_sessions_get_one_line_naming_the_fault(line: str, words: str) -> None:
    with pytest.raises(DatasetError) as caught:
        parse_session(line, "f:1", "session 1")
    assert words in str(caught.value) and "\n" not in str(caught.value) and str(caught.value).startswith("f:1")


def test_too_many_turns_are_refused() -> None:
    turns = [{"input_tokens": 1, "output_tokens": 1}] * (MAX_TURNS + 1)
    with pytest.raises(DatasetError, match=f"at most {MAX_TURNS}"):
        parse_session(json.dumps({"turns": turns}), "f:1", "s")


def test_hostile_files_are_refused_within_their_bounds(tmp_path: Path) -> None:
    long_line = tmp_path / "long.jsonl"
    long_line.write_bytes(b'{"turns": "' + b"x" * (MAX_AGENT_LINE_BYTES + 10) + b'"}\n')
    with pytest.raises(DatasetError, match="a line longer than"):
        read_agent_trace(long_line)
    with pytest.raises(DatasetError, match="a line longer than"):  # an endless file: cut at its first line's bound
        read_agent_trace(Path("/dev/zero"))
    huge = tmp_path / "huge.jsonl"
    with huge.open("wb") as handle:
        handle.truncate(MAX_TRACE_BYTES + 1)  # sparse: refused by its size before a byte is read
    with pytest.raises(DatasetError, match="larger than"):
        read_agent_trace(huge)
    backwards = tmp_path / "back.jsonl"
    backwards.write_text(_line(start_ms=10) + "\n" + _line(start_ms=5) + "\n")
    with pytest.raises(DatasetError, match="must not go backwards"):
        read_agent_trace(backwards)
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(b"\xff\xfe{}\n")
    with pytest.raises(DatasetError, match="not UTF-8"):
        read_agent_trace(binary)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(DatasetError, match="holds no sessions"):
        read_agent_trace(empty)
    with pytest.raises(DatasetError, match="cannot read"):
        read_agent_trace(tmp_path / "absent.jsonl")


def test_a_fifo_nobody_writes_reads_as_empty_not_a_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []

    def read() -> None:
        try:
            read_agent_trace(fifo)
        except DatasetError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=read)
    thread.start()
    thread.join(30)
    assert not thread.is_alive() and outcome and "holds no sessions" in str(outcome[0])


def test_synthetic_sessions_follow_their_parameters_and_seed() -> None:
    shape = parse_shape("synthetic:sessions=3,turns=4,fan_out=3,fan_every=2,sub_turns=2,tool_latency=100ms-300ms,"
                        "growth=50,prefix=500,shared=no,rate=2")
    sessions = synthetic_sessions(shape, seed=5)
    assert sessions == synthetic_sessions(shape, seed=5) and sessions != synthetic_sessions(shape, seed=6)
    s = sessions[1]
    assert s.start_ms == 500 and s.prefix is not None and s.prefix.id != sessions[0].prefix.id  # type: ignore[union-attr]
    assert len(s.turns) == 4 + 3 * 2  # one fan-out (after main turn 2): 3 sub-agents of 2 turns
    assert len(s.agents) == 4
    join = s.turns[-2]  # main's third turn waits for main's second and the last turn of each sub-agent
    assert join.agent == "main" and len(join.after) == 4
    assert all(100 <= t.tool_ms <= 300 for t in s.turns[1:]) and s.turns[0].tool_ms == 0
    assert parse_shape("synthetic") == AgentShape()


@pytest.mark.parametrize("text", ["synthetic:turns=0", "synthetic:fan_out=x", "synthetic:colour=red",
                                  "synthetic:tool_latency=fast", "synthetic:rate=-1", "synthetic:shared=maybe",
                                  "synthetic:sessions=100000,turns=1000", "nonsense:turns=2"])
def test_bad_synthetic_parameters_get_one_line(text: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_shape(text)
    assert "\n" not in str(caught.value)


def test_texts_are_made_once_and_shared_by_prefix_id() -> None:
    workload = open_agents("synthetic:sessions=2,prefix=40,growth=7", None, seed=1)
    workload.prepare()
    a, b = workload.sessions
    assert a.prefix is not None and b.prefix is not None
    assert workload.prefix_text(a.prefix) == workload.prefix_text(b.prefix)
    assert len(workload.prefix_text(a.prefix).split()) == 40 and len(workload.input_text(0, 1).split()) == 7
    assert workload.input_text(0, 0) != workload.input_text(1, 0)


@pytest.mark.parametrize("every_s", [0.05, None])
def test_a_trickling_pipe_is_cut_off_at_the_deadline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     every_s: float | None) -> None:
    """A writer that sends a byte now and then, never a newline, or holds the pipe open and sends nothing: the
    deadline, not the line bound, ends it (the deadline is shortened for the test)."""
    import tokometer.datasets.agentic as agentic

    monkeypatch.setattr(agentic, "READ_DEADLINE_S", 0.3)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    stop = threading.Event()
    holder = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader, so that the writer is connected from the start
    handle = os.open(fifo, os.O_WRONLY)

    def trickle() -> None:
        while every_s is not None and not stop.is_set():
            os.write(handle, b"{")
            stop.wait(every_s)

    writer = threading.Thread(target=trickle, daemon=True)
    writer.start()
    try:
        with pytest.raises(DatasetError, match=r"not read within 0\.3 s"):
            read_agent_trace(fifo)
    finally:
        stop.set()
        writer.join(5)
        os.close(handle)
        os.close(holder)


def test_a_trace_of_too_many_sessions_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bound on sessions (lowered for the test) stops the reading at the line past it."""
    import tokometer.datasets.agentic as agentic

    monkeypatch.setattr(agentic, "MAX_AGENT_SESSIONS", 3)
    path = tmp_path / "many.jsonl"
    path.write_text((_line() + "\n") * 5)
    with pytest.raises(DatasetError, match=r"many\.jsonl:4: a trace holds at most 3 sessions"):
        read_agent_trace(path)
