"""Agent sessions (``bench --agents``) shared by ``--workers`` processes, against the simulator, which logs every
request (``--trace-bodies``: the truth). Whole sessions are dealt out; every turn reaches the server once with
its agent's conversation (the model's real answers, from the same process), never before what it waits for
plus its tool latency; the step's records are numbered by the turns' places in the trace, as distinct as in one
process; the per-session and per-turn figures cover every session."""

from __future__ import annotations

import json
from collections.abc import Callable

from tests.conftest import SimServer
from tests.helpers import bench
from tokometer.datasets.agentic import read_agent_trace


def test_workers_run_whole_sessions_each_turn_once(sim_factory: Callable[..., SimServer]) -> None:
    sim = sim_factory("--ttft-ms", "3", "--itl-ms", "1", "--trace-bodies")
    result = bench(sim.openai_url, agents="example", seed=2, tokenizer="none", workers=2)
    (step,) = result.steps
    sessions = read_agent_trace("example")
    records = step.records
    total = sum(len(s.turns) for s in sessions)
    assert sorted(r.index for r in records) == list(range(total)) and all(r.ok for r in records)
    mine = {(r.session or 0, r.turn or 0): r for r in records}
    assert len(mine) == total
    for i, session in enumerate(sessions):
        for k, turn in enumerate(session.turns):
            r = mine[(i, k)]
            assert r.agent == turn.agent
            waited = [mine[(i, j)] for j in turn.after]
            if waited:
                assert r.ready_ns == max(w.end_ns for w in waited)  # the same clock: one process ran them all
            assert r.due_ns == r.ready_ns + round(turn.tool_ms * 1e6) and r.sent_ns >= r.due_ns
    logged = sim.trace()
    assert len(logged) == total  # each turn once, and nothing else
    answers = {r.output_text for r in records}
    for t in logged:  # every earlier answer in a conversation is one the model really gave
        for m in json.loads(t["body"])["messages"]:
            if m["role"] == "assistant":
                assert m["content"] in answers
    stats = step.summary.agentic
    assert stats is not None and (stats["sessions"], stats["completed"]) == (len(sessions), len(sessions))

