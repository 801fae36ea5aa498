"""A server's numbers are data, not truth (issue 22, category D).

Every server here is a hostile raw-socket server written for these tests (`tests.http_servers.RawServer`):
it streams a well-formed answer whose counts or timings are wrong in one chosen way (an absurd
``usage.completion_tokens``, a negative one, a string where a count goes, a count far past ``max_tokens``,
non-finite llama.cpp/Ollama timings, reasoning tokens counted in usage but never streamed), answers the
API path with an HTML page, or accepts connections too slowly for its accept queue. No real engine can be
made to send these on demand. Each runs through the bench core (two through the command line, to see what a
user sees).
"""

from __future__ import annotations

import json
import re
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli
from tests.helpers import bench
from tests.http_servers import RawServer, Script, running
from tests.raw_sockets import Listener, content_length, read_body, read_head
from tokometer.metrics import request as m

WORDS = ("alpha", " beta", " gamma", " delta")


def _sse(*payloads: dict[str, Any] | str) -> list[bytes]:
    return [b"data: " + (p.encode() if isinstance(p, str) else json.dumps(p).encode()) + b"\n\n" for p in payloads]


def _chat(usage: dict[str, Any] | None, words: tuple[str, ...] = WORDS) -> list[bytes]:
    """An OpenAI chat stream of ``words`` (one event each), a finish, then ``usage`` (as given) and [DONE]."""
    events: list[dict[str, Any] | str] = [{"choices": [{"index": 0, "delta": {"role": "assistant"}}]}]
    events += [{"choices": [{"index": 0, "delta": {"content": w}}]} for w in words]
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    if usage is not None:
        events.append({"choices": [], "usage": usage})
    events.append("[DONE]")
    return _sse(*events)


def _stream(events: list[bytes], pause_s: float = 0.002, content_type: bytes = b"text/event-stream") -> Script:
    """Writes a chunked answer of ``events``, ``pause_s`` apart."""
    def script(conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # each event its own segment, when sent
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: " + content_type + b"\r\nTransfer-Encoding: chunked\r\n\r\n")
        for event in events:
            conn.sendall(b"%x\r\n%s\r\n" % (len(event), event))
            time.sleep(pause_s)
        conn.sendall(b"0\r\n\r\n")

    return script


def _run(script: Script, api: str = "openai-chat", output_tokens: int = 16) -> Any:
    with running(RawServer(script, close_after=False)) as url:
        if api != "openai-chat":
            url = url.removesuffix("/v1")
        return bench(url, api=api, model="m", concurrency=[1], requests=2, input_tokens=4,
                     output_tokens=output_tokens, tokenizer="none", idle_timeout_s=5)


def test_absurd_and_negative_counts_are_replaced_by_the_event_count() -> None:
    """usage.completion_tokens of 1e30 and of -5: not believed; the count is the events' (an estimate), noted."""
    for bad in (1e30, -5, 10**40):
        result = _run(_stream(_chat({"prompt_tokens": 3, "completion_tokens": bad, "total_tokens": 3})))
        step = result.steps[0]
        summary = step.summary
        assert summary.requests_completed == 2 and summary.requests_failed == 0, summary.error_examples
        assert summary.output_tokens_source == {"estimate": 2}
        assert summary.output_tokens_total == 2 * len(WORDS)
        assert summary.server_numbers_rejected == 2
        assert "usage.completion_tokens=" in summary.server_numbers_example
        assert all(r.rejected_numbers and "completion_tokens" in r.rejected_numbers for r in step.records)
        assert summary.decode_speed_tok_s.max is not None and 0 < summary.decode_speed_tok_s.max < 1e5
        assert summary.output_throughput_tok_s < 1e5
        assert any("not believed" in w for w in step.warnings), step.warnings


def test_count_past_max_tokens_is_not_believed() -> None:
    """A well-formed count far past what was asked (max_tokens 16, usage 5000) falls back to the events."""
    result = _run(_stream(_chat({"prompt_tokens": 3, "completion_tokens": 5000, "total_tokens": 5003})))
    summary = result.steps[0].summary
    assert summary.output_tokens_source == {"estimate": 2} and summary.output_tokens_total == 8
    assert "more than max_tokens 16" in summary.server_numbers_example


def test_count_far_below_the_events_is_not_believed() -> None:
    """usage.completion_tokens of 1 for 9 content events (each event is at least a token): the events count."""
    words = tuple(f" w{i}" for i in range(9))
    result = _run(_stream(_chat({"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}, words)))
    summary = result.steps[0].summary
    assert summary.output_tokens_source == {"estimate": 2} and summary.output_tokens_total == 18
    assert "fewer than one token for every 4 of its 9 content events" in summary.server_numbers_example


def test_string_prompt_tokens_neither_crash_nor_count(tmp_path: Path) -> None:
    """``"prompt_tokens": "12"`` through the command line: the run completes and is saved as completed, the
    count is not taken from usage, and no traceback is printed."""
    events = _chat({"prompt_tokens": "12", "completion_tokens": 4, "total_tokens": "16"})
    with running(RawServer(_stream(events), close_after=False)) as url:
        out = tmp_path / "run.json"
        done = run_cli("bench", "--url", url, "--model", "m", "--requests", "2", "--concurrency", "1",
                       "--input-tokens", "4", "--output-tokens", "16", "--tokenizer", "none", "--no-check",
                       "--store", str(tmp_path / "runs.db"), "--json", str(out))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    saved = json.loads(out.read_text())
    assert saved["status"] == "completed"
    step = saved["steps"][0]["summary"]
    assert step["requests_completed"] == 2
    assert "usage" not in step["input_tokens"]["source"]
    assert step["output_tokens"]["source"] == {"usage": 2}  # the well-formed count is still believed
    assert "usage.prompt_tokens='12' (not a number)" in step["server_numbers_example"]


def test_absurd_count_prints_no_absurd_figure() -> None:
    """What a user sees for usage.completion_tokens = 1e30: no figure of more than 9 digits anywhere."""
    events = _chat({"prompt_tokens": 3, "completion_tokens": 1e30, "total_tokens": 1e30})
    with running(RawServer(_stream(events), close_after=False)) as url:
        done = run_cli("bench", "--url", url, "--model", "m", "--requests", "2", "--concurrency", "1",
                       "--input-tokens", "4", "--output-tokens", "16", "--tokenizer", "none", "--no-check",
                       "--no-store")
    assert done.returncode == 0, done.stderr
    printed = done.stdout + done.stderr
    assert not re.search(r"\d[\d,]{12,}", printed), printed
    assert "not believed" in printed


def test_hidden_reasoning_stays_out_of_tpot() -> None:
    """o-series style: usage counts 8 reasoning tokens that were never streamed, beside 4 streamed ones sent
    at least 8 ms apart. TPOT must be that of the streamed tokens (about 8 ms), not 24 ms spread over 11 tokens
    (about 2 ms); the 8 hidden tokens are reported apart. Single gaps are not pinned: on a busy host one late read
    of an event shrinks the gap after it (seen in CI), while TPOT spans them all."""
    usage = {"prompt_tokens": 3, "completion_tokens": 12, "total_tokens": 15,
             "completion_tokens_details": {"reasoning_tokens": 8}}
    result = _run(_stream(_chat(usage), pause_s=0.008), output_tokens=64)
    step = result.steps[0]
    summary = step.summary
    assert summary.output_tokens_source == {"usage": 2} and summary.output_tokens_total == 24
    for record in step.records:
        assert record.hidden_tokens == 8 and record.reasoning_tokens == 8
        assert sum(record.event_tokens) == 4
        tpot = m.tpot_ns(record)
        assert tpot is not None and 5e6 <= tpot <= 60e6, tpot
        assert len(m.itl_ns(record)) == 3
    assert summary.reasoning is not None and summary.reasoning.hidden_tokens_total == 16
    assert summary.reasoning.to_json()["reasoning_tokens"]["hidden"] == 16


def test_reasoning_count_larger_than_the_output_is_cut() -> None:
    """reasoning_tokens 50 of completion_tokens 6, with 4 streamed events: at most 2 can have been hidden."""
    usage = {"prompt_tokens": 3, "completion_tokens": 6, "completion_tokens_details": {"reasoning_tokens": 50}}
    step = _run(_stream(_chat(usage))).steps[0]
    for record in step.records:
        assert record.reasoning_tokens == 2 and record.hidden_tokens == 2
        assert record.rejected_numbers and "reasoning_tokens=50" in record.rejected_numbers


def test_llamacpp_timings_that_are_not_durations() -> None:
    """llama.cpp's native API with a negative predicted_ms, a prompt_ms of 1e300 and a string predicted_n: the
    timings are absent, the run completes, the output count is the engine's."""
    events = [b'data: {"content": "%s", "stop": false}\n\n' % w.encode() for w in WORDS]
    events.append(b'data: {"content": "", "stop": true, "stop_type": "eos", "tokens_predicted": 4, '
                  b'"tokens_evaluated": -3, "timings": {"prompt_n": 3, "prompt_ms": 1e300, '
                  b'"predicted_n": "4", "predicted_ms": -20.5}}\n\n')
    step = _run(_stream(events), api="llamacpp").steps[0]
    summary = step.summary
    assert summary.requests_completed == 2, summary.error_examples
    assert summary.output_tokens_source == {"native": 2}
    assert summary.server_prefill_ms.count == 0 and summary.server_decode_tok_s.count == 0
    notes = step.records[0].rejected_numbers or ""
    assert "timings.predicted_ms=-20.5 (negative)" in notes and "tokens_evaluated=-3" in notes
    assert "timings.prompt_ms=1e+300 (beyond any request)" in notes


def test_ollama_counters_of_the_wrong_type() -> None:
    """Ollama's final line with eval_count as a list and eval_duration as NaN (not JSON: a malformed stream),
    then as 1e300 ns: read as absent."""
    lines = [json.dumps({"message": {"role": "assistant", "content": w}, "done": False}).encode() + b"\n"
             for w in WORDS]
    lines.append(b'{"message": {"role": "assistant", "content": ""}, "done": true, "done_reason": "stop", '
                 b'"eval_count": [4], "eval_duration": NaN, "prompt_eval_count": 3}\n')
    step = _run(_stream(lines, content_type=b"application/x-ndjson"), api="ollama").steps[0]
    summary = step.summary
    # NaN is not JSON: the line is unparseable, and that is what the record says
    assert summary.errors == {"malformed_stream": 2}
    lines[-1] = lines[-1].replace(b"NaN", b"1e300")
    step = _run(_stream(lines, content_type=b"application/x-ndjson"), api="ollama").steps[0]
    assert step.summary.requests_completed == 2 and step.summary.output_tokens_source == {"estimate": 2}
    notes = step.records[0].rejected_numbers or ""
    assert "eval_count=[4] (not a number)" in notes and "eval_duration=1e+300 (beyond any request)" in notes


def test_html_page_on_the_api_path_is_not_an_api_answer() -> None:
    """A 200 with an HTML page (a captive portal, a web server's index) is a protocol failure saying so, not a
    "reset"."""
    page = b"<!DOCTYPE html><html><head><title>Welcome to nginx!</title></head><body>hi</body></html>"
    for content_type in (b"text/html; charset=utf-8", b"text/plain"):
        step = _run(_stream([page], content_type=content_type)).steps[0]
        assert step.summary.errors == {"protocol": 2}, step.summary.error_examples
        detail = step.summary.error_examples["protocol"]
        assert "not an API answer" in detail and "Welcome to nginx!" in detail


class _SlowAcceptServer(Listener):
    """A hostile server written for this test: its accept queue holds one connection (``listen(0)``) and it
    accepts one every 0.3 s, so a burst of new connections overflows it and the kernel drops their SYNs: the
    client retries each after 1 s, as against a server whose accept queue is full. Each accepted connection
    gets one streamed answer and is closed."""

    def __init__(self) -> None:
        super().__init__(backlog=0, accept_every_s=0.3)
        self.url = f"http://{self.netloc}/v1"

    def __enter__(self) -> str:
        self.start()
        return self.url

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def serve(self, conn: socket.socket) -> None:
        with conn:
            request = read_head(conn)
            if request is None or read_body(conn, request[1], content_length(request[0])) is None:
                return
            body = b"".join(_chat({"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}))
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(body), body))


@pytest.mark.timing
def test_a_server_slow_to_accept_is_not_the_clients_fault() -> None:
    """Six sends 50 ms apart, each on a new connection, to a server whose accept queue overflows: some
    connections take 1 s or more to open (SYN retries). That is the server's side: the client's self-check
    does not say it fell behind, and its note says whose the delay was."""
    with _SlowAcceptServer() as url:
        result = bench(url, api="openai-chat", model="m", rate=[20.0], arrival="constant", requests=6,
                       input_tokens=4, output_tokens=16, tokenizer="none", idle_timeout_s=10)
    step = result.steps[0]
    connects = sorted(r.connect_ns / 1e6 for r in step.records)
    assert connects[-1] > 900, connects  # the kernel did drop SYNs: this test's premise
    assert step.summary.requests_completed == 6, step.summary.error_examples
    health = step.health
    assert not health.saturated, health.verdict
    assert "behind_schedule" not in health.problems and "late_sends" not in health.problems
    assert "slow to accept" in health.note and "server's side" in health.note, health.note
