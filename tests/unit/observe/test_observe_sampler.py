"""The sampler keeps the parsed figures of every ``/metrics`` sample, and the raw series of the newest only."""

from __future__ import annotations

from itertools import count

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
