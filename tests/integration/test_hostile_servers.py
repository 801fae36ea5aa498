"""Bounded in time and memory against hostile servers (issue 22, categories A, B and C).

Every server here is `tests.hostile_servers.HostileServer`, a raw-socket server on loopback written
for these tests: it answers the way a broken or malicious server does (an event that never ends, a
stream that ignores ``max_tokens``, a trickle, an endless body, silence). Each test bounds its own
time, and says what the client must do instead of hanging or growing.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from tests.conftest import SimServer, run_cli
from tests.helpers import bench
from tests.hostile_servers import (
    big_event,
    endless_body,
    gateway_beside_hostile,
    hostile,
    ignores_max_tokens,
    json_answer,
    silent,
    trickle,
    undelimited_event,
)


def _summary_and_records(result):
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
    assert done.stderr == ("tokometer: error: Invalid value for --max-event-bytes: 'lots' is not a size (write e.g. "
                           "1MiB, 512KiB, 65536) (see 'tokometer bench --help')\n")


@pytest.mark.parametrize("answer", [trickle(2.0), endless_body(b"text/plain"), silent],
                         ids=["trickle", "endless", "silent"])
def test_top_once_ends_within_its_scrape_deadline(answer) -> None:
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
    from tokometer.client.http1 import ProtocolViolation
    from tokometer.client.probe import Probe

    with hostile({"/v1/models": endless_body()}) as server:
        started = time.monotonic()
        with pytest.raises(ProtocolViolation, match="passed 16 MiB"):
            asyncio.run(Probe(timeout_s=20).get(server.url + "/models"))
        assert time.monotonic() - started < 10
        assert asyncio.run(Probe(timeout_s=20).get_json(server.url + "/models")) is None


@pytest.mark.timing  # no other client's gap past 0.5 s is a time: beside the other lanes one gap was 0.76 s
def test_gateway_an_upstream_event_that_never_ends_stalls_no_other_client(
        sim_factory: Callable[..., SimServer], tmp_path: Path) -> None:
    """A real gateway process with two upstreams: the hostile one sends an event that never ends (a 16 MiB one
    stalled every client of every other upstream for 3.3 s), the simulator streams normally. The client of the
    hostile upstream gets a failure at the 1 MiB event limit; the simulator's client, streaming meanwhile, sees
    no gap longer than a fraction of a second."""
    sim = sim_factory("--ttft-ms", "5", "--itl-ms", "20")
    with (hostile({"/v1/chat/completions": undelimited_event}) as bad,
          gateway_beside_hostile(sim.openai_url, bad.url, tmp_path) as gw):
        gaps: list[float] = []
        bad_answer: list[bytes] = []

        def healthy() -> None:
            last = time.monotonic()
            with urllib.request.urlopen(_stream_request(gw.root, "m", 60), timeout=30) as response:
                for _ in response:
                    now = time.monotonic()
                    gaps.append(now - last)
                    last = now

        def hostile_client() -> None:
            time.sleep(0.3)  # the healthy stream is flowing
            try:
                with urllib.request.urlopen(_stream_request(gw.root, "bad", 8), timeout=30) as response:
                    bad_answer.append(response.read())
            except urllib.error.HTTPError as error:
                bad_answer.append(error.read())

        threads = [threading.Thread(target=healthy), threading.Thread(target=hostile_client)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    assert bad_answer and b"without ending" in bad_answer[0], bad_answer[:1]
    assert len(gaps) > 60
    assert max(gaps[1:]) < 0.5, max(gaps[1:])


def _stream_request(root: str, model: str, max_tokens: int) -> urllib.request.Request:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": max_tokens,
            "stream": True}
    return urllib.request.Request(root + "/v1/chat/completions", json.dumps(body).encode(),
                                  {"Content-Type": "application/json"})


@pytest.mark.timing  # which of doctor's limits fires first is a time: beside the other lanes the per-read one did
def test_doctor_ends_against_a_server_that_trickles_floods_and_ignores_max_tokens() -> None:
    """A hostile server for every path doctor reads: ``/metrics``, ``/props`` and ``/health`` trickle a byte a
    second or two, ``/tokenize`` floods, the completions stream past ``max_tokens`` forever. Doctor must end
    within its limits (an endless ``/v1/models`` reached 436 MiB in 10 s before), naming what it saw."""
    models = json_answer({"object": "list", "data": [{"id": "m", "object": "model"}]})
    answers = {"/v1/models": models, "/metrics": trickle(2.0), "/props": trickle(1.0, b"application/json"),
               "/health": trickle(1.0), "/tokenize": endless_body(), "/v1/chat/completions": ignores_max_tokens}
    with hostile(answers) as server:
        started = time.monotonic()
        done = run_cli("doctor", server.url, "--model", "m", "--quick", "--timeout", "5", "--json", timeout=90)
        elapsed = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    findings = {f["id"]: f for f in json.loads(done.stdout)["findings"]}
    assert "server ignored max_tokens" in json.dumps(findings)
    assert "total timeout" in findings["server.no_metrics"]["evidence"]["error"]
    assert elapsed < 60


def test_doctor_names_an_endless_model_list_as_a_bad_answer() -> None:
    """An endless ``/v1/models``: refused at 16 MiB, and doctor says the answer is unusable (not "nothing answers")."""
    with hostile({"/v1/models": endless_body()}) as server:
        done = run_cli("doctor", server.url, "--quick", "--json", timeout=60)
    assert done.returncode == 1, done.stderr
    findings = [(f["id"], f["severity"]) for f in json.loads(done.stdout)["findings"]]
    assert findings == [("reach.bad_answer", "error")]


def test_quality_client_refuses_an_endless_answer_and_a_stream_that_never_ends() -> None:
    """``quality``'s non-streamed requests (greedy paths with log-probabilities) against an endless body and a
    trickle: each is a one-line failure within its limits, never a hang or a growing buffer."""
    from tokometer.quality.endpoints import Endpoint, EndpointSpec
    from tokometer.quality.logprobs import LogprobClient

    async def ask(url: str, timeout_s: float) -> tuple[object, str]:
        endpoint = Endpoint("a", EndpointSpec(url), url, url.removesuffix("/v1"), "m")
        client = LogprobClient(endpoint, "openai-chat", top_k=2, max_tokens=4, timeout_s=timeout_s)
        try:
            return await client.greedy_path("hi")
        finally:
            await client.close()

    with hostile({"/v1/chat/completions": endless_body()}) as flood:
        started = time.monotonic()
        steps, why = asyncio.run(ask(flood.url, 30))
        assert steps is None and "passed 16 MiB" in why
        assert time.monotonic() - started < 10
    with hostile({"/v1/chat/completions": trickle(0.5, b"application/json")}) as slow:
        started = time.monotonic()
        steps, why = asyncio.run(ask(slow.url, 3))
        assert steps is None and "total timeout (3 s)" in why
        assert time.monotonic() - started < 8


def test_bench_tells_the_user_what_it_waits_for_when_a_server_accepts_and_never_answers() -> None:
    """A server that accepts the connection and never answers left the user 60 s in silence, then measured
    anyway (each request waiting as long): bench now says, after 5 s, what it waits for and when it gives up;
    with --timeout 8s the check request then fails, and so does bench, in one line, before any run."""
    with hostile({"/v1/chat/completions": silent}) as server:
        started = time.monotonic()
        done = run_cli("bench", "--url", server.url, "--model", "m", "--requests", "1", "--timeout", "8s",
                       "--tokenizer", "none", "--no-store", "--server-metrics", "off", timeout=60)
        elapsed = time.monotonic() - started
    assert f"tokometer: waiting for {server.url} to answer the check request: the first byte" in done.stderr
    assert done.returncode == 2 and "sent not one byte back" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert elapsed < 30


@pytest.mark.parametrize("answer", [trickle(1.0, b"application/json"), endless_body()], ids=["trickle", "endless"])
def test_the_server_tokenizer_probe_gives_up_on_a_trickling_or_endless_tokenize(answer) -> None:
    """``/tokenize`` (asked by bench's and doctor's ``--tokenizer auto``) that trickles a byte a second, or floods:
    the probe's 5 s is a deadline for the whole answer and 16 MiB its limit, so it gives up (no tokenizer)."""
    from tokometer.tokens.remote import probe_server_tokenizer

    with hostile({"/tokenize": answer}) as server:
        started = time.monotonic()
        assert probe_server_tokenizer(server.url) is None
        assert time.monotonic() - started < 9


@pytest.mark.timing
def test_one_stream_of_huge_events_does_not_stall_the_others_unseen() -> None:
    """One stream sends 6 MiB events (under a raised --max-event-bytes), three others a token every 10 ms.
    Parsing the huge events gave the healthy streams ITL p99 3.6 s while the self-check said "client kept
    up". Now parsing is linear and in slices: the healthy streams' ITL stays near the server's pacing, and
    whatever lateness the stamps did suffer, the self-check's loop lag shows."""
    from tests.hostile_servers import big_events_then_paced

    with hostile({"/v1/chat/completions": big_events_then_paced(6 * 1024 * 1024)}) as server:
        result = bench(server.url, model="m", concurrency=[4], requests=8, input_tokens=4, output_tokens=40,
                       tokenizer="none", max_event_bytes=8 * 1024 * 1024, warmup=0)
    step = result.steps[0]
    assert step.summary.requests_failed == 0, step.summary.error_examples
    healthy = [r for r in step.records if len(r.event_ns) > 10]
    assert len(healthy) == 7
    gaps_ms = sorted((b - a) / 1e6 for r in healthy for a, b in zip(r.event_ns, r.event_ns[1:], strict=False))
    itl_p99 = gaps_ms[int(0.99 * (len(gaps_ms) - 1))]
    assert itl_p99 < 500, itl_p99
    if itl_p99 > 100:  # the stamps were late: the client must say so, not "client kept up"
        assert step.health.loop_lag_max_ms > 50, (itl_p99, step.health)


def test_doctor_tells_the_user_what_it_waits_for_when_a_server_never_answers() -> None:
    """A server that lists its models and never answers a completion: doctor was silent for 3 x 60 s. Now each
    wait past 5 s gets a line saying what it waits for (and the --timeout that ends it)."""
    models = json_answer({"object": "list", "data": [{"id": "m", "object": "model"}]})
    with hostile({"/v1/models": models, "/v1/chat/completions": silent}) as server:
        done = run_cli("doctor", server.url, "--quick", "--timeout", "7", timeout=120)
    assert done.returncode == 1
    assert f"tokometer doctor: waiting for {server.url} to answer a request: no answer in 5 s (it fails after " \
           "--timeout 7)" in done.stderr
    assert "Traceback" not in done.stderr
