"""Multi-turn sessions against the simulator and the embedded engine.

- The simulator's modelled engine (``--hardware``) prefills a prompt in ``time_scale x prefill_s(P)``: with
  one session at a time, each turn's TTFT is that of its prompt alone, and the prompt grows by the user's
  message and the model's answer every turn. Pinned: the per-turn TTFT that ``bench`` measures equals the
  simulator's own (its trace: first event - received) within 2 ms, and the growth from turn 1 to turn k
  equals the model's prefill-time growth within 5 % (+ 2 ms).
- The embedded llama.cpp keeps a slot's KV after an answer: a later turn, whose prompt starts with the
  whole earlier conversation, takes those tokens from its cache (``timings.cache_n``).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import SimServer, run_cli
from tests.helpers import HostJitter, bench, median, trace_truth_ms
from tokometer.engines import EngineHandle
from tokometer.perf import Deployment, Efficiency, prefill_s, resolve_hardware, resolve_model

SCALE = 4.0
USER, ANSWER, TURNS = 400, 16, 4


MODELLED = ("--model", "llama-3.1-8b", "--hardware", "H100-SXM", "--dtype", "awq", "--time-scale", str(SCALE))


def _model_prefill_ms(tokens: int) -> float:
    d = Deployment(resolve_model("llama-3.1-8b"), resolve_hardware("H100-SXM"), weight_dtype="awq")
    return SCALE * 1e3 * prefill_s(d, tokens, 0, Efficiency())


@pytest.mark.timing
def test_per_turn_ttft_grows_as_the_simulator_says(sim_factory: Callable[..., SimServer]) -> None:
    sim = sim_factory(*MODELLED, "--no-prefix-caching", "--trace-bodies")
    result = bench(sim.openai_url, sessions=3, synchronous=True, turns=str(TURNS), input_tokens=USER,
                   output_tokens=ANSWER, ignore_eos=True)
    (step,) = result.steps
    s = step.summary
    assert s.requests_completed == 3 * TURNS and s.requests_failed == 0
    records = step.records
    assert [(r.session, r.turn) for r in records] == [(i, k) for i in range(3) for k in range(TURNS)]
    traces = sim.trace()[-len(records):]
    gaps: list[float] = []
    truth: list[list[float]] = [[] for _ in range(TURNS)]
    for r, t in zip(records, traces, strict=True):
        k = r.turn or 0
        assert t["prompt_tokens"] == USER * (k + 1) + ANSWER * k  # the history: every message so far
        messages = json.loads(t["body"])["messages"]
        assert [m["role"] for m in messages] == ["user", "assistant"] * k + ["user"]
        if k:  # the previous turn's real answer is in the history
            previous = records[records.index(r) - 1]
            assert messages[-2]["content"] == previous.output_text != ""
        truth_ms = (t["event_ns"][0] - t["received_ns"]) / 1e6  # the simulator's own TTFT of this request
        truth[k].append(truth_ms)
        gaps.append((r.first_token_ns - r.sent_ns) / 1e6 - truth_ms)
    # the client's TTFT is the simulator's plus loopback and its request parsing (slower on a busy host: the median
    # was 0.5-1.5 ms here before, 2.0 ms in a full run on a VM waking processes 4-6 ms late at p99)
    assert min(gaps) >= 0 and sorted(gaps)[len(gaps) // 2] < 3.0 and max(gaps) < 10, gaps
    per_turn = s.per_turn
    assert per_turn is not None and [t["turn"] for t in per_turn] == list(range(1, TURNS + 1))
    model_ms = [_model_prefill_ms(USER * (k + 1) + ANSWER * k) for k in range(TURNS)]
    measured = [t["ttft_ms"]["p50"] for t in per_turn]
    served = [median(times) for times in truth]
    print("per-turn TTFT p50 (ms):", [round(x, 1) for x in measured], "simulator:", [round(x, 1) for x in served],
          "model:", [round(x, 1) for x in model_ms])
    for k in range(TURNS):
        # bench's per-turn TTFT is the simulator's (a median of three requests, each a gap above it: the median gap's
        # bound above, 3 ms; 2 ms failed in a busy timing lane on the Intel Xeon VM at 2.2, 2026-12-07)
        assert measured[k] == pytest.approx(served[k], abs=3.0)
    for k in range(1, TURNS):  # and its growth from turn 1 is the modelled prefill's growth
        assert served[k] - served[0] == pytest.approx(model_ms[k] - model_ms[0], rel=0.05, abs=3.0)
        assert measured[k] - measured[0] == pytest.approx(model_ms[k] - model_ms[0], rel=0.05, abs=4.0)
    assert [t["input_tokens_mean"] for t in per_turn] == [USER * (k + 1) + ANSWER * k for k in range(TURNS)]
    stats = s.session_stats
    assert stats is not None and (stats["sessions"], stats["completed"], stats["failed"]) == (3, 3, 0)
    assert stats["turns"]["mean"] == TURNS
    assert stats["ttft_turn_growth"] == pytest.approx(measured[-1] / measured[0])


@pytest.mark.timing
def test_the_simulators_prefix_cache_keeps_later_turns_fast(sim_factory: Callable[..., SimServer]) -> None:
    """With its prefix cache (on by default), the simulator prefills only what the previous turn's prompt did not
    hold (its full 16-word blocks are cached; the answer and the new message are not): every turn costs about
    the first turn's prefill, and the server's own counters say how much of the prompts it found cached."""
    sim = sim_factory(*MODELLED)
    result = bench(sim.openai_url, sessions=2, synchronous=True, turns=str(TURNS), input_tokens=USER,
                   output_tokens=ANSWER, ignore_eos=True, scrape_interval_s=0.2)
    (step,) = result.steps
    per_turn = step.summary.per_turn
    assert per_turn is not None and step.summary.requests_failed == 0
    measured = [t["ttft_ms"]["p50"] for t in per_turn]
    prompts = [USER * (k + 1) + ANSWER * k for k in range(TURNS)]
    new = [prompts[0]] + [p - q // 16 * 16 for q, p in itertools.pairwise(prompts)]
    expected = [_model_prefill_ms(n) for n in new]
    # The simulator's own TTFT of each request (its trace) is the truth bench is held to; the model is what the
    # simulator aims at, and a host that wakes it late (4-6 ms at p99 on a busy VM, more than once per prefill) makes
    # it miss by a few ms more: 50.4 against 43.0 in a full run, so that comparison is looser.
    traces = sim.trace()[-len(step.records):]
    truth: list[list[float]] = [[] for _ in range(TURNS)]  # from each request's send, as the client measures
    own: list[list[float]] = [[] for _ in range(TURNS)]  # from the simulator's receipt, as its model aims
    for r, t in zip(step.records, traces, strict=True):
        assert t["prompt_tokens"] == prompts[r.turn or 0]
        truth[r.turn or 0].append(trace_truth_ms(t, r.sent_ns)[0])
        own[r.turn or 0].append((t["event_ns"][0] - t["received_ns"]) / 1e6)
    served = [median(times) for times in own]
    print("per-turn TTFT p50 (ms):", [round(x, 1) for x in measured], "simulator:", [round(x, 1) for x in served],
          "model:", [round(x, 1) for x in expected])
    for k in range(TURNS):
        assert measured[k] == pytest.approx(median(truth[k]), abs=3.0)
        assert served[k] == pytest.approx(expected[k], rel=0.10, abs=10.0)
    assert measured[-1] < 0.5 * _model_prefill_ms(prompts[-1])  # far below an uncached prefill
    assert step.server is not None and step.server.get("prefix_cache_hit_rate") is not None
    assert step.server["prefix_cache_hit_rate"] > 0.4


def test_think_time_open_loop_and_workers(sim_factory: Callable[..., SimServer]) -> None:
    sim = sim_factory("--ttft-ms", "10", "--itl-ms", "1")
    result = bench(sim.openai_url, sessions=4, rate=[5.0], arrival="constant", turns="3", think_time="200ms",
                   input_tokens=8, output_tokens=4, ignore_eos=True)
    records = result.steps[0].records
    assert len(records) == 12 and result.steps[0].load.describe() == "rate 5 new sessions/s (constant)"
    first = sorted(r.due_ns for r in records if r.turn == 0)
    assert [round((b - a) / 1e6) for a, b in itertools.pairwise(first)] == [200, 200, 200]
    by_session = {(r.session, r.turn): r for r in records}
    for (session, turn), r in by_session.items():
        if turn:
            previous = by_session[(session, turn - 1)]
            assert r.due_ns - previous.end_ns == 200_000_000  # the think time, from the answer's end
            assert previous.end_ns < r.sent_ns
    split = bench(sim.openai_url, sessions=4, concurrency=[2], turns="2", input_tokens=8, output_tokens=4,
                  workers=2)
    assert sorted((r.session, r.turn) for r in split.steps[0].records) == [(i, k) for i in range(4) for k in (0, 1)]


@pytest.mark.timing  # each turn sent within 1 ms of its due time: a time, lost on a host busy with other tests
def test_think_time_turns_are_sent_on_time(sim_factory: Callable[..., SimServer]) -> None:
    sim = sim_factory("--ttft-ms", "10", "--itl-ms", "1")
    # On a VM whose hypervisor takes the CPUs away now and then, every process wakes late: the client's median lag
    # is bounded beyond the host's own wake-up lateness measured beside it (tests/helpers.py:HostJitter), in the
    # best of three runs of 12 turns (1.06 ms at the median failed the timing lane on the Intel VM on 2026-12-07).
    beyond: list[float] = []
    for _ in range(3):
        with HostJitter() as jitter:
            result = bench(sim.openai_url, sessions=4, rate=[5.0], arrival="constant", turns="3", think_time="200ms",
                           input_tokens=8, output_tokens=4, ignore_eos=True)
        lag_p50 = result.steps[0].summary.client_lag_ms.p50
        assert lag_p50 is not None and jitter.p99_ms is not None
        beyond.append(lag_p50 - jitter.p99_ms)
        if beyond[-1] < 1.0:
            break
    assert min(beyond) < 1.0, beyond


def test_sharegpt_conversations_with_the_models_answers(sim_factory: Callable[..., SimServer],
                                                          tmp_path: Path, store_path: Path) -> None:
    sim = sim_factory("--ttft-ms", "5", "--itl-ms", "1", "--trace-bodies")
    chats = [{"conversations": [{"from": "human", "value": f"question {i} {k}"} if j % 2 == 0 else
                                {"from": "gpt", "value": "recorded answer " * (k + 2)}
                                for k in range(3) for j in range(2)]} for i in range(2)]
    (tmp_path / "chats.json").write_text(json.dumps(chats))
    out = tmp_path / "out.json"
    done = run_cli("bench", "--url", sim.openai_url, "--dataset", str(tmp_path / "chats.json"), "--sessions", "2",
                   "-c", "2", "--store", str(store_path), "--json", str(out), "-q")
    assert done.returncode == 0, done.stderr
    assert "sessions: 2 (2 completed, 0 ended by a failure)" in done.stdout
    assert "turn 3: 2 ok" in done.stdout
    bodies = [json.loads(t["body"])["messages"] for t in sim.trace()[-6:]]
    finals = [b for b in bodies if len(b) == 5]
    assert len(finals) == 2
    for messages in finals:
        i = messages[0]["content"].split()[1]
        assert [m["content"] for m in messages[::2]] == [f"question {i} {k}" for k in range(3)]
        assert all("recorded" not in m["content"] and m["content"] for m in messages[1::2])
    data = json.loads(out.read_text())
    summary = data["steps"][0]["summary"]
    assert [t["turn"] for t in summary["per_turn"]] == [1, 2, 3]
    assert summary["per_turn"][0]["requests"] == 2 and summary["session_stats"]["completed"] == 2
    assert data["steps"][0]["load"] == {"concurrency": 2, "sessions": True}
    assert data["spec"]["sessions"] == 2 and data["spec"]["requests"] is None
    from tokometer.store import ResultStore

    store = ResultStore(f"sqlite:///{store_path}", read_only=True)
    try:
        run_id = int(store.list_runs(1)[0]["id"])
        saved = store.load_records(run_id)
    finally:
        store.close()
    assert sorted((r.session, r.turn) for r in saved) == [(i, k) for i in range(2) for k in range(3)]


@pytest.mark.engine
def test_later_turns_reuse_the_engines_prompt_cache(engine_two_slots: EngineHandle) -> None:
    engine = engine_two_slots
    result = bench(engine.openai_url, sessions=2, synchronous=True, turns="3", input_tokens=48, output_tokens=8,
                   ignore_eos=True)
    (step,) = result.steps
    s = step.summary
    assert s.requests_failed == 0, s.error_examples
    for r in step.records:
        assert r.server is not None and r.server.cached_tokens is not None
        if r.turn:  # the history came from the cache: at least the previous turns' prompt
            assert r.server.cached_tokens >= 48, (r.turn, r.server)
    assert s.per_turn is not None
    rates = [t["prompt_cache_hit_rate"] for t in s.per_turn]
    print("per-turn cache hit rate:", rates, "TTFT p50:", [t["ttft_ms"]["p50"] for t in s.per_turn])
    assert rates[0] < 0.5 < rates[1] and rates[2] > 0.5
    assert s.prompt_cache_hit_rate is not None and s.prompt_cache_hit_rate > 0.3
    assert not any("prompt cache" in w for w in step.warnings)  # sessions are meant to hit the cache
