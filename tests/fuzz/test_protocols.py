"""Fuzzing the wire readers: every protocol's event parser, the usage and timings readers, the SSE/NDJSON
splitter, the media-type check, and a whole stream through the assembly into the metrics.

Documented behaviour under any input: `ProtocolClient.parse` returns a `ParsedEvent` (or None) or raises
``ValueError``; every count it yields is a whole number from 0 to `MAX_COUNT`, every duration a finite
number from 0 to `MAX_DURATION_MS`, every text a string. The assembly never raises, and the metrics of the
record it fills are finite and not negative.
"""

from __future__ import annotations

import itertools
import json
import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.strategies import json_values, numbers, texts
from tokometer.client.assemble import StreamAssembly
from tokometer.client.plausible import length_margin
from tokometer.metrics import request as m
from tokometer.metrics.summary import summarize
from tokometer.protocols.common.base import ParsedEvent
from tokometer.protocols.common.framing import EventSplitter, EventWatch, iter_payloads
from tokometer.protocols.common.mediatype import not_an_api_answer
from tokometer.protocols.common.numbers import MAX_COUNT, MAX_DURATION_MS
from tokometer.protocols.llamacpp.timings import read_llamacpp_timings
from tokometer.protocols.openai.client import read_usage
from tokometer.protocols.registry import create_client
from tokometer.records import RequestRecord

APIS = ["openai-chat", "openai-completions", "ollama", "tgi", "llamacpp"]
COUNTS = ("tokens", "prompt_tokens", "completion_tokens", "completion_tokens_native", "prompt_tokens_native",
          "server_prompt_n", "server_decode_n", "cached_prompt_tokens", "reasoning_tokens")
DURATIONS = ("server_prompt_ms", "server_decode_ms", "server_total_ms")


def _sound(event: ParsedEvent | None) -> None:
    if event is None:
        return
    assert isinstance(event.text, str) and isinstance(event.reasoning, str)
    assert event.error is None or isinstance(event.error, str)
    for name in COUNTS:
        value = getattr(event, name)
        assert value is None or (type(value) is int and 0 <= value <= MAX_COUNT), (name, value)
    for name in DURATIONS:
        value = getattr(event, name)
        assert value is None or (isinstance(value, float) and math.isfinite(value)
                                 and 0 <= value <= MAX_DURATION_MS), (name, value)


def _parse(api: str, payload: bytes) -> ParsedEvent | None:
    try:
        event = create_client(api).parse(payload)
    except ValueError:  # the documented failure: the assembly records a malformed stream
        return None
    _sound(event)
    return event


usage = st.fixed_dictionaries({}, optional={
    "prompt_tokens": numbers, "completion_tokens": numbers, "total_tokens": numbers,
    "completion_tokens_details": st.fixed_dictionaries({}, optional={"reasoning_tokens": numbers}) | json_values,
    "prompt_tokens_details": st.fixed_dictionaries({}, optional={"cached_tokens": numbers}) | json_values})
timings = st.fixed_dictionaries({}, optional={
    key: numbers for key in ("prompt_n", "prompt_ms", "predicted_n", "predicted_ms", "cache_n")})
delta = st.fixed_dictionaries({}, optional={"content": texts | json_values, "reasoning_content": texts | json_values,
                                            "reasoning": texts | json_values, "role": json_values})
choice = st.fixed_dictionaries({}, optional={"delta": delta | json_values, "text": texts | json_values,
                                             "finish_reason": st.sampled_from(["stop", "length", None, 3, "x"])})
events = st.fixed_dictionaries({}, optional={
    "choices": st.lists(choice | json_values, max_size=2) | json_values, "usage": usage | json_values,
    "timings": timings | json_values, "error": json_values,
    # the native protocols' fields
    "content": texts | json_values, "tokens": st.lists(st.integers(0, 9), max_size=3) | json_values,
    "stop": st.booleans(), "stop_type": json_values, "tokens_predicted": numbers, "tokens_evaluated": numbers,
    "token": st.fixed_dictionaries({"text": texts | json_values, "special": st.booleans()}) | json_values,
    "details": st.fixed_dictionaries({}, optional={"generated_tokens": numbers, "input_length": numbers,
                                                   "finish_reason": json_values}) | json_values,
    "generated_text": json_values, "message": st.fixed_dictionaries({}, optional={
        "content": texts | json_values, "thinking": texts | json_values}) | json_values,
    "done": st.booleans(), "done_reason": json_values, "eval_count": numbers, "eval_duration": numbers,
    "prompt_eval_count": numbers, "prompt_eval_duration": numbers, "total_duration": numbers})


@given(st.sampled_from(APIS), st.binary(max_size=200))
def test_any_bytes(api: str, payload: bytes) -> None:
    _parse(api, payload)


@given(st.sampled_from(APIS), events)
def test_events_of_the_right_shape_with_any_values(api: str, event: dict[str, Any]) -> None:
    _parse(api, json.dumps(event).encode())


@given(usage)
def test_usage_reader(value: dict[str, Any]) -> None:
    event = ParsedEvent()
    read_usage(value, event)
    _sound(event)


@given(timings)
def test_llamacpp_timings_reader(value: dict[str, Any]) -> None:
    event = ParsedEvent()
    read_llamacpp_timings(value, event)
    _sound(event)


@given(st.sampled_from(["sse", "ndjson"]), st.lists(st.binary(max_size=60), max_size=8))
def test_framing_splits_anything(framing: Any, chunks: list[bytes]) -> None:
    stamps = list(range(1, len(chunks) + 1))
    for stamp, payload in iter_payloads(chunks, stamps, framing):
        assert stamp in stamps and isinstance(payload, bytes)


_SSE_PIECES = st.sampled_from([b"data: {}", b"data: x", b": keep-alive", b"\n", b"\n\n", b"\r\n", b"\r\n\r\n",
                               b"\n\n\n", b"event: e", b"x"])


@given(st.lists(_SSE_PIECES, max_size=24), st.lists(st.integers(0, 200), max_size=8))
def test_event_watch_counts_what_the_splitter_finds(pieces: list[bytes], cuts: list[int]) -> None:
    """The watch (bytes as they arrive, keeping none) and the splitter (the kept bytes, afterwards) agree
    on the events of a stream however it is cut into chunks: its one-event fast path included."""
    data = b"".join(pieces)
    bounds = sorted({0, len(data), *(c for c in cuts if c < len(data))})
    by_cuts = [data[a:b] for a, b in itertools.pairwise(bounds)]
    by_lflf = [part + b"\n\n" for part in data.split(b"\n\n")]  # whole events as chunks, as servers write them
    for chunks in (by_cuts, by_lflf):
        watch = EventWatch("sse")
        for chunk in chunks:
            assert watch.feed(chunk) is None
        splitter = EventSplitter("sse")
        frames = [frame for chunk in chunks for frame in splitter.feed(chunk)]
        comments = sum(1 for frame in frames if frame.startswith(b":") and b"data:" not in frame)
        assert (watch.events, watch.comments) == (len(frames) - comments, comments), chunks
        assert watch.open_bytes == splitter.open_bytes


@given(st.dictionaries(st.sampled_from(["content-type", "x"]), st.text(max_size=30)),
       st.lists(st.binary(max_size=80), max_size=3))
def test_media_type_check(headers: dict[str, str], chunks: list[bytes]) -> None:
    why = not_an_api_answer(headers, chunks)
    assert why is None or why.startswith("not an API answer")


def _stream(api: str, bodies: list[dict[str, Any]]) -> list[bytes]:
    if api == "ollama":
        return [json.dumps(b).encode() + b"\n" for b in bodies]
    return [b"data: " + json.dumps(b).encode() + b"\n\n" for b in bodies] + [b"data: [DONE]\n\n"]


@given(st.sampled_from(APIS), st.lists(events, min_size=0, max_size=6), st.none() | st.integers(1, 4096),
       st.booleans())
def test_a_whole_stream_into_the_metrics(api: str, bodies: list[dict[str, Any]], max_tokens: int | None,
                                         tokenizer: bool) -> None:
    """Any stream: the record it makes has counts within bounds and metrics that are finite, never negative."""
    chunks = _stream(api, bodies)
    record = RequestRecord(index=0, sent_ns=1_000, first_byte_ns=2_000, status=200,
                           end_ns=10_000_000 + 1_000_000 * len(chunks), requested_output_tokens=max_tokens)
    assembly = StreamAssembly(record, create_client(api), len(chunks))
    for stamp, payload in iter_payloads(chunks, [3_000_000 + 1_000_000 * i for i in range(len(chunks))],
                                        create_client(api).framing):
        assembly.feed(stamp, payload)
    assembly.finish((lambda text: len(text.split())) if tokenizer else None)
    for name in ("output_tokens", "input_tokens", "reasoning_tokens", "hidden_tokens"):
        value = getattr(record, name)
        assert value is None or (type(value) is int and 0 <= value <= MAX_COUNT + 10 ** 6), (name, value)
    if record.output_tokens_source == "usage" and max_tokens is not None and record.output_tokens is not None:
        assert record.output_tokens <= max_tokens + length_margin(max_tokens)
    assert all(math.isfinite(t) and t >= 0 for t in record.event_tokens)
    for metric in (m.ttft_ns, m.tpot_ns, m.decode_speed_tok_s, m.e2e_speed_tok_s, m.answer_decode_speed_tok_s,
                   m.ttfat_ns, m.prefill_speed_tok_s):
        value = metric(record)
        assert value is None or (math.isfinite(value) and value >= 0), (metric.__name__, value)
    assert all(math.isfinite(v) and v >= 0 for v in m.itl_ns(record))
    summary = summarize([record])
    assert math.isfinite(summary.output_throughput_tok_s) and summary.output_throughput_tok_s >= 0
    summary.to_json()


METRIC_NAMES = ["vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:gpu_cache_usage_perc",
                "vllm:prompt_tokens_total", "vllm:generation_tokens_total", "llamacpp:requests_processing",
                "sglang:num_running_reqs", "tgi_queue_size", "x_other",
                'vllm:e2e_request_latency_seconds_bucket{le="1"}', 'vllm:e2e_request_latency_seconds_bucket{le="+Inf"}',
                "vllm:e2e_request_latency_seconds_count", "vllm:e2e_request_latency_seconds_sum"]
metric_values = st.floats() | st.integers(-(2**70), 2**70) | st.sampled_from(["NaN", "+Inf", "-Inf", "x", "1e400"])


@given(st.lists(st.tuples(st.sampled_from(METRIC_NAMES), metric_values), max_size=8), st.binary(max_size=40))
def test_metrics_page_values(lines: list[tuple[str, Any]], junk: bytes) -> None:
    """A ``/metrics`` page with any values (NaN, infinities, negatives, huge): a Snapshot whose normalised
    gauges, counters and histograms are finite and not negative, or the documented ValueError."""
    from tokometer.observe.prometheus import parse

    text = "".join(f"{name} {value}\n" for name, value in lines) + junk.decode("utf-8", "replace")
    try:
        snapshot = parse(text, 0)
    except ValueError:
        return
    histograms = [v for h in snapshot.histograms.values() for v in (h.count, h.sum, *(n for _, n in h.buckets))]
    for value in [*snapshot.gauges.values(), *snapshot.counters.values(), *histograms]:
        assert math.isfinite(value) and value >= 0, snapshot
