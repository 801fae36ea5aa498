"""Bounded in time and memory against hostile servers (issue 22, categories A, B and C).

Every server here is `tests.hostile_servers.HostileServer`, a raw-socket server on loopback written
for these tests: it answers the way a broken or malicious server does (an event that never ends, a
stream that ignores ``max_tokens``, a trickle, an endless body, silence). Each test bounds its own
time, and says what the client must do instead of hanging or growing.
"""

from __future__ import annotations

import asyncio
import time

import psutil
import pytest

from tests.conftest import run_cli
from tests.helpers import bench
from tests.hostile_servers import (
    big_event,
    endless_body,
    hostile,
    ignores_max_tokens,
    silent,
    trickle,
    undelimited_event,
)


def _summary_and_records(result):  # type: ignore[no-untyped-def]
    step = result.steps[0]
    return step.summary, step.records


def test_bench_stops_reading_an_event_that_never_ends_and_keeps_its_memory() -> None:
    """One event without a delimiter, sent as fast as loopback goes: it grew bench to 1 GB in 40 s and kept
    ``--timeout 10s`` running past 40 s. Now each request is a ``protocol`` failure at 1 MiB, at once."""
    rss_before = psutil.Process().memory_info().rss
    with hostile({"/v1/chat/completions": undelimited_event}) as server:
        started = time.monotonic()
        result = bench(server.url, model="m", concurrency=[1], requests=3, input_tokens=4, output_tokens=4,
                       tokenizer="none", request_timeout_s=10)
        elapsed = time.monotonic() - started
    summary, _ = _summary_and_records(result)
    assert summary.errors == {"protocol": 3}, summary.error_examples
    assert "passed 1.0 MiB without ending" in " ".join(map(str, summary.error_examples.values()))
    assert elapsed < 8
    assert psutil.Process().memory_info().rss - rss_before < 200 * 1024 * 1024


def test_bench_max_event_bytes_lets_a_larger_event_through() -> None:
    """A valid 2 MiB content event: refused under the 1 MiB default, read whole with --max-event-bytes 4 MiB."""
    with hostile({"/v1/chat/completions": big_event(2 * 1024 * 1024)}) as server:
        refused = bench(server.url, model="m", concurrency=[1], requests=1, input_tokens=4, output_tokens=4,
                        tokenizer="none")
        allowed = bench(server.url, model="m", concurrency=[1], requests=1, input_tokens=4, output_tokens=4,
                        tokenizer="none", max_event_bytes=4 * 1024 * 1024)
    assert refused.steps[0].summary.errors == {"protocol": 1}
    assert allowed.steps[0].summary.requests_failed == 0, allowed.steps[0].summary.error_examples


def test_bench_stops_a_stream_that_ignores_max_tokens_and_keeps_what_came() -> None:
    """Content events forever, never ``[DONE]``: each request held for the 600 s default. Now reading stops
    past 2 x max_tokens + 64 events, the request says "server ignored max_tokens", its stamps are kept."""
    with hostile({"/v1/chat/completions": ignores_max_tokens}) as server:
        started = time.monotonic()
        result = bench(server.url, model="m", concurrency=[1], requests=2, input_tokens=4, output_tokens=8,
                       tokenizer="none")
        elapsed = time.monotonic() - started
    summary, records = _summary_and_records(result)
    assert summary.errors == {"protocol": 2}, summary.error_examples
    assert all(r.error_detail.startswith("server ignored max_tokens") for r in records), records[0].error_detail
    assert all(r.first_token_ns and len(r.event_ns) >= 2 * 8 + 64 for r in records)  # what was measured is kept
    assert elapsed < 10


def test_bench_cli_refuses_a_malformed_max_event_bytes() -> None:
    done = run_cli("bench", "--url", "http://127.0.0.1:9/v1", "--max-event-bytes", "lots")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("tokometer: error:") or "--max-event-bytes" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("answer", [trickle(2.0), endless_body(b"text/plain"), silent],
                         ids=["trickle", "endless", "silent"])
def test_top_once_ends_within_its_scrape_deadline(answer) -> None:  # type: ignore[no-untyped-def]
    """``/metrics`` trickling a byte every 2 s hung ``top --once`` (the timeout was an idle timer); an endless
    page grew without limit. Now the whole answer has a 5 s deadline and 16 MiB: one line, exit 2."""
    with hostile({"/metrics": answer}) as server:
        started = time.monotonic()
        done = run_cli("top", server.root, "--once", "--gpu-metrics", "off", timeout=60)
        elapsed = time.monotonic() - started
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"tokometer: error: no server metrics at {server.root}/metrics")
    assert len(done.stderr.splitlines()) == 1
    assert elapsed < 20


def test_the_bench_sampler_keeps_a_trickling_metrics_page_to_its_deadline() -> None:
    """The sampler's scrape of a trickling ``/metrics`` ends at its deadline (a gap), not when the server stops."""
    from tokometer.observe.sampler import fetch_text

    with hostile({"/metrics": trickle(0.5)}) as server:
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            fetch_text(server.root + "/metrics", 2.0)
        assert time.monotonic() - started < 4


def test_a_small_get_of_an_endless_answer_is_refused_at_its_size_limit() -> None:
    """An endless ``/v1/models`` (doctor reached 436 MiB in 10 s): the probe stops at 16 MiB, a protocol error."""
    from tokometer.backends.http1 import ProtocolViolation
    from tokometer.backends.probe import Probe

    with hostile({"/v1/models": endless_body()}) as server:
        started = time.monotonic()
        with pytest.raises(ProtocolViolation, match="passed 16 MiB"):
            asyncio.run(Probe(timeout_s=20).get(server.url + "/models"))
        assert time.monotonic() - started < 10
        assert asyncio.run(Probe(timeout_s=20).get_json(server.url + "/models")) is None
