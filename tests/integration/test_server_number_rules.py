"""A server's numbers held to each other and to the request; answers classified by what they are (issue 31).

Every server here is a raw-socket server written for these tests (`tests.http_servers.RawServer`,
`tests.hostile_servers`): it answers a well-formed stream whose counts break a cross-field rule (cached or
image tokens above the prompt, a prompt count no request of these bytes can make), or answers in a shape
that must be classified (a whole JSON body for a stream request, a large Messages ``error`` event, an
embeddings body with ``"error": false``). No real engine sends these on demand. Each runs through the
bench core.
"""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest

from tests.helpers import bench
from tests.hostile_servers import hostile, json_answer
from tests.http_servers import RawServer, running
from tests.integration.test_server_numbers import WORDS, _chat, _stream
from tokometer.benchmark.results import BenchResult
from tokometer.engines.identity import published


def _run(script: Any, api: str = "openai-chat", **values: Any) -> BenchResult:
    with running(RawServer(script, close_after=False)) as url:
        if api != "openai-chat":
            url = url.removesuffix("/v1")
        values = {"concurrency": [1], "requests": 2, "input_tokens": 4, "output_tokens": 16, **values}
        return bench(url, api=api, model="m", tokenizer="none", idle_timeout_s=5, **values)


def _usage(**fields: Any) -> dict[str, Any]:
    return {"prompt_tokens": 8, "completion_tokens": 4, **fields}


def test_cached_tokens_above_the_prompt_give_no_hit_rate() -> None:
    """cached_tokens 8,000 of a prompt of 8: not believed (a hit rate of 100,000 % before), noted."""
    step = _run(_stream(_chat(_usage(prompt_tokens_details={"cached_tokens": 8000})))).steps[0]
    assert step.summary.requests_completed == 2
    assert step.summary.prompt_cache_hit_rate is None
    assert step.summary.server_numbers_rejected == 2
    assert "cached_prompt_tokens=8000 (more than prompt_tokens 8" in step.summary.server_numbers_example
    believed = _run(_stream(_chat(_usage(prompt_tokens_details={"cached_tokens": 6})))).steps[0].summary
    assert believed.prompt_cache_hit_rate == pytest.approx(0.75) and believed.server_numbers_rejected == 0


def test_image_tokens_above_the_prompt_are_unknown() -> None:
    step = _run(_stream(_chat(_usage(prompt_tokens_details={"image_tokens": 500})))).steps[0]
    assert all(r.image_tokens is None for r in step.records)
    assert "image_tokens=500 (more than prompt_tokens 8" in step.summary.server_numbers_example


def test_a_prompt_count_no_request_of_these_bytes_can_make() -> None:
    """99,999,999 prompt tokens (just under the absolute cap) for a 4-token prompt: set aside, named with the
    bound the request's bytes give; the cached count is then held to the request alone."""
    usage = _usage(prompt_tokens=99_999_999, prompt_tokens_details={"cached_tokens": 3})
    step = _run(_stream(_chat(usage))).steps[0]
    summary = step.summary
    assert summary.requests_completed == 2
    assert all(r.input_tokens != 99_999_999 and r.input_tokens_source != "usage" for r in step.records)
    assert "prompt_tokens=99999999 (more than the request's prompt" in summary.server_numbers_example
    assert summary.input_tokens_total < 100_000


def test_llamacpp_cache_above_its_prompt() -> None:
    """llama.cpp's native API: cache_n 900 of tokens_evaluated 8: the cache count is set aside."""
    events = [b'data: {"content": "%s", "stop": false}\n\n' % w.encode() for w in WORDS]
    events.append(b'data: {"content": "", "stop": true, "stop_type": "eos", "tokens_predicted": 4, '
                  b'"tokens_evaluated": 8, "timings": {"prompt_n": 2, "prompt_ms": 1.5, "cache_n": 900, '
                  b'"predicted_n": 4, "predicted_ms": 20.5}}\n\n')
    step = _run(_stream(events), api="llamacpp").steps[0]
    assert step.summary.requests_completed == 2 and step.summary.prompt_cache_hit_rate is None
    assert all(r.server is None or r.server.cached_tokens is None for r in step.records)
    assert "cached_prompt_tokens=900" in step.summary.server_numbers_example


def _embeddings(usage: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"data": [{"index": 0, "embedding": [0.1, 0.2]}], "usage": usage, **extra}


def test_embeddings_usage_just_under_the_cap_and_an_error_false() -> None:
    """Embeddings: prompt_tokens 99,999,999 for a 4-token input is set aside; ``"error": false`` beside the
    data is no error (it failed the run before); ``"error": {...}`` is one."""
    answer = _embeddings({"prompt_tokens": 99_999_999}, error=False)
    with hostile({"/v1/embeddings": json_answer(answer)}) as server:
        result = bench(server.url, api="openai-embeddings", model="m", concurrency=[1], requests=2,
                       input_tokens=4, tokenizer="none")
    summary = result.steps[0].summary
    assert summary.requests_completed == 2 and summary.errors == {}, summary.error_examples
    assert "prompt_tokens=99999999" in summary.server_numbers_example
    failed = _embeddings({"prompt_tokens": 4}, error={"message": "overloaded", "type": "server_error"})
    with hostile({"/v1/embeddings": json_answer(failed)}) as server:
        result = bench(server.url, api="openai-embeddings", model="m", concurrency=[1], requests=1,
                       input_tokens=4, tokenizer="none")
    assert result.steps[0].summary.errors == {"server_error_event": 1}


def _whole(body: dict[str, Any]) -> Any:
    data = json.dumps(body).encode()

    def script(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                     % (len(data), data))
    return script


def test_a_complete_json_answer_to_a_stream_request_is_named() -> None:
    """A chat.completion object (the server ignored ``stream``): a ``protocol`` failure saying so, not a
    ``reset``; a JSON error object in its place is the server's error."""
    answer = {"object": "chat.completion", "choices": [{"index": 0, "message": {"content": "alpha beta"},
                                                        "finish_reason": "stop"}], "usage": _usage()}
    summary = _run(_whole(answer)).steps[0].summary
    assert summary.errors == {"protocol": 2}, summary.errors
    assert 'ignored "stream": true' in summary.error_examples["protocol"]
    summary = _run(_whole({"error": {"message": "no capacity", "type": "overloaded"}})).steps[0].summary
    assert summary.errors == {"server_error_event": 2}, summary.errors
    assert "overloaded: no capacity" in summary.error_examples["server_error_event"]
    native = _run(_whole({"content": "alpha", "stop": True, "tokens_predicted": 1}), api="llamacpp")
    assert native.steps[0].summary.errors == {"protocol": 2}


def _named(name: str, data: dict[str, Any]) -> bytes:
    return b"event: %s\ndata: %s\n\n" % (name.encode(), json.dumps(data).encode())


@pytest.mark.parametrize("first", [True, False])
@pytest.mark.parametrize("size", [100, 900 * 1024])
def test_a_messages_error_event_of_any_size_fails_the_request(first: bool, size: int) -> None:
    start = _named("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 3}}})
    delta = _named("content_block_delta", {"type": "content_block_delta", "index": 0,
                                           "delta": {"type": "text_delta", "text": "hi"}})
    error = _named("error", {"type": "error", "error": {"type": "overloaded_error", "message": "x" * size}})
    events = [error] if first else [start, delta, error]
    summary = _run(_stream(events), api="anthropic-messages").steps[0].summary
    assert summary.errors == {"server_error_event": 2}, summary.errors
    assert "overloaded_error: xxx" in summary.error_examples["server_error_event"]
    assert len(summary.error_examples["server_error_event"]) < 1000


def test_a_run_keeps_the_identity_serve_published_for_its_port(tmp_path: Any, monkeypatch: Any) -> None:
    """A benchmark of a loopback port a running `tokometer serve` published keeps that engine's identity in the
    run (estimate --run reads the model and its formats there)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    identity = {"engine": "vllm", "model_file": "gemma-3-270m", "device": "cpu", "dtype": "bfloat16"}
    with running(RawServer(_stream(_chat(_usage())), close_after=False)) as url, published(url, identity):
        result = bench(url, api="openai-chat", model="m", concurrency=[1], requests=1, input_tokens=4,
                       output_tokens=16, tokenizer="none")
    stored = result.run.engine
    assert stored is not None and stored.to_json() == identity and stored.facts == identity
