"""Agent-session metrics (`tokometer.metrics.agentic`) on synthetic stamps."""

from __future__ import annotations

import pytest

from tokometer.metrics.agentic import agent_distribution, agent_stats, busy_ns
from tokometer.records import RequestRecord, ServerTiming

MS = 1_000_000


def _turn(index: int, session: int, turn: int, agent: str, ready: int, sent: int, end: int,
          cached: int = 0, prompt: int = 100) -> RequestRecord:
    return RequestRecord(index=index, ready_ns=ready * MS, due_ns=sent * MS, sent_ns=sent * MS,
                         first_token_ns=(sent + 10) * MS, last_token_ns=(end - 1) * MS, end_ns=end * MS,
                         session=session, turn=turn, agent=agent, input_tokens=prompt, input_tokens_source="usage",
                         server=ServerTiming(cached_tokens=cached))


def test_busy_time_counts_overlaps_once() -> None:
    rs = [RequestRecord(index=0, sent_ns=100, end_ns=110), RequestRecord(index=1, sent_ns=105, end_ns=120),
          RequestRecord(index=2, sent_ns=130, end_ns=140), RequestRecord(index=3, sent_ns=132, end_ns=135)]
    assert busy_ns(rs) == 30
    assert busy_ns(rs, 133) == 20 + 3 and busy_ns(rs, 100) == 0  # clipped at a moment


def test_task_time_tool_wait_and_reuse_of_a_session_with_a_fan_out() -> None:
    records = [
        _turn(0, 0, 0, "main", 1000, 1000, 1100),
        _turn(1, 0, 1, "a", 1100, 1300, 1400, cached=50),  # a fan-out after a 200 ms tool
        _turn(2, 0, 2, "b", 1100, 1300, 1500, cached=50),
        _turn(3, 0, 3, "main", 1500, 1600, 1700, cached=80),  # the join, 100 ms tool after the last child
    ]
    stats = agent_stats(records)
    assert stats is not None and (stats["sessions"], stats["completed"], stats["failed"]) == (1, 1, 0)
    (row,) = stats["by_session"]
    assert row["task_s"] == pytest.approx(0.699)  # start (ready of the first turn) to the last token of the last turn
    # in flight within the task (the last stream's close after its last token is outside it), so the tool
    # wait is the two tools' 200 + 100 ms exactly and the two add up to the task
    assert row["in_requests_s"] == pytest.approx(0.399) and row["tool_wait_s"] == pytest.approx(0.3)
    assert row["agents"] == 3 and row["turns"] == 4
    turns = stats["by_turn"]
    assert [t["tool_wait_ms"]["p50"] for t in turns] == [0.0, 200.0, 200.0, 100.0]
    assert [t["decode_ms"]["p50"] for t in turns] == [89.0, 89.0, 189.0, 89.0]
    assert stats["prompt_cache_hit_rate"] == 180 / 400
    assert agent_distribution(stats, "task_s").p50 == pytest.approx(0.699)
    assert agent_distribution(None, "task_s").count == 0


def test_records_that_are_not_agent_turns_have_no_block() -> None:
    assert agent_stats([RequestRecord(index=0, sent_ns=1, end_ns=2, session=0, turn=0)]) is None
