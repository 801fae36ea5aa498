"""Turn a finished stream's stamped bytes into the fields of a `RequestRecord`.

Runs after the last byte arrived, and in small slices (`BackgroundAssembler`),
so parsing never sits between a byte's arrival and its timestamp.
Token counts follow the order of trust in docs/reference/metrics.md: server usage, the
engine's native counters, the model's tokenizer, and last a count of content
events (an estimate, labelled so). A server's count that is not believable for the stream it came with
(`tokometer.client.plausible`) is set aside for the next source, and the record says so
(``rejected_numbers``). Reasoning (a field of its own, or inline ``<think>``
sections: `tokometer.protocols.common.reasoning`) is split from the answer here too: when the answer
began, and how many of the output tokens were reasoning.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from tokometer.client.plausible import NUMBER_RULES, judge_numbers, length_margin, output_count_problem, prompt_bound
from tokometer.client.toolsplit import tool_calls
from tokometer.protocols.common.base import ParsedEvent, ProtocolClient
from tokometer.protocols.common.framing import iter_payloads
from tokometer.protocols.common.reasoning import EventSplit, split_inline
from tokometer.records import RequestRecord, ServerTiming, TokenSource

__all__ = ["BackgroundAssembler", "StreamAssembly", "assemble"]


_JUDGED = tuple(dict.fromkeys(name for rule in NUMBER_RULES for name in (rule.field, rule.bound)
                               if name in ParsedEvent.__dataclass_fields__))
"""The counters `NUMBER_RULES` names."""

_SLICE_EVENTS = 16
"""Events parsed between yields to the event loop (about 50-100 us of work)."""


class StreamAssembly:
    """Accumulates the parsed events of one stream, then writes the record.

    The bench feeds it payloads after a stream has ended (`feed`); the gateway, which parses each
    event anyway to decide what to relay, hands it the parsed events as they pass (`add`), one
    segment after another when it continues an answer cut at ``max_tokens`` (`end_segment`).
    """

    def __init__(self, record: RequestRecord, backend: ProtocolClient, n_chunks: int = 0) -> None:
        self.record = record
        self.backend = backend
        self.n_chunks = n_chunks
        self.content: list[tuple[int, ParsedEvent]] = []
        self.final = ParsedEvent()
        self.saw_done = False
        self.texts: list[str] = []
        self.earlier_output_tokens = 0
        """Output tokens of the segments before this one (continuation)."""
        self.earlier_reasoning_tokens = 0
        """Reasoning tokens the server counted in the segments before this one."""
        self._segment_start = 0
        self.payloads = 0
        """Events fed (`feed`), parseable or not."""
        record.chunk_count = n_chunks

    def feed(self, stamp: int, payload: bytes) -> None:
        """Parse one event's payload and `add` it; an unparseable one marks the record malformed."""
        record = self.record
        self.payloads += 1
        try:
            event = self.backend.parse(payload)
        except ValueError as exc:  # orjson.JSONDecodeError is a ValueError
            if record.error is None:
                record.error = "malformed_stream"
                record.error_detail = f"unparseable event: {payload[:120]!r} ({exc})"
                record.finish_reason = "error"
            return
        if event is not None:
            self.add(stamp, event)

    def add(self, stamp: int, event: ParsedEvent) -> None:
        """One parsed event that arrived at ``stamp``."""
        record = self.record
        if event.error is not None:
            if record.error is None:
                record.error = "server_error_event"
                record.error_detail = f"error event in the stream: {event.error[:300]}"
                record.finish_reason = "error"
            return
        if event.has_content:
            self.content.append((stamp, event))
            self.texts.append(event.text)
        if event.rejected:
            _note(record, event.rejected)
        if event.items is not None and record.inputs is not None and event.items != record.inputs \
                and record.error is None:
            record.error = "malformed_stream"
            record.error_detail = f"the answer has {event.items} results for the {record.inputs} inputs sent"
            record.finish_reason = "error"
        if event.meta:
            _merge_final(self.final, event)
        if event.done or event.finish_reason is not None:
            self.saw_done = True

    def segment_output_tokens(self) -> int:
        """Output tokens of the current segment: the server's count where it gave one and it is believable,
        else its content events."""
        final = self.final
        events = len(self.content) - self._segment_start
        for reported in (final.completion_tokens, final.completion_tokens_native):
            if reported is not None and self._output_problem(reported) is None:
                return reported
        return events

    def _output_problem(self, reported: int) -> str | None:
        segment = self.content[self._segment_start:]
        per_event = [event.tokens for _, event in segment]
        exact = sum(n or 0 for n in per_event) if segment and all(n is not None for n in per_event) else None
        return output_count_problem(reported, events=len(segment), exact_tokens=exact,
                                    max_tokens=self.record.requested_output_tokens,
                                    has_text=any(event.has_content for _, event in segment))

    def _distrust(self) -> None:
        """Set aside the server's counts that cannot be this stream's (noted on the record): the output counts
        against the stream (`output_count_problem`), then every count against its partners and the request
        (`judge_numbers`)."""
        final, record = self.final, self.record
        for name, label in (("completion_tokens", "usage.completion_tokens"),
                            ("completion_tokens_native", "the engine's output count")):
            reported = getattr(final, name)
            if reported is not None and (why := self._output_problem(reported)) is not None:
                _note(record, f"{label}={reported} ({why})")
                setattr(final, name, None)
        values = {name: getattr(final, name) for name in _JUDGED}
        max_tokens = record.requested_output_tokens
        judge_numbers(values, note=lambda note: _note(record, note),
                      request_prompt=None if record.request_bytes is None
                      else prompt_bound(record.request_bytes, record.images or 0, record.inputs or 0),
                      request_output=None if max_tokens is None else max_tokens + length_margin(max_tokens))
        for name, value in values.items():
            setattr(final, name, value)

    def output_tokens_so_far(self) -> int:
        return self.earlier_output_tokens + self.segment_output_tokens()

    def end_segment(self) -> None:
        """The current segment is over and another one follows (its counts are added, not replaced)."""
        self.earlier_output_tokens = self.output_tokens_so_far()
        self.earlier_reasoning_tokens += self.final.reasoning_tokens or 0
        self.final.completion_tokens = self.final.completion_tokens_native = self.final.reasoning_tokens = None
        self.final.finish_reason = None
        self._segment_start = len(self.content)
        self.saw_done = False

    def finish(self, count_tokens: Callable[[str], int] | None) -> None:
        record, content, final = self.record, self.content, self.final
        record.output_text = "".join(self.texts)
        record.reasoning_text = "".join(event.reasoning for _, event in content if event.reasoning)
        record.tool_call_text = "".join(event.tool_calls.text for _, event in content if event.tool_calls)
        if content:
            record.first_token_ns = content[0][0]
            record.last_token_ns = content[-1][0]
            record.event_ns = [stamp for stamp, _ in content]
        if record.error is None and self.n_chunks and not self.saw_done:
            record.error = "reset"
            record.error_detail = "the stream ended before its final event"
            record.finish_reason = "error"
        if record.error is None and record.status == 200 and not self.n_chunks:
            record.error = "empty_response"
            record.error_detail = "HTTP 200 with an empty body"
            record.finish_reason = "error"
        self._distrust()
        _count_tokens(record, content, final, count_tokens, self.earlier_output_tokens, self._segment_start)
        _split_reasoning(record, content, final, count_tokens, self.earlier_reasoning_tokens)
        tool_calls(record, content, count_tokens)
        if final.image_tokens is not None:
            record.image_tokens = final.image_tokens
        record.server = _server_timing(final)
        if record.finish_reason is None:
            record.finish_reason = final.finish_reason or ("stop" if self.saw_done else "unknown")


def _frames(backend: ProtocolClient, chunks: Sequence[bytes], stamps: Sequence[int]) -> Iterator[tuple[int, bytes]]:
    return iter_payloads(chunks, stamps, backend.framing)


def assemble(
    record: RequestRecord,
    backend: ProtocolClient,
    chunks: Sequence[bytes],
    stamps: Sequence[int],
    count_tokens: Callable[[str], int] | None = None,
) -> None:
    """Fill ``record`` from the raw stream; keeps any error already recorded."""
    assembly = StreamAssembly(record, backend, len(chunks))
    for stamp, payload in _frames(backend, chunks, stamps):
        assembly.feed(stamp, payload)
    _judge_unframed(assembly, chunks)
    assembly.finish(count_tokens)


_IGNORED_STREAM = ("the server answered a stream request with one JSON body, not a stream of events (it ignored "
                   '"stream": true); nothing can be timed per token')


def _judge_unframed(assembly: StreamAssembly, chunks: Sequence[bytes]) -> None:
    """A stream request answered by a body with no event in it that is one JSON object: what it is.

    An error object (by its shape, as each protocol reads it) is the server's error; any other object is a
    complete answer to a request that asked for a stream (the server ignored ``stream``): a ``protocol``
    failure that says so, not a stream cut short (``reset``)."""
    record = assembly.record
    if assembly.payloads or not chunks or record.error is not None or not assembly.backend.streams:
        return
    body = b"".join(chunks).strip()
    if not body.startswith(b"{"):
        return
    try:
        event = assembly.backend.parse(body)
    except ValueError:
        event = None
    if event is not None and event.error is not None:
        record.error, record.error_detail = "server_error_event", f"error answer in place of a stream: {event.error}"
    else:
        record.error, record.error_detail = "protocol", _IGNORED_STREAM
    record.finish_reason = "error"


@dataclass(slots=True)
class _Job:
    record: RequestRecord
    backend: ProtocolClient
    chunks: list[bytes]
    stamps: list[int]
    count_tokens: Callable[[str], int] | None
    on_done: Callable[[RequestRecord], None]


class BackgroundAssembler:
    """Parses finished streams in one background task, a few events at a time.

    Under load many streams end at once; parsing them in their own tasks would
    fill whole event-loop iterations with parsing and delay the arrival stamps
    of every stream still running. Here exactly one slice of one stream is
    parsed per loop iteration, so a stamp waits at most one slice; the backlog
    is worked off whenever the loop has time, and `drain()` waits for it.
    """

    def __init__(self, slice_events: int = _SLICE_EVENTS) -> None:
        self.slice_events = slice_events
        self._jobs: deque[_Job] = deque()
        self._wake: asyncio.Event | None = None
        self._idle: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self.max_backlog = 0

    def submit(self, record: RequestRecord, backend: ProtocolClient, chunks: list[bytes], stamps: list[int],
               count_tokens: Callable[[str], int] | None, on_done: Callable[[RequestRecord], None]) -> None:
        """Queue a finished stream; ``on_done(record)`` runs once it is parsed."""
        if self._task is None or self._task.done():
            self._wake, self._idle = asyncio.Event(), asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._run())
        assert self._wake is not None and self._idle is not None
        self._jobs.append(_Job(record, backend, chunks, stamps, count_tokens, on_done))
        self.max_backlog = max(self.max_backlog, len(self._jobs))
        self._idle.clear()
        self._wake.set()

    async def drain(self) -> None:
        """Wait until every queued stream is parsed."""
        if self._idle is not None and self._jobs:
            await self._idle.wait()

    async def close(self) -> None:
        await self.drain()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        assert self._wake is not None and self._idle is not None
        while True:
            if not self._jobs:
                self._idle.set()
                self._wake.clear()
                await self._wake.wait()
                continue
            job = self._jobs[0]
            try:
                assembly = StreamAssembly(job.record, job.backend, len(job.chunks))
                for n, (stamp, payload) in enumerate(_frames(job.backend, job.chunks, job.stamps), start=1):
                    assembly.feed(stamp, payload)
                    if n % self.slice_events == 0:
                        await asyncio.sleep(0)
                _judge_unframed(assembly, job.chunks)
                assembly.finish(job.count_tokens)
            except Exception as exc:  # a bug here must not hang the run: the record says what happened
                job.record.error = "malformed_stream"
                job.record.error_detail = f"internal error while parsing the stream: {type(exc).__name__}: {exc}"
                job.record.finish_reason = "error"
            self._jobs.popleft()
            job.on_done(job.record)
            await asyncio.sleep(0)


def _note(record: RequestRecord, note: str) -> None:
    """Add ``note`` to the record's list of the server's numbers it did not believe (kept short)."""
    if record.rejected_numbers and note in record.rejected_numbers:
        return
    joined = f"{record.rejected_numbers}; {note}" if record.rejected_numbers else note
    record.rejected_numbers = joined if len(joined) <= 500 else joined[:497] + "..."


def _merge_final(final: ParsedEvent, event: ParsedEvent) -> None:
    """Keep the last non-empty value of every counter and timing field."""
    for name in (
        "finish_reason",
        "prompt_tokens",
        "completion_tokens",
        "completion_tokens_native",
        "prompt_tokens_native",
        "server_prompt_ms",
        "server_prompt_n",
        "server_decode_ms",
        "server_decode_n",
        "server_total_ms",
        "cached_prompt_tokens",
        "image_tokens",
        "reasoning_tokens",
        "spec_verify_steps",
        "spec_accepted_tokens",
        "spec_draft_tokens",
    ):
        value = getattr(event, name)
        if value is not None:
            setattr(final, name, value)


def _count_tokens(
    record: RequestRecord,
    content: list[tuple[int, ParsedEvent]],
    final: ParsedEvent,
    count_tokens: Callable[[str], int] | None,
    earlier: int = 0,
    segment_start: int = 0,
) -> None:
    """Output (and input) tokens, from the most trusted source there is; ``earlier``: the output
    tokens of segments before the last (continuation), whose events are ``content[:segment_start]``."""
    per_event = [event.tokens for _, event in content]
    exact_events = bool(content) and all(n is not None for n in per_event)
    if final.completion_tokens is not None:
        record.output_tokens, record.output_tokens_source = earlier + final.completion_tokens, "usage"
    elif final.completion_tokens_native is not None:
        record.output_tokens, record.output_tokens_source = earlier + final.completion_tokens_native, "native"
    elif exact_events:
        record.output_tokens, record.output_tokens_source = sum(n or 0 for n in per_event), "native"
    elif count_tokens is not None and (record.output_text or record.tool_call_text
                                       or any(event.reasoning for _, event in content)):
        reasoning = "".join(event.reasoning for _, event in content)  # reasoning sent in a field of its own
        counted = sum(count_tokens(text) for text in (record.output_text, reasoning, record.tool_call_text) if text)
        record.output_tokens, record.output_tokens_source = counted, "tokenizer"
    elif content:
        record.output_tokens, record.output_tokens_source = earlier + len(content) - segment_start, "estimate"
    elif record.error is None:
        record.output_tokens, record.output_tokens_source = earlier, "estimate"

    if final.prompt_tokens is not None:
        record.input_tokens, record.input_tokens_source = final.prompt_tokens, "usage"
    elif final.prompt_tokens_native is not None:
        record.input_tokens, record.input_tokens_source = final.prompt_tokens_native, "native"

    if exact_events:
        record.event_tokens = [float(n or 0) for n in per_event]
    elif content:
        share = (record.output_tokens or len(content)) / len(content)
        record.event_tokens = [share] * len(content)


def _server_timing(final: ParsedEvent) -> ServerTiming | None:
    timing = ServerTiming(
        prompt_tokens=final.server_prompt_n,
        prompt_ms=final.server_prompt_ms,
        decode_tokens=final.server_decode_n,
        decode_ms=final.server_decode_ms,
        total_ms=final.server_total_ms,
        cached_tokens=final.cached_prompt_tokens,
        spec_verify_steps=final.spec_verify_steps,
        spec_accepted_tokens=final.spec_accepted_tokens,
        spec_draft_tokens=final.spec_draft_tokens,
    )
    if all(value is None for value in (timing.prompt_ms, timing.decode_ms, timing.total_ms, timing.cached_tokens,
                                       timing.spec_verify_steps)):
        return None
    return timing


def _split_reasoning(
    record: RequestRecord,
    content: list[tuple[int, ParsedEvent]],
    final: ParsedEvent,
    count_tokens: Callable[[str], int] | None,
    earlier: int = 0,
) -> None:
    """When the answer began (``first_answer_ns``) and how many output tokens were reasoning.

    Reasoning is a field's text or an inline ``<think>`` section. The first answer event is the first
    whose answer text is more than whitespace (``"</think>\\n\\n"`` does not start the answer). Reasoning
    tokens: the server's count (usage), else the tokens of reasoning events where each event's tokens are
    exact, else the tokenizer on the reasoning text, else each event's share of the output by characters
    (an estimate). A stream that never got past its reasoning was all reasoning.
    """
    inline = split_inline([event.text for _, event in content])
    told = (final.reasoning_tokens or 0) + earlier
    if inline is None and not any(event.reasoning for _, event in content):  # the usual answer: no per-event work
        _hidden_reasoning(record, content, told)
        return
    if inline is None:
        splits = [EventSplit(event.reasoning, event.text) for _, event in content]
    else:
        splits = [EventSplit(event.reasoning + part.reasoning, part.answer, part.tagged)
                  for (_, event), part in zip(content, inline, strict=True)]
    reasoned = any(split.reasoning or split.tagged for split in splits)
    if not reasoned:
        _hidden_reasoning(record, content, told)
        return
    answers = [stamp for (stamp, _), split in zip(content, splits, strict=True) if split.answer.strip()]
    record.first_answer_ns = answers[0] if answers else 0
    shares = [_reasoning_share(split) for split in splits]
    source: TokenSource
    if told:
        count, source = told, "usage"
    elif not answers and record.output_tokens is not None and record.output_tokens_source is not None:
        count, source = record.output_tokens, record.output_tokens_source
    elif all(event.tokens is not None for _, event in content):
        count, source = round(sum((event.tokens or 0) * f for (_, event), f in zip(content, shares, strict=True))), \
            "native"
    elif count_tokens is not None:
        count, source = count_tokens("".join(split.reasoning for split in splits)), "tokenizer"
    else:
        count, source = round(sum(n * f for n, f in zip(record.event_tokens, shares, strict=True))), "estimate"
    if record.output_tokens is not None:
        count = min(count, record.output_tokens)
    record.reasoning_tokens, record.reasoning_tokens_source = count, source


def _hidden_reasoning(record: RequestRecord, content: list[tuple[int, ParsedEvent]], told: int) -> None:
    """Reasoning the server counted (``told``) but never streamed (OpenAI's o-series): only its count.

    Where the output count is the server's (it includes the hidden tokens), those tokens are set apart
    (``hidden_tokens``) and each event's share is of the streamed tokens alone, so that TPOT, ITL and
    decode speed measure what arrived. At least one token per content event was streamed: a reasoning
    count that leaves less is cut to fit, and noted.
    """
    output = record.output_tokens
    if not told or not output:
        return
    record.reasoning_tokens, record.reasoning_tokens_source = min(told, output), "usage"
    if record.output_tokens_source not in ("usage", "native") or not content:
        return
    per_event = [event.tokens for _, event in content]
    exact = all(n is not None for n in per_event)
    visible = int(sum(n or 0 for n in per_event)) if exact else max(output - told, len(content))
    hidden = max(0, output - visible)
    if hidden < told:
        if not exact:
            _note(record, f"usage.completion_tokens_details.reasoning_tokens={told} (leaves fewer than one "
                          f"token for each of the {len(content)} streamed events of {output})")
        record.reasoning_tokens = hidden
    record.hidden_tokens = hidden or None
    if hidden and not exact:
        record.event_tokens = [visible / len(content)] * len(content)


def _reasoning_share(split: EventSplit) -> float:
    """The share of an event's tokens that were reasoning, by characters (a tag alone is reasoning)."""
    answer = len(split.answer) if split.answer.strip() else 0
    total = len(split.reasoning) + answer
    if not total:
        return 1.0 if split.tagged else 0.0
    return len(split.reasoning) / total
