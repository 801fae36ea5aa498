"""The sampler keeps the parsed figures of every ``/metrics`` sample, and the raw series of the newest only; a
step's closing reading waits, a bounded while, for the server's count of finished requests to catch up."""

from __future__ import annotations

from collections.abc import Callable
from itertools import count
from time import monotonic, perf_counter_ns

from tokometer.benchmark.observation import SETTLE_S, RunObservation
from tokometer.observe.sampler import Sampler
from tokometer.observe.snapshot import Snapshot


def test_only_the_newest_snapshot_keeps_its_raw_series() -> None:
    """A 13 MB page cost ~38 MB a sample when every sample kept every raw series: a run of an hour kept
    3,600 of them. The gauges and counters that the step windows read are kept for every sample."""
    stamps = count(1)

    def scrape() -> Snapshot:
        at = next(stamps)
        return Snapshot(at_ns=at, source="vllm", gauges={"requests_running": float(at)},
                        counters={"generation_tokens": 10.0 * at},
                        raw={f'series{{i="{i}"}}': float(i) for i in range(1000)})

    sampler = Sampler(scrape, None)
    for _ in range(4):
        sampler.sample()
    assert [len(s.raw) for s in sampler.snapshots] == [0, 0, 0, 1000]
    assert [s.gauges["requests_running"] for s in sampler.snapshots] == [1.0, 2.0, 3.0, 4.0]
    assert [s.counters["generation_tokens"] for s in sampler.snapshots] == [10.0, 20.0, 30.0, 40.0]


def _lagging_server(finished_after: list[float]) -> Callable[[], Snapshot]:
    """A server whose count of finished requests reads, scrape by scrape, as ``finished_after`` says (its last
    value from then on): an engine that counts a request once its output is processed, after the client has it.
    In-process: the lag of vLLM's counter behind the client's last token is a race no test server makes on
    demand (tests/vllm's closed-loop test met it once, beside the other lanes)."""
    readings = iter(finished_after)
    last = [0.0]

    def scrape() -> Snapshot:
        last[0] = next(readings, last[0])
        return Snapshot(at_ns=perf_counter_ns(), source="vllm", counters={"requests_finished": last[0]})
    return scrape


def test_the_closing_reading_waits_for_the_servers_count_to_catch_up() -> None:
    sampler = Sampler(_lagging_server([10.0, 13.0, 13.0, 14.0, 99.0]), None)
    observation = RunObservation(sampler, lambda snapshots, gaps: {}, lambda *args: (None, []))
    sampler.sample()  # the reading before the step: 10 finished
    start = end = perf_counter_ns()
    observation.close_window(start, end, finished=4)  # the client saw 4 finish: read 13, 13, then 14 closes it
    window, _ = sampler.server_window(start, end)
    assert [s.counters["requests_finished"] for s in window] == [10.0, 14.0]  # the step's account: 4 finished


def test_a_server_that_counts_otherwise_costs_a_step_at_most_the_cap() -> None:
    sampler = Sampler(_lagging_server([10.0, 11.0]), None)  # never reaches the client's 4
    observation = RunObservation(sampler, lambda snapshots, gaps: {}, lambda *args: (None, []))
    sampler.sample()
    began = monotonic()
    observation.close_window(perf_counter_ns(), perf_counter_ns(), finished=4)
    assert SETTLE_S <= monotonic() - began < SETTLE_S + 0.5
    no_counter = Sampler(lambda: Snapshot(at_ns=perf_counter_ns(), source="llamacpp"), None)
    quick = RunObservation(no_counter, lambda snapshots, gaps: {}, lambda *args: (None, []))
    began = monotonic()
    quick.close_window(perf_counter_ns(), perf_counter_ns(), finished=4)  # no count kept: one reading, no wait
    assert monotonic() - began < 0.5 and len(no_counter.snapshots) == 1
