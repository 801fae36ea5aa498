"""Agent sessions (``bench --agents``) against the simulator, a real server on loopback that logs every request
it receives (``--trace-bodies``: the body and the arrival stamp of each).

- Truth of the replay: every turn of the trace reaches the server once, carrying exactly its agent's
  conversation (the prefix, the agent's earlier inputs and the model's real answers, then its input and the
  answers of the other agents it waited for), never before the turns it waits for have ended plus its tool
  latency; sub-agents of one fan-out are due together.
- Truth of the prefix-cache reuse: the simulator's modelled engine reports ``cached_tokens`` from its prefix
  cache (`tokometer.sim.prefixcache`); replaying the logged bodies in arrival order through a `PrefixCache` of
  our own gives the same numbers, turn by turn, and the step's reported reuse is their sum's share. A shared
  prefix is found warm by every later session; a per-session one never is.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SimServer, bench_stored, run_cli
from tests.helpers import bench
from tokometer.datasets.agentic import read_agent_trace
from tokometer.datasets.agentic_workload import open_agents
from tokometer.records import RequestRecord
from tokometer.sim.prefixcache import PrefixCache, block_hashes, prompt_words

TRACE = [
    {"session": "fix-17", "start_ms": 0, "prefix": {"id": "coder", "tokens": 120}, "turns": [
        {"id": "plan", "input_tokens": 30, "output_tokens": 6},
        {"id": "read", "tool_ms": 150, "input_tokens": 40, "output_tokens": 5},
        {"id": "s1", "agent": "search-1", "after": ["read"], "tool_ms": 50, "input_tokens": 20, "output_tokens": 7},
        {"id": "s2", "agent": "search-2", "after": ["read"], "tool_ms": 50, "input_tokens": 25, "output_tokens": 4},
        {"id": "s1b", "agent": "search-1", "tool_ms": 80, "input_tokens": 10, "output_tokens": 3},
        {"id": "done", "after": ["s1b", "s2"], "tool_ms": 100, "input_tokens": 15, "output_tokens": 9}]},
    {"session": "review", "start_ms": 40, "turns": [
        {"input": "please review the diff", "output_tokens": 5},
        {"tool_ms": 60, "input_tokens": 12, "output_tokens": 5}]},
]


def _write(path: Path) -> Path:
    path.write_text("".join(json.dumps(s) + "\n" for s in TRACE))
    return path


def _by_input(traces: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The logged requests by the first line of their last message (each turn's own input starts it)."""
    out = {}
    for t in traces:
        last = json.loads(t["body"])["messages"][-1]["content"]
        out[last.split("\n\n")[0]] = t
    return out


def test_every_turn_reaches_the_server_as_the_trace_says(sim_factory: Callable[..., SimServer],
                                                         tmp_path: Path) -> None:
    sim = sim_factory("--ttft-ms", "5", "--itl-ms", "1", "--trace-bodies")
    path = _write(tmp_path / "agents.jsonl")
    result = bench(sim.openai_url, agents=str(path), seed=7, tokenizer="none")
    (step,) = result.steps
    records: list[RequestRecord] = step.records
    sessions = read_agent_trace(path)
    workload = open_agents(str(path), None, 7)
    assert len(records) == sum(len(s.turns) for s in sessions) and all(r.ok for r in records)
    logged = _by_input(sim.trace())
    assert len(logged) == len(records)  # each turn once, and nothing else
    mine = {(r.session or 0, r.turn or 0): r for r in records}
    for i, session in enumerate(sessions):
        for k, turn in enumerate(session.turns):
            r = mine[(i, k)]
            assert r.agent == turn.agent
            waited = [mine[(i, j)] for j in turn.after]
            assert r.ready_ns == (max(w.end_ns for w in waited) if waited else r.ready_ns)
            assert r.due_ns == r.ready_ns + round(turn.tool_ms * 1e6)
            served = logged[workload.input_text(i, k)]
            assert served["received_ns"] >= r.ready_ns + turn.tool_ms * 1e6  # never before its tool latency
            messages = json.loads(served["body"])["messages"]
            assert messages == _expected(workload, session, i, k, mine)
    s1, s2 = mine[(0, 2)], mine[(0, 3)]
    assert s1.ready_ns == s2.ready_ns == mine[(0, 1)].end_ns  # a fan-out: both start from the parent's end
    stats = step.summary.agentic
    assert stats is not None and (stats["sessions"], stats["completed"]) == (2, 2)
    assert [row["turn"] for row in stats["by_turn"]] == list(range(1, 7))
    first = stats["by_session"][0]
    assert first["turns"] == 6 and first["agents"] == 3
    # the critical path's tool latencies are time with no request of the session in flight, but for the part of
    # s1b's 80 ms that s2's request, the other branch of the fan-out, may still cover (it did, by 17 ms, on a busy
    # host): the session's tool wait is at least the rest
    s2, s1b = mine[(0, 3)], mine[(0, 4)]
    covered = max(0, min(s2.end_ns or 0, s1b.due_ns or 0) - max(s2.sent_ns or 0, s1b.ready_ns or 0))
    assert first["tool_wait_s"] >= ((150 + 50 + 80 + 100) * 1e6 - covered) / 1e9 - 1e-9
    assert first["tool_wait_s"] + first["in_requests_s"] == pytest.approx(first["task_s"])


def _expected(workload: Any, session: Any, i: int, k: int, mine: dict[tuple[int, int], RequestRecord]) -> list[
        dict[str, str]]:
    """The conversation turn ``k`` of session ``i`` must carry, rebuilt from the trace and the real answers."""
    turn = session.turns[k]
    out = [{"role": "system", "content": workload.prefix_text(session.prefix)}] if session.prefix else []
    for j in range(k):
        if session.turns[j].agent == turn.agent:
            out += [{"role": "user", "content": _input(workload, session, i, j, mine)},
                    {"role": "assistant", "content": mine[(i, j)].output_text}]
    return [*out, {"role": "user", "content": _input(workload, session, i, k, mine)}]


def _input(workload: Any, session: Any, i: int, k: int, mine: dict[tuple[int, int], RequestRecord]) -> str:
    turn = session.turns[k]
    joined = [mine[(i, j)].output_text for j in turn.after if session.turns[j].agent != turn.agent]
    return "\n\n".join([workload.input_text(i, k), *joined])


MODELLED = ("--model", "llama-3.1-8b", "--hardware", "H100-SXM", "--dtype", "awq", "--trace-bodies")


@pytest.mark.parametrize("shared", ["yes", "no"])
def test_reported_prefix_reuse_is_the_simulators_cache(sim_factory: Callable[..., SimServer], shared: str) -> None:
    sim = sim_factory(*MODELLED)
    agents = f"synthetic:sessions=3,rate=2,turns=3,fan_out=2,sub_turns=1,prefix=200,growth=40,output=6," \
             f"tool_latency=20ms,shared={shared}"
    result = bench(sim.openai_url, agents=agents, seed=3, tokenizer="none", ignore_eos=True)
    (step,) = result.steps
    records = step.records
    assert all(r.ok for r in records) and len(records) == 3 * 5
    traces = sorted(sim.trace(), key=lambda t: t["received_ns"])
    cache = PrefixCache(1 << 30)
    truth = {}
    for t in traces:  # arrival order; every request shares only blocks of requests that ended before it was sent
        hashes = block_hashes(prompt_words(json.loads(t["body"])))
        last = json.loads(t["body"])["messages"][-1]["content"].split("\n\n")[0]
        truth[last] = cache.lookup(hashes, t["prompt_tokens"])
        cache.insert(hashes)
    # each turn asks for the shape's own 6 tokens (output=6), --ignore-eos or not, not the run's --output-tokens
    assert {json.loads(t["body"]).get("max_completion_tokens", json.loads(t["body"]).get("max_tokens"))
            for t in traces} == {6}
    workload = open_agents(agents, None, 3)
    for r in records:
        assert r.server is not None
        assert r.server.cached_tokens == truth[workload.input_text(r.session or 0, r.turn or 0)]
    stats = step.summary.agentic
    assert stats is not None
    cached = sum(r.server.cached_tokens or 0 for r in records if r.server)
    prompt = sum(r.input_tokens or 0 for r in records)
    assert stats["prompt_cache_hit_rate"] == pytest.approx(cached / prompt)
    firsts = [r for r in records if r.turn == 0 and (r.session or 0) > 0]
    assert all(r.server and r.server.cached_tokens == (192 if shared == "yes" else 0) for r in firsts), \
        [r.server.cached_tokens for r in firsts if r.server]


@pytest.mark.parametrize(("content", "words"), [
    ('{"turns": [{"id": "a", "after": ["b"], "input_tokens": 1, "output_tokens": 1}]}\n', "not an earlier turn"),
    ('{"turns": [{"input_tokens": "many", "output_tokens": 1}]}\n', "'input_tokens' must be a whole number"),
    ("[" * 50_000 + "\n", "nested too deep"),
    ("{\"turns\": [\n", "not valid JSON"),
])
def test_a_bad_trace_is_one_line_and_exit_2(sim_factory: Callable[..., SimServer], tmp_path: Path, content: str,
                                             words: str) -> None:
    sim = sim_factory("--ttft-ms", "1")
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    done = run_cli("bench", "--url", sim.openai_url, "--agents", str(path), "--no-store")
    assert done.returncode == 2 and words in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_agents_refuse_a_load_of_their_own() -> None:
    done = run_cli("bench", "--url", "http://127.0.0.1:9/v1", "--agents", "example", "-c", "4")
    assert done.returncode == 2 and "--agents starts each session at its own time" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_agent_turns_and_their_measures_are_saved_with_the_run(sim_factory: Callable[..., SimServer],
                                                              tmp_path: Path) -> None:
    from tokometer.store import ResultStore

    sim = sim_factory("--ttft-ms", "2", "--itl-ms", "1")
    store = tmp_path / "runs.db"
    run_id = bench_stored(store, "--url", sim.openai_url, "--agents", "synthetic:sessions=2,rate=0,turns=3,"
                          "fan_out=2,sub_turns=1,tool_latency=20ms,growth=10,prefix=20,output=4")
    saved = ResultStore(f"sqlite:///{store}", read_only=True)
    records = saved.load_records(run_id)
    assert len(records) == 2 * 5 and {r.agent for r in records} == {"main", "sub-1.0", "sub-1.1"}
    assert all(r.ready_ns and r.sent_ns >= r.ready_ns for r in records)
    run = saved.run(run_id)
    saved.close()
    assert run is not None
    (step,) = run.steps
    assert step.summary is not None and step.summary.agentic is not None
    assert step.summary.agentic["sessions"] == 2 and step.load is not None and step.load.sessions
