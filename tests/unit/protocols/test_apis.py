"""The OpenAI Responses and Anthropic Messages adapters: request bodies, and streams in the shapes the
two APIs document (and vLLM 0.32 sends), assembled into records as the bench does."""

from __future__ import annotations

import contextlib

import orjson
import pytest

from tokometer.client.assemble import assemble
from tokometer.prompt import Message, Prompt
from tokometer.protocols.anthropic_messages.client import ANTHROPIC_VERSION, DEFAULT_MAX_TOKENS
from tokometer.protocols.anthropic_messages.writer import error_type
from tokometer.protocols.common.base import GenerationParams
from tokometer.protocols.common.framing import iter_payloads
from tokometer.protocols.common.server import StreamTiming
from tokometer.protocols.registry import PROTOCOLS, create_client
from tokometer.records import RequestRecord
from tokometer.sim.servers import SERVERS, count_words

PARAMS = GenerationParams(model="m", max_tokens=16, seed=3)
PROMPT = Prompt.from_messages((Message("system", "be brief"), Message("user", "hi")))


def _event(kind: str, **fields: object) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps({"type": kind, **fields}) + b"\n\n"


def _assemble(api: str, chunks: list[bytes]) -> RequestRecord:
    record = RequestRecord(index=0, sent_ns=1, status=200, end_ns=100)
    assemble(record, create_client(api), chunks, list(range(10, 10 + len(chunks))))
    return record


def test_request_bodies_and_headers() -> None:
    responses = create_client("openai-responses")
    request = responses.build(PROMPT, PARAMS)
    assert request.path == "/responses"
    assert request.body["input"] == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    assert request.body["max_output_tokens"] == 16 and request.body["stream"] is True
    assert "max_tokens" not in request.body and "seed" not in request.body and "ignore_eos" not in request.body
    assert responses.auth_headers("k") == {"Authorization": "Bearer k"}
    anthropic = create_client("anthropic-messages")
    request = anthropic.build(PROMPT, GenerationParams(model="m", max_tokens=8, ignore_eos=True))
    assert request.path == "/messages"
    assert request.body["system"] == "be brief"  # a top-level field: the API has no system role in messages
    assert request.body["messages"] == [{"role": "user", "content": "hi"}]
    assert request.body["max_tokens"] == 8 and request.body["ignore_eos"] is True
    assert anthropic.build(PROMPT, GenerationParams(max_tokens=None)).body["max_tokens"] == DEFAULT_MAX_TOKENS
    assert anthropic.auth_headers("k") == {"x-api-key": "k"}
    assert anthropic.fixed_headers() == {"anthropic-version": ANTHROPIC_VERSION}


def test_the_sse_reader_takes_only_the_data_line_of_a_named_event() -> None:
    chunks = [b"event: ping\r\ndata: {\"type\": \"ping\"}\r\n\r\n", b"event: message_stop\ndata: {}\n\n"]
    assert [p for _, p in iter_payloads(chunks, [1, 2], "sse")] == [b'{"type": "ping"}', b"{}"]


def test_responses_stream_with_reasoning_and_usage() -> None:
    response: dict[str, object] = {"id": "resp_1", "object": "response", "status": "in_progress", "output": [],
                                   "usage": None}
    chunks = [
        _event("response.created", sequence_number=0, response=response)
        + _event("response.in_progress", sequence_number=1, response=response),
        _event("response.output_item.added", sequence_number=2, output_index=0,
               item={"id": "rs_1", "type": "reasoning", "summary": []}),
        _event("response.reasoning_text.delta", sequence_number=3, item_id="rs_1", output_index=0,
               content_index=0, delta="Let me"),
        _event("response.reasoning_summary_text.delta", sequence_number=4, item_id="rs_1", output_index=0,
               summary_index=0, delta=" think."),
        _event("response.output_text.delta", sequence_number=5, item_id="msg_1", output_index=1,
               content_index=0, delta="Hel", logprobs=[]),
        _event("response.output_text.delta", sequence_number=6, item_id="msg_1", output_index=1,
               content_index=0, delta="lo", logprobs=[]),
        _event("response.output_text.done", sequence_number=7, item_id="msg_1", text="Hello")
        + _event("response.completed", sequence_number=8, response={
            **response, "status": "completed", "usage": {
                "input_tokens": 7, "input_tokens_details": {"cached_tokens": 4}, "output_tokens": 5,
                "output_tokens_details": {"reasoning_tokens": 3}, "total_tokens": 12}}),
    ]
    r = _assemble("openai-responses", chunks)
    assert r.error is None
    assert r.first_token_ns == 12 and r.first_answer_ns == 14 and r.last_token_ns == 15
    assert r.output_text == "Hello" and r.reasoning_text == "Let me think."
    assert (r.output_tokens, r.output_tokens_source) == (5, "usage")
    assert (r.input_tokens, r.input_tokens_source) == (7, "usage")
    assert r.server is not None and r.server.cached_tokens == 4 and r.reasoning_tokens == 3
    assert r.finish_reason == "stop"


@pytest.mark.parametrize("final", ["response.incomplete", "response.completed"])  # OpenAI's, vLLM's
def test_responses_incomplete_at_max_output_tokens_is_a_length_finish(final: str) -> None:
    chunks = [_event("response.output_text.delta", delta="a"),
              _event(final, response={"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"},
                                      "usage": {"input_tokens": 2, "output_tokens": 1}})]
    r = _assemble("openai-responses", chunks)
    assert r.error is None and r.finish_reason == "length" and r.output_tokens == 1


@pytest.mark.parametrize(("event", "detail"), [
    (_event("response.failed", response={"status": "failed", "error": {"code": "server_error",
                                                                       "message": "The model crashed"}}),
     "server_error: The model crashed"),
    (_event("error", code="rate_limit_exceeded", message="Slow down", param=None, sequence_number=3),
     "rate_limit_exceeded: Slow down"),
])
def test_responses_failures_are_error_events(event: bytes, detail: str) -> None:
    r = _assemble("openai-responses", [_event("response.output_text.delta", delta="a"), event])
    assert r.error == "server_error_event" and detail in r.error_detail


def test_responses_stream_without_its_final_event_is_a_reset() -> None:
    r = _assemble("openai-responses", [_event("response.output_text.delta", delta="a")])
    assert r.error == "reset"


def _anthropic_start(usage: dict[str, int]) -> bytes:
    message: dict[str, object] = {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "m",
                                  "stop_reason": None, "stop_sequence": None, "usage": usage}
    return _event("message_start", message=message)


def test_anthropic_stream_with_ping_thinking_and_usage() -> None:
    chunks = [
        _anthropic_start({"input_tokens": 3, "cache_read_input_tokens": 5, "output_tokens": 1}),
        _event("ping"),
        _event("content_block_start", index=0, content_block={"type": "thinking", "thinking": "", "signature": ""}),
        _event("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": "Hmm,"}),
        _event("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": " yes."}),
        _event("content_block_delta", index=0, delta={"type": "signature_delta", "signature": "EqQB"})
        + _event("content_block_stop", index=0)
        + _event("content_block_start", index=1, content_block={"type": "text", "text": ""}),
        _event("content_block_delta", index=1, delta={"type": "text_delta", "text": "Hi"}),
        _event("ping"),
        _event("content_block_delta", index=1, delta={"type": "text_delta", "text": " there"}),
        _event("content_block_stop", index=1)
        + _event("message_delta", delta={"stop_reason": "max_tokens", "stop_sequence": None},
                 usage={"output_tokens": 6})
        + _event("message_stop"),
    ]
    r = _assemble("anthropic-messages", chunks)
    assert r.error is None
    assert r.first_token_ns == 13 and r.first_answer_ns == 16 and r.last_token_ns == 18
    assert r.output_text == "Hi there" and r.reasoning_text == "Hmm, yes."
    assert (r.output_tokens, r.output_tokens_source) == (6, "usage")  # message_start's placeholder 1 is not read
    assert (r.input_tokens, r.input_tokens_source) == (8, "usage")  # input_tokens + cache reads
    assert r.server is not None and r.server.cached_tokens == 5
    assert r.finish_reason == "length"


def test_anthropic_error_event_as_anthropic_sends_it() -> None:
    chunks = [_anthropic_start({"input_tokens": 3, "output_tokens": 1}),
              _event("content_block_delta", index=0, delta={"type": "text_delta", "text": "a"}),
              _event("error", error={"type": "overloaded_error", "message": "Overloaded"})]
    r = _assemble("anthropic-messages", chunks)
    assert r.error == "server_error_event" and "overloaded_error: Overloaded" in r.error_detail


def test_anthropic_message_delta_input_tokens_replace_the_start() -> None:
    """vLLM's message_delta repeats the usage with the input count; the last one stands."""
    chunks = [_anthropic_start({"input_tokens": 0, "output_tokens": 0}),
              _event("content_block_delta", index=0, delta={"type": "text_delta", "text": "a"}),
              _event("message_delta", delta={"stop_reason": "end_turn"}, usage={"input_tokens": 9, "output_tokens": 1})
              + _event("message_stop")]
    r = _assemble("anthropic-messages", chunks)
    assert (r.input_tokens, r.output_tokens, r.finish_reason) == (9, 1, "stop")


def test_anthropic_error_types_by_status() -> None:
    assert [error_type(s) for s in (400, 401, 403, 404, 413, 429, 500, 503, 529)] == [
        "invalid_request_error", "authentication_error", "permission_error", "not_found_error", "request_too_large",
        "rate_limit_error", "api_error", "api_error", "overloaded_error"]


@pytest.mark.parametrize(("path", "api"), [("/v1/responses", "openai-responses"),
                                           ("/v1/messages", "anthropic-messages")])
@pytest.mark.parametrize("reasoning", [0, 2, 5])
def test_simulator_streams_parse_back(path: str, api: str, reasoning: int) -> None:
    """What the simulator's server side writes, read by the client side: texts, counts, finish."""
    server, client = SERVERS[path], create_client(api)
    body = client.build(Prompt.from_text("one two three"), GenerationParams(model="m", max_tokens=5)).body
    info = server.read(body, "m", count_words)
    info.id, info.reasoning_tokens = "cmpl-sim-1", reasoning or None
    words = [" a", " b", " c", " d", " e"]
    chunks = []
    for i, word in enumerate(words[:-1]):
        text, thought = ("", word) if i < reasoning else (word, "")
        chunks.append(server.tokens(info, [i], text, i, thought))
    timing = StreamTiming(1.0, 1.0, 2.0)
    last = ("", words[-1]) if reasoning >= 5 else (words[-1], "")
    chunks.append(server.last_tokens(info, [4], last[0], 4, "length", timing, last[1]))
    r = _assemble(api, chunks)
    assert r.error is None
    assert r.reasoning_text == "".join(words[:reasoning]) and r.output_text == "".join(words[reasoning:])
    assert (r.output_tokens, r.input_tokens, r.finish_reason) == (5, 3, "length")
    assert r.reasoning_tokens == (reasoning or None) or (reasoning == 0 and r.reasoning_tokens in (None, 0))


def test_simulator_reads_refuse_malformed_requests() -> None:
    messages, responses = SERVERS["/v1/messages"], SERVERS["/v1/responses"]
    with pytest.raises(ValueError, match="max_tokens: Field required"):
        messages.read({"messages": [{"role": "user", "content": "x"}]}, "m", count_words)
    with pytest.raises(ValueError, match="role"):
        messages.read({"max_tokens": 1, "messages": [{"role": "system", "content": "x"}]}, "m", count_words)
    with pytest.raises(ValueError, match="'input'"):
        responses.read({"input": 5}, "m", count_words)
    assert responses.read({"input": "a b", "instructions": "c"}, "m", count_words).prompt_tokens == 3
    assert messages.error_body(429, "slow", "rate_limit_error") == {
        "type": "error", "error": {"type": "rate_limit_error", "message": "slow"}}


@pytest.mark.parametrize("api", sorted(PROTOCOLS))
@pytest.mark.parametrize("kind", [[], ["response.completed"], {"a": 1}, 7, None, True])
def test_an_event_whose_type_is_not_text_is_no_known_event_in_any_protocol(api: str, kind: object) -> None:
    """A server's event whose ``type`` (or ``object``) is a list or an object is not an event the client knows: read
    as nothing, or refused as a bad event (ValueError), never a TypeError from looking a list up in a set (the
    Responses client raised one for ``{"type": []}``)."""
    client = create_client(api)
    for payload in ({"type": kind}, {"object": kind, "type": kind, "choices": [{"delta": {"content": kind}}]},
                    {"type": kind, "delta": kind, "response": kind, "message": kind}):
        with contextlib.suppress(ValueError):
            client.parse(orjson.dumps(payload))
