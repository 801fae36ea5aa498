"""Protocol adapters: request bodies, and parsing of real engines' event shapes."""

from __future__ import annotations

import pytest

from tokometer.client.assemble import assemble
from tokometer.prompt import Message, Prompt
from tokometer.protocols.common.base import GenerationParams, map_finish_reason
from tokometer.protocols.registry import PROTOCOLS, create_client, default_api_for_url
from tokometer.records import RequestRecord, classify_http_error
from tokometer.util.errors import ConfigError

PARAMS = GenerationParams(model="m", max_tokens=16, seed=3)


def test_registry_and_defaults() -> None:
    assert set(PROTOCOLS) == {"openai-chat", "openai-completions", "openai-responses", "anthropic-messages", "ollama",
                             "tgi", "llamacpp", "openai-embeddings", "rerank"}
    with pytest.raises(ConfigError, match="unknown API 'grpc'"):
        create_client("grpc")
    assert default_api_for_url("http://h:8000/v1") == "openai-chat"
    assert default_api_for_url("http://localhost:11434") == "ollama"
    assert default_api_for_url("https://api.anthropic.com/v1") == "anthropic-messages"


def test_request_bodies() -> None:
    prompt = Prompt.from_messages((Message("system", "be brief"), Message("user", "hi")))
    chat = create_client("openai-chat").build(prompt, PARAMS)
    assert chat.path == "/chat/completions"
    assert chat.body["messages"][0] == {"role": "system", "content": "be brief"}
    assert chat.body["stream"] is True and chat.body["stream_options"] == {"include_usage": True}
    assert "ignore_eos" not in chat.body
    eos = create_client("openai-completions").build(prompt, GenerationParams(max_tokens=8, ignore_eos=True))
    assert eos.body["ignore_eos"] is True and eos.body["min_tokens"] == 8 and eos.body["prompt"] == prompt.text
    assert create_client("ollama").build(prompt, PARAMS).body["options"] == {"num_predict": 16, "temperature": 0.0,
                                                                              "seed": 3}
    tgi = create_client("tgi").build(Prompt.from_text("x", max_tokens=5), PARAMS)
    assert tgi.path == "/generate_stream" and tgi.body["parameters"]["max_new_tokens"] == 5
    llama = create_client("llamacpp").build(Prompt.from_text("x"), PARAMS)
    assert llama.body["n_predict"] == 16 and llama.body["return_tokens"] is True


def _assemble(api: str, chunks: list[bytes]) -> RequestRecord:
    record = RequestRecord(index=0, sent_ns=1, status=200, end_ns=100)
    assemble(record, create_client(api), chunks, list(range(10, 10 + len(chunks))))
    return record


def test_vllm_chat_stream_with_role_event_and_usage() -> None:
    chunks = [
        b'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant",'
        b'"content":""},"logprobs":null,"finish_reason":null}]}\n\n',
        b'data: {"id":"c","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}\n\n',
        b'data: {"id":"c","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"length"}]}\n\n',
        b'data: {"id":"c","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9}}\n\n'
        b"data: [DONE]\n\n",
    ]
    r = _assemble("openai-chat", chunks)
    assert r.error is None
    assert r.first_token_ns == 11 and r.last_token_ns == 12  # the role-only event does not count
    assert r.output_text == "Hello"
    assert (r.output_tokens, r.output_tokens_source) == (2, "usage")
    assert (r.input_tokens, r.input_tokens_source) == (7, "usage")
    assert r.finish_reason == "length"


def test_reasoning_content_counts_as_content() -> None:
    chunks = [b'data: {"choices":[{"delta":{"reasoning_content":"think"}}]}\n\n',
              b'data: {"choices":[{"delta":{"content":"ok"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n']
    r = _assemble("openai-chat", chunks)
    assert r.first_token_ns == 10 and r.output_tokens == 2 and r.output_tokens_source == "estimate"


def test_llamacpp_native_final_event() -> None:
    chunks = [
        b'data: {"index":0,"content":" a","tokens":[5],"stop":false,"id_slot":0,"tokens_predicted":1}\n\n',
        b'data: {"index":0,"content":"","tokens":[6,7],"stop":false,"tokens_predicted":3}\n\n',
        b'data: {"index":0,"content":"","tokens":[],"stop":true,"tokens_predicted":3,"tokens_evaluated":12,'
        b'"stop_type":"limit","timings":{"cache_n":0,"prompt_n":12,"prompt_ms":40.5,"predicted_n":3,'
        b'"predicted_ms":30.0}}\n\n',
    ]
    r = _assemble("llamacpp", chunks)
    assert r.event_tokens == [1.0, 2.0]  # a multi-byte character held back one token
    assert (r.output_tokens, r.output_tokens_source) == (3, "native")
    assert (r.input_tokens, r.input_tokens_source) == (12, "native")
    assert r.finish_reason == "length"
    assert r.server is not None and r.server.prompt_ms == 40.5 and r.server.decode_tok_s == pytest.approx(100.0)


def test_ollama_ndjson_final_counters() -> None:
    chunks = [
        b'{"model":"m","message":{"role":"assistant","content":"Hi"},"done":false}\n',
        b'{"model":"m","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop",'
        b'"total_duration":5000000000,"prompt_eval_count":26,"prompt_eval_duration":130000000,'
        b'"eval_count":259,"eval_duration":4200000000}\n',
    ]
    r = _assemble("ollama", chunks)
    assert (r.output_tokens, r.output_tokens_source) == (259, "native")
    assert r.input_tokens == 26 and r.finish_reason == "stop"
    assert r.server is not None and r.server.prompt_ms == 130.0 and r.server.decode_ms == 4200.0


def test_tgi_special_token_and_details() -> None:
    chunks = [
        b'data:{"index":1,"token":{"id":5,"text":"Hi","logprob":-0.1,"special":false},"generated_text":null,'
        b'"details":null}\n\n',
        b'data:{"index":2,"token":{"id":2,"text":"</s>","logprob":-0.2,"special":true},"generated_text":"Hi",'
        b'"details":{"finish_reason":"eos_token","generated_tokens":2,"seed":null}}\n\n',
    ]
    r = _assemble("tgi", chunks)
    assert r.output_text == "Hi" and r.output_tokens == 2 and r.finish_reason == "stop"
    assert r.event_tokens == [1.0, 1.0]


@pytest.mark.parametrize(
    ("chunks", "error"),
    [
        ([b'data: {"choices":[{"delta":{"content":"a"}}]}\n\n', b"data: {oops\n\n"], "malformed_stream"),
        ([b'data: {"error":{"message":"engine died","code":500}}\n\n'], "server_error_event"),
        ([b'data: {"choices":[{"delta":{"content":"a"}}]}\n\n'], "reset"),  # no final event
    ],
)
def test_broken_streams_are_classified(chunks: list[bytes], error: str) -> None:
    assert _assemble("openai-chat", chunks).error == error


def test_http_error_classification() -> None:
    assert classify_http_error(400, "This model's maximum context length is 4096 tokens") \
        == "http_400_context_length"
    assert classify_http_error(400, '{"error":{"type":"exceed_context_size_error"}}') == "http_400_context_length"
    assert classify_http_error(400, "bad temperature") == "http_400"
    assert classify_http_error(401, "") == "http_401"
    assert classify_http_error(429, "") == "http_429"
    assert classify_http_error(503, "") == "http_5xx"
    assert classify_http_error(418, "") == "http_4xx"
    assert map_finish_reason("eos_token") == "stop" and map_finish_reason("limit") == "length"
    assert map_finish_reason(None) is None and map_finish_reason("weird") == "unknown"


def test_cached_prompt_tokens_are_read_where_the_server_says() -> None:
    from tokometer.protocols.llamacpp.client import LlamaCpp
    from tokometer.protocols.openai.client import OpenAIChat

    usage = (b'{"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":4,'
             b'"prompt_tokens_details":{"cached_tokens":64}}}')
    parsed = OpenAIChat().parse(usage)
    assert parsed is not None and (parsed.prompt_tokens, parsed.cached_prompt_tokens) == (100, 64)
    final = (b'{"content":"","stop":true,"tokens_predicted":4,"tokens_evaluated":100,'
             b'"timings":{"prompt_n":36,"cache_n":64,"prompt_ms":10.0,"predicted_n":4,"predicted_ms":8.0}}')
    native = LlamaCpp().parse(final)
    assert native is not None and (native.server_prompt_n, native.cached_prompt_tokens) == (36, 64)


def test_the_answer_length_of_a_request() -> None:
    """A dataset's reference length yields to --ignore-eos (every answer --output-tokens long); a trace's
    exact length does not; requested_output_tokens is what was sent."""
    from dataclasses import replace

    from tokometer.prompt import Prompt
    from tokometer.protocols.common.base import GenerationParams, answer_length

    reference = Prompt.from_text("hi", max_tokens=7)
    exact = replace(reference, exact_length=True)
    plain, fixed = GenerationParams(model="m", max_tokens=32), GenerationParams(model="m", max_tokens=32,
                                                                              ignore_eos=True)
    assert (answer_length(reference, plain), answer_length(reference, fixed)) == (7, 32)
    assert (answer_length(exact, plain), answer_length(exact, fixed)) == (7, 7)
    assert answer_length(Prompt.from_text("hi"), fixed) == 32
