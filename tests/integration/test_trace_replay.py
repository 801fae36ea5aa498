"""Trace replay against the simulator: the trace's arrival times kept, its lengths exact, its shared blocks shared.

The simulator stamps each request as it receives it (``received_ns``, CLOCK_MONOTONIC like the client's
stamps), and its tokenizer is one word a token, so the trace's input lengths can be checked exactly.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import SimServer, run_cli
from tests.helpers import HostJitter, bench

BLOCK = 64


def _trace(path: Path, n: int, rate: float, seed: int = 5) -> list[dict[str, Any]]:
    """A Mooncake-style trace: Poisson arrivals with bursts of 3 in one millisecond, shared prefixes."""
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    t, next_id = 0.0, 2
    while len(rows) < n:
        t += rng.expovariate(rate) * 1000
        for _ in range(3 if rng.random() < 0.1 else 1):
            if rows and rng.random() < 0.4:
                parent = rng.choice(rows)
                ids = parent["hash_ids"][:parent["input_length"] // BLOCK]
            else:
                ids = [0, 1]
            ids += list(range(next_id, next_id + 2))
            next_id += 2
            rows.append({"timestamp": round(t, 3), "input_length": (len(ids) - 1) * BLOCK + rng.randint(1, BLOCK),
                         "output_length": rng.randint(2, 6), "hash_ids": ids})
    rows = rows[:n]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def _in_trace_order(rows: list[dict[str, Any]], traces: list[dict[str, Any]],
                    due_ns: list[int]) -> list[dict[str, Any]]:
    """The simulator's traces in the trace file's order. Requests due within a few milliseconds of each other may
    reach it in any order (each on its own connection, and the client may be descheduled between them), so each
    row takes the unmatched trace of its own lengths that was received nearest its due time (the client and the
    simulator stamp with the same monotonic clock). A row with no trace of its lengths fails the test."""
    assert len(traces) == len(rows)
    left = list(traces)
    out: list[dict[str, Any]] = []
    for row, due in zip(rows, due_ns, strict=True):
        same = [t for t in left if (t["prompt_tokens"], t["completion_tokens"]) ==
                (row["input_length"], row["output_length"])]
        assert same, f"no request of {row['input_length']} + {row['output_length']} tokens reached the simulator"
        nearest = min(same, key=lambda t: abs(int(t["received_ns"]) - due))
        left.remove(nearest)
        out.append(nearest)
    return out


SEND_P50_MS = 1.0
"""How late the client may send its median request, beyond the host's own wake-up lateness measured beside it."""

SEND_P99_MS = 6.0
"""How late the client may send at p99 beyond the host's lateness: one scheduler time slice (4 ms and more), so a
client that loses its schedule (a blocked loop, sends serialised behind a slow one) fails. How late it sends there
is a performance figure, measured by `bench/trace_send_lag.py` and recorded in the bench page: on the AMD EPYC VM
under 1 ms; on the Intel Xeon VM 1.6-2.3 ms there, and 1.1-5.6 ms with this test's trace and the host idle
(2026-12-07; 120 requests with bursts of 3 in one millisecond, the connections the client had to open taking
0.3-7 ms each on loopback), where this test failed CI at 2.5 ms."""


@pytest.mark.timing
def test_replay_keeps_the_traces_timing_lengths_and_shared_blocks(sim_factory: Callable[..., SimServer],
                                                                   tmp_path: Path) -> None:
    sim = sim_factory("--ttft-ms", "5", "--itl-ms", "1", "--trace-bodies")
    rows = _trace(tmp_path / "trace.jsonl", 120, 40.0)
    stamps = np.array([float(r["timestamp"]) for r in rows])
    # Best of five replays: on a 2-core machine that other processes keep busy, the OS deschedules the client for
    # a time slice (4 ms and more) whatever it does; one clean replay shows what the client itself keeps. The
    # server's /metrics are not read, so that no scraping thread competes for the interpreter. On a VM whose
    # hypervisor takes the CPUs away now and then, every process wakes late: the client is bounded beyond the
    # host's own wake-up lateness, measured beside it (tests/helpers.py:HostJitter).
    best: tuple[float, float, float, float] | None = None
    host_ms = 0.0  # the host's wake-up lateness (p99) during the best replay
    for _ in range(5):
        sim.clear_trace()
        with HostJitter() as jitter:
            result = bench(sim.openai_url, api="openai-completions", trace=tmp_path / "trace.jsonl",
                           trace_block_tokens=BLOCK, server_metrics="off", gpu_metrics="off")
        assert jitter.p99_ms is not None
        (step,) = result.steps
        records = step.records
        assert step.summary.requests_completed == 120 and step.summary.requests_failed == 0
        due = np.array([r.due_ns for r in records], dtype=np.int64)
        assert np.array_equal(due - due[0], np.round((stamps - stamps[0]) * 1e6).astype(np.int64))  # the schedule
        traces = _in_trace_order(rows, sim.trace(), [r.due_ns for r in records])
        assert [t["prompt_tokens"] for t in traces] == [r["input_length"] for r in rows]  # exact lengths
        assert [t["completion_tokens"] for t in traces] == [r["output_length"] for r in rows]
        lag_ms = np.array([(r.sent_ns - r.due_ns) / 1e6 for r in records])
        arrival_ms = np.array([(t["received_ns"] - r.due_ns) / 1e6 for t, r in zip(traces, records, strict=True)])
        lags = (float(np.percentile(lag_ms, 50)), float(np.percentile(lag_ms, 99)),
                float(np.percentile(arrival_ms, 50)), float(np.percentile(arrival_ms, 99)))
        print(f"sent - trace time: p50 {lags[0]:.3f} p99 {lags[1]:.3f} max {lag_ms.max():.3f} ms; "
              f"received by the server - trace time: p50 {lags[2]:.3f} p99 {lags[3]:.3f} ms; "
              f"host CPUs {100 * (step.health.host_cpu_busy or 0):.0f}% busy, host wake-up lateness p99 "
              f"{jitter.p99_ms:.3f} ms")
        if best is None or lags[1] - jitter.p99_ms < best[1] - host_ms:
            best, host_ms = lags, jitter.p99_ms
        if lags[1] - host_ms < SEND_P99_MS and lags[0] - host_ms < SEND_P50_MS:
            break
    assert best is not None
    assert best[0] < SEND_P50_MS + host_ms and best[1] < SEND_P99_MS + host_ms  # sent on the trace's time
    # and received by the server soon after, at the median (loopback, and the simulator's own reading of the
    # request: a second process, as late as the host makes it; its p99 is the host's alone, printed above: 3.5-16 ms
    # with the host idle on the Intel Xeon VM, 22-42 ms in a busy timing lane there, 2026-12-07, on this commit's
    # code and the one before it alike)
    assert best[2] < 1.0 + host_ms
    texts = [json.loads(t["body"])["prompt"] for t in traces]
    for i, row in enumerate(rows):  # the same leading ids, the same leading words
        for j in range(i):
            a, b = rows[j]["hash_ids"], row["hash_ids"]
            same = next((k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
            full = min(same, row["input_length"] // BLOCK, rows[j]["input_length"] // BLOCK)
            assert texts[i].split()[:full * BLOCK] == texts[j].split()[:full * BLOCK]
            if same == 0:
                assert texts[i].split()[:BLOCK] != texts[j].split()[:BLOCK]


@pytest.mark.timing
def test_time_scale_workers_and_the_cli(sim_factory: Callable[..., SimServer], tmp_path: Path) -> None:
    sim = sim_factory("--ttft-ms", "5", "--itl-ms", "1")
    rows = _trace(tmp_path / "trace.jsonl", 20, 5.0, seed=9)  # ~1.9 s at 0.5: 1 % is ~19 ms, beyond a host's lags
    out = tmp_path / "out.json"
    done = run_cli("bench", "--url", sim.openai_url, "--trace", str(tmp_path / "trace.jsonl"), "--time-scale", "0.5",
                   "--trace-block-tokens", str(BLOCK), "--no-store", "--json", str(out), "-q", "--workers", "2")
    assert done.returncode == 0, done.stderr
    assert "trace trace.jsonl (20 requests over" in done.stdout
    data = json.loads(out.read_text())
    (step,) = data["steps"]
    span_s = (float(rows[-1]["timestamp"]) - float(rows[0]["timestamp"])) / 1000 * 0.5
    assert step["load"]["arrival"] == "trace" and step["load"]["requests"] == 20
    assert step["load"]["rate"] == 19 / span_s
    assert abs(step["summary"]["send_rate_rps"] - 19 / span_s) / (19 / span_s) < 0.01
    assert data["spec"]["time_scale"] == 0.5 and data["spec"]["requests"] is None
