"""Generated usage blocks through every protocol's parser and the stream assembly: the rules of a server's
numbers hold whatever the server says (issue 31, deliverable 5).

Each field of a usage block (prompt, output, cached, image and reasoning tokens) is drawn on its own: missing,
null, negative, small (often above its partner), huge (up to twice the absolute cap), a float, a string, a
boolean (non-finite floats are not JSON: `tests/fuzz/test_protocols.py` sends those). The stream is one
protocol's, whole (content events, then its counters), and the request is drawn a size in bytes. Whatever is
drawn, the record and its step summary hold to the rules (`tokometer.client.plausible.NUMBER_RULES`): no prompt
count beyond what the request's bytes can make, no cache hit rate above 100 %, cached and image tokens within
the prompt, reasoning within the output, and a number that broke a rule is noted on the record.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tokometer.client.assemble import StreamAssembly
from tokometer.client.plausible import prompt_bound
from tokometer.metrics.summary import summarize
from tokometer.protocols.common.framing import iter_payloads
from tokometer.protocols.common.numbers import MAX_COUNT
from tokometer.protocols.registry import create_client
from tokometer.records import RequestRecord

MISSING = object()
"""A field left out of the usage block."""

FIELDS = ("prompt", "completion", "cached", "image", "reasoning")
WORDS = ("alpha", " beta", " gamma")

values = st.one_of(st.just(MISSING), st.none(), st.integers(-50, -1), st.integers(0, 400),
                   st.integers(10**6, 2 * MAX_COUNT), st.floats(allow_nan=False, allow_infinity=False),
                   st.integers(0, 400).map(float),
                   st.text(max_size=4), st.booleans())


def _valid(value: Any) -> bool:
    """What `tokometer.protocols.common.numbers.count` takes as a count."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        return False
    return 0 <= value <= MAX_COUNT


def _put(target: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    if value is not MISSING:
        target[key] = value
    return target


def _sse(*bodies: dict[str, Any], named: bool = False) -> list[bytes]:
    if named:
        return [b"event: %s\ndata: %s\n\n" % (str(b["type"]).encode(), json.dumps(b).encode()) for b in bodies]
    return [b"data: " + json.dumps(b).encode() + b"\n\n" for b in bodies]


def _openai_usage(u: dict[str, Any]) -> dict[str, Any]:
    usage = _put(_put({}, "prompt_tokens", u["prompt"]), "completion_tokens", u["completion"])
    usage["prompt_tokens_details"] = _put(_put({}, "cached_tokens", u["cached"]), "image_tokens", u["image"])
    usage["completion_tokens_details"] = _put({}, "reasoning_tokens", u["reasoning"])
    return usage


def _chat(u: dict[str, Any]) -> list[bytes]:
    deltas = [{"choices": [{"index": 0, "delta": {"content": w}}]} for w in WORDS]
    return [*_sse(*deltas, {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                  {"choices": [], "usage": _openai_usage(u)}), b"data: [DONE]\n\n"]


def _completions(u: dict[str, Any]) -> list[bytes]:
    texts = [{"choices": [{"index": 0, "text": w}]} for w in WORDS]
    final = {"choices": [{"index": 0, "text": "", "finish_reason": "stop"}], "usage": _openai_usage(u)}
    return [*_sse(*texts, final), b"data: [DONE]\n\n"]


def _responses(u: dict[str, Any]) -> list[bytes]:
    usage = _put(_put({}, "input_tokens", u["prompt"]), "output_tokens", u["completion"])
    usage["input_tokens_details"] = _put({}, "cached_tokens", u["cached"])
    usage["output_tokens_details"] = _put({}, "reasoning_tokens", u["reasoning"])
    deltas = [{"type": "response.output_text.delta", "delta": w} for w in WORDS]
    return _sse(*deltas, {"type": "response.completed", "response": {"status": "completed", "usage": usage}},
                named=True)


def _messages(u: dict[str, Any]) -> list[bytes]:
    start = _put(_put({}, "input_tokens", u["prompt"]), "cache_read_input_tokens", u["cached"])
    deltas = [{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": w}} for w in WORDS]
    return _sse({"type": "message_start", "message": {"usage": start}}, *deltas,
                {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                 "usage": _put({}, "output_tokens", u["completion"])}, {"type": "message_stop"}, named=True)


def _ollama(u: dict[str, Any]) -> list[bytes]:
    lines = [{"message": {"content": w}, "done": False} for w in WORDS]
    final = _put(_put({"message": {"content": ""}, "done": True}, "prompt_eval_count", u["prompt"]), "eval_count",
                 u["completion"])
    return [json.dumps(b).encode() + b"\n" for b in (*lines, final)]


def _tgi(u: dict[str, Any]) -> list[bytes]:
    tokens = [{"token": {"id": i, "text": w, "special": False}} for i, w in enumerate(WORDS)]
    details = _put(_put({"finish_reason": "eos_token"}, "input_length", u["prompt"]), "generated_tokens",
                   u["completion"])
    return _sse(*tokens, {"token": {"id": 9, "text": "", "special": True}, "details": details})


def _llamacpp(u: dict[str, Any]) -> list[bytes]:
    events = [{"content": w, "stop": False} for w in WORDS]
    final = _put(_put({"content": "", "stop": True, "stop_type": "eos"}, "tokens_evaluated", u["prompt"]),
                 "tokens_predicted", u["completion"])
    final["timings"] = _put({"prompt_ms": 1.0, "predicted_ms": 2.0}, "cache_n", u["cached"])
    return _sse(*events, final)


def _embeddings(u: dict[str, Any]) -> list[bytes]:
    body = {"data": [{"index": 0, "embedding": [0.5, 0.25]}], "usage": _put({}, "prompt_tokens", u["prompt"])}
    return [json.dumps(body).encode()]


STREAMS: dict[str, Callable[[dict[str, Any]], list[bytes]]] = {
    "openai-chat": _chat, "openai-completions": _completions, "openai-responses": _responses,
    "anthropic-messages": _messages, "ollama": _ollama, "tgi": _tgi, "llamacpp": _llamacpp,
    "openai-embeddings": _embeddings,
}
PROMPT_IS_TOTAL = ("openai-chat", "openai-completions", "openai-responses", "llamacpp")
"""Protocols whose prompt count holds the cached tokens (Messages adds them to its own input count)."""


def _assemble(api: str, usage: dict[str, Any], request_bytes: int, max_tokens: int) -> RequestRecord:
    client = create_client(api)
    chunks = STREAMS[api](usage)
    record = RequestRecord(index=0, sent_ns=1_000, first_byte_ns=2_000, status=200, end_ns=50_000_000,
                           request_bytes=request_bytes,
                           requested_output_tokens=max_tokens if client.streams else None,
                           inputs=None if client.streams else 1)
    assembly = StreamAssembly(record, client, len(chunks))
    for stamp, payload in iter_payloads(chunks, [3_000_000 + 1_000_000 * i for i in range(len(chunks))],
                                        client.framing):
        assembly.feed(stamp, payload)
    assembly.finish(None)
    return record


def _told(value: Any) -> bool:
    return value is not MISSING and _valid(value)


@given(st.sampled_from(sorted(STREAMS)), st.fixed_dictionaries({name: values for name in FIELDS}),
       st.integers(40, 4000), st.integers(1, 512))
def test_the_rules_hold_whatever_the_usage(api: str, usage: dict[str, Any], request_bytes: int,
                                           max_tokens: int) -> None:
    record = _assemble(api, usage, request_bytes, max_tokens)
    assert record.error is None, record.error_detail
    bound = prompt_bound(request_bytes)
    server_prompt = record.input_tokens if record.input_tokens_source in ("usage", "native") else None
    if server_prompt is not None:
        assert server_prompt <= bound
    cached = record.server.cached_tokens if record.server is not None else None
    if cached is not None:
        assert cached <= bound and (server_prompt is None or cached <= server_prompt)
    if record.image_tokens is not None:
        assert record.image_tokens <= bound and (server_prompt is None or record.image_tokens <= server_prompt)
    if record.reasoning_tokens is not None and record.output_tokens is not None:
        assert record.reasoning_tokens <= record.output_tokens
    rate = summarize([record]).prompt_cache_hit_rate
    assert rate is None or 0.0 <= rate <= 1.0
    _noted(api, usage, bound, record)


def _noted(api: str, usage: dict[str, Any], bound: int, record: RequestRecord) -> None:
    """A well-formed number that broke a rule is named in ``rejected_numbers``."""
    notes = record.rejected_numbers or ""
    prompt = usage["prompt"] if _told(usage["prompt"]) else None
    if prompt is not None and prompt > bound:
        assert "prompt_tokens" in notes and "the request's prompt" in notes, notes
        prompt = None
    if api not in PROMPT_IS_TOTAL or prompt is None:
        return
    for name, field in (("cached", "cached_prompt_tokens"), ("image", "image_tokens")):
        value = usage[name]
        if _told(value) and value > prompt and (name == "cached" or api in ("openai-chat", "openai-completions")):
            assert f"{field}=" in notes, notes


error_values = st.one_of(st.none(), st.booleans(), st.integers(-2, 2), st.text(max_size=3),
                         st.dictionaries(st.sampled_from(["message", "type", "code"]), st.text(max_size=3) | st.none(),
                                         max_size=2),
                         st.lists(st.integers(0, 3), max_size=2))


@given(st.sampled_from(["openai-chat", "ollama", "tgi", "llamacpp", "openai-embeddings"]), error_values)
def test_an_error_field_is_read_by_its_shape(api: str, error: Any) -> None:
    """An ``error`` field beside an answer fails it exactly when its shape says so (`error_message`): ``false``,
    ``null``, ``0`` and empty values do not, whatever else the answer holds."""
    from tokometer.protocols.common.numbers import error_message

    usage = {name: MISSING for name in FIELDS}
    chunks = STREAMS[api](usage)
    first = json.loads(chunks[0].removeprefix(b"data: "))
    first["error"] = error
    chunks[0] = (b"" if api in ("ollama", "openai-embeddings") else b"data: ") + json.dumps(first).encode() \
        + (b"\n" if api == "ollama" else b"" if api == "openai-embeddings" else b"\n\n")
    client = create_client(api)
    record = RequestRecord(index=0, sent_ns=1_000, first_byte_ns=2_000, status=200, end_ns=50_000_000,
                           inputs=None if client.streams else 1)
    assembly = StreamAssembly(record, client, len(chunks))
    for stamp, payload in iter_payloads(chunks, [3_000_000 + i for i in range(len(chunks))], client.framing):
        assembly.feed(stamp, payload)
    assembly.finish(None)
    failed = error_message(error) is not None
    assert (record.error == "server_error_event") == failed, (record.error, record.error_detail)
    assert failed or record.error is None
