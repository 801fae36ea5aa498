"""AIPerf's multi-turn trace formats replayed by ``bench --agents`` against the simulator, a real server on
loopback that logs every request it receives (``--trace-bodies``): each turn reaches it once, carrying the
session's conversation so far (the earlier inputs and the model's real answers), never before the previous
answer plus its ``delay``, nor before its ``timestamp``; a field tokometer cannot replay is one line, exit 2."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.conftest import SimServer, run_cli
from tests.helpers import bench

MULTI_TURN = [
    {"type": "multi_turn", "session_id": "chat-1", "turns": [
        {"text": "first question", "timestamp": 0, "output_length": 4},
        {"text": "a follow-up", "delay": 120, "output_length": 3},
        {"text": "tool output: 42", "role": "tool", "timestamp": 400, "output_length": 5}]},
    {"type": "multi_turn", "session_id": "chat-2", "turns": [
        {"texts": ["second", "session"], "timestamp": 50, "output_length": 2}]},
]
MOONCAKE = [
    {"session_id": "s", "timestamp": 0, "text_input": "opening move", "output_length": 3},
    {"session_id": "s", "delay": 80, "messages": [{"role": "user", "content": "next move"}], "output_length": 4},
    {"timestamp": 30, "text_input": "a lone request", "output_length": 2},
]


def _write(path: Path, lines: Sequence[Mapping[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(obj) + "\n" for obj in lines))
    return path


def test_a_multi_turn_file_replays_turn_by_turn(sim_factory: Callable[..., SimServer], tmp_path: Path) -> None:
    sim = sim_factory("--ttft-ms", "5", "--itl-ms", "1", "--trace-bodies")
    result = bench(sim.openai_url, agents=str(_write(tmp_path / "mt.jsonl", MULTI_TURN)), seed=1, tokenizer="none")
    (step,) = result.steps
    records = {(r.session, r.turn): r for r in step.records}
    assert len(records) == 4 and all(r.ok for r in records.values())
    logged = {json.loads(t["body"])["messages"][-1]["content"]: t for t in sim.trace()}
    assert len(logged) == 4  # each turn once, nothing else
    first, second, third = (records[(0, k)] for k in range(3))  # chat-1 starts first: sessions by start
    assert records[(1, 0)].due_ns == first.due_ns + 50_000_000
    assert second.due_ns == first.end_ns + 120_000_000 and second.ready_ns == first.end_ns
    start = first.due_ns
    assert third.due_ns == max(second.end_ns, start + 400_000_000)
    assert logged["a follow-up"]["received_ns"] >= first.end_ns + 120_000_000
    assert json.loads(logged["tool output: 42"]["body"])["messages"] == [
        {"role": "user", "content": "first question"}, {"role": "assistant", "content": first.output_text},
        {"role": "user", "content": "a follow-up"}, {"role": "assistant", "content": second.output_text},
        {"role": "user", "content": "tool output: 42"}]
    assert [json.loads(logged[k]["body"])["max_tokens"] for k in ("first question", "second\n\nsession")] == [4, 2]
    stats = step.summary.agentic
    assert stats is not None and (stats["sessions"], stats["completed"]) == (2, 2)


def test_mooncake_lines_of_one_session_make_one_conversation(sim_factory: Callable[..., SimServer],
                                                             tmp_path: Path) -> None:
    sim = sim_factory("--ttft-ms", "2", "--itl-ms", "1", "--trace-bodies")
    path = _write(tmp_path / "mc.jsonl", MOONCAKE)
    result = bench(sim.openai_url, agents=f"aiperf:{path}", seed=1, tokenizer="none")
    (step,) = result.steps
    assert len(step.records) == 3 and all(r.ok for r in step.records)
    opening = next(r for r in step.records if r.session == 0 and r.turn == 0)
    body = next(json.loads(t["body"]) for t in sim.trace()
                if json.loads(t["body"])["messages"][-1]["content"] == "next move")
    assert body["messages"][:2] == [{"role": "user", "content": "opening move"},
                                    {"role": "assistant", "content": opening.output_text}]


def test_a_field_it_cannot_replay_is_one_line_and_exit_2(tmp_path: Path) -> None:
    path = _write(tmp_path / "bad.jsonl", [{"type": "multi_turn", "turns": [{"text": "x", "video": "v.mp4"}]}])
    done = run_cli("bench", "--url", "http://127.0.0.1:9/v1", "--agents", f"aiperf:{path}", "--no-store",
                   "--no-check")
    assert done.returncode == 2 and "'video': media are not replayed" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
