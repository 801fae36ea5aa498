"""Streaming: do tokens really stream, or does something between the engine and the client buffer them.

One answer of 32 tokens (16 with ``--quick``) is streamed and its content events' arrival stamps
are read (`tokometer.records.RequestRecord.event_ns`, stamped by the benchmark's client as bytes
arrive):

- **buffered**: every event arrived in one burst at the end (TTFT ≈ end to end): a proxy held the
  whole answer back;
- **bursty**: most events arrived in the same read as the one before (a gap under 0.2 ms) and
  then a long gap followed: a proxy flushes in blocks, so ITL reads near zero, then jumps;
- **client_stalled**: this client could not run for a while as the answer streamed (a saturated host:
  `tokometer.doctor.client_stalls`), and the events that waited in its socket meanwhile were read together
  when it ran again. Those events are not counted as a burst of the server's (or a proxy's): an arrival read
  as the client came back from a stall says when the client read it, not when it was sent. Said as info,
  with the stall, so a bursty stream on a busy machine is not blamed on the server;
- **include_usage**: whether ``stream_options.include_usage`` is refused (HTTP 400, which the
  client works around) or ignored (no usage in the stream), for OpenAI APIs.

The record and its shape are kept for the speed check (idle TTFT and decode speed when there is no load
step; a buffered or bursty stream makes per-event decode figures meaningless there: `burst_decode_tok_s`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tokometer.doctor.client_stalls import StallWatch, held_by_client
from tokometer.doctor.finding import Finding
from tokometer.doctor.session import Session
from tokometer.protocols.registry import protocol_named

__all__ = ["BURST_GAP_NS", "StreamShape", "burst_decode_tok_s", "run", "stream_shape"]

BURST_GAP_NS = 200_000
"""Events closer than this (0.2 ms) came in the same read, or back to back: one burst."""
_MIN_EVENTS = 8
_ASK = 32


@dataclass(frozen=True, slots=True)
class StreamShape:
    """How an answer's content events arrived."""

    events: int
    bursts: int
    """Runs of events each within `BURST_GAP_NS` of the one before."""
    same_read_share: float
    """Share of event gaps under `BURST_GAP_NS`, those read as the client came back from a stall not counted."""
    ttft_ms: float
    e2e_ms: float
    longest_gap_ms: float
    client_held: int = 0
    """Event gaps under `BURST_GAP_NS` read as the client came back from a stall of its own: its doing."""

    @property
    def buffered(self) -> bool:
        """The whole answer came at once at the end: TTFT is nearly all of the end-to-end time (and the
        client was not stalled until then)."""
        return (self.events >= _MIN_EVENTS and self.bursts == 1 and self.ttft_ms >= 0.8 * self.e2e_ms
                and self.client_held < self.events - 1)

    @property
    def bursty(self) -> bool:
        """Events come in blocks: most gaps near zero, and more than one block."""
        return self.events >= 2 * _MIN_EVENTS and self.bursts >= 2 and self.same_read_share >= 0.5


def stream_shape(sent_ns: int, event_ns: Sequence[int], end_ns: int,
                 stalls: Sequence[tuple[int, int]] = ()) -> StreamShape:
    """The shape of one stream from its stamps (`perf_counter_ns`); ``stalls``: the client's own
    (`tokometer.doctor.client_stalls.StallWatch`) while it read the stream."""
    gaps = [b - a for a, b in itertools.pairwise(event_ns)]
    bursts = 1 + sum(1 for g in gaps if g >= BURST_GAP_NS) if event_ns else 0
    near = [i for i, (a, b) in enumerate(itertools.pairwise(event_ns), 1) if b - a < BURST_GAP_NS]
    held = sum(1 for i in near if _held(i, sent_ns, event_ns, stalls))
    return StreamShape(
        events=len(event_ns),
        bursts=bursts,
        same_read_share=(len(near) - held) / len(gaps) if gaps else 0.0,
        ttft_ms=(event_ns[0] - sent_ns) / 1e6 if event_ns else 0.0,
        e2e_ms=(end_ns - sent_ns) / 1e6,
        longest_gap_ms=max(gaps, default=0) / 1e6,
        client_held=held,
    )


def _held(i: int, sent_ns: int, event_ns: Sequence[int], stalls: Sequence[tuple[int, int]]) -> bool:
    """Whether event ``i`` (read within `BURST_GAP_NS` of the one before) came in a burst the client held back."""
    start = i
    while start > 0 and event_ns[start] - event_ns[start - 1] < BURST_GAP_NS:
        start -= 1  # the burst's first event: the silence before it is what a stall must explain
    silent_from = event_ns[start - 1] if start > 0 else sent_ns
    return held_by_client(event_ns[start], silent_from, stalls)


def burst_decode_tok_s(event_ns: Sequence[int], event_tokens: Sequence[float]) -> float | None:
    """Decode speed from when the bursts arrived, for a stream a proxy passes on in blocks.

    A proxy flushes a block when it fills, and a block's end almost always cuts an event in two: the first
    burst (the complete events of the first block) arrives when the event after it was made, and the last burst
    when the last event was. So the speed is the tokens made between those two moments, all the tokens after
    the first burst but the first of them, over the time between the two arrivals. The per-event figure
    (`tokometer.metrics.request.decode_speed_tok_s`) instead counts a block's tokens as made at once. A first
    burst of one event (a stream of separate events, not blocks) gives the per-event figure: every token after
    the first over the time from it. None with fewer than two bursts (a whole answer at once: nothing to tell
    the speed from)."""
    if len(event_ns) < 2 or len(event_tokens) != len(event_ns):
        return None
    ends = [i for i, (a, b) in enumerate(itertools.pairwise(event_ns)) if b - a >= BURST_GAP_NS]
    if not ends:
        return None
    first_end = ends[0]  # the first burst's last event
    made_from = first_end + 1 if first_end > 0 else first_end  # blocks: the cut event was made at the arrival
    span = event_ns[-1] - event_ns[first_end]
    tokens = sum(event_tokens[made_from + 1:])
    return tokens * 1e9 / span if span > 0 and tokens > 0 else None


async def run(session: Session) -> None:
    """The streaming check."""
    ask = _ASK // 2 if session.spec.quick else _ASK
    prompt, _, _ = await session.prompt(32)
    async with StallWatch() as watch:
        exchange = await session.send(prompt, ask, ignore_eos=True)
    record = exchange.record
    if record.error is not None:
        session.add(Finding("streaming.failed", "error", f"a streamed answer failed: {record.error}",
                            {"answer": record.error_detail[:300], "status": record.status},
                            "The server fails plain streamed requests: see its log."))
        return
    session.speed["stream_record"] = record
    shape = stream_shape(record.sent_ns, record.event_ns, record.end_ns, watch.stalls)
    session.speed["stream_shape"] = shape
    evidence = {"events": shape.events, "bursts": shape.bursts, "same_read_share": round(shape.same_read_share, 2),
                "ttft_ms": round(shape.ttft_ms, 1), "e2e_ms": round(shape.e2e_ms, 1),
                "longest_gap_ms": round(shape.longest_gap_ms, 1), "output_tokens": record.output_tokens,
                "client_stalls": len(watch.stalls), "client_stall_longest_ms": round(watch.longest_ms, 1),
                "client_held_events": shape.client_held}
    if shape.client_held:
        session.add(_client_stalled(shape, watch, evidence))
    if shape.buffered:
        session.add(Finding("streaming.buffered", "warning",
                            f"the answer did not stream: all {shape.events} events arrived together after "
                            f"{shape.ttft_ms:,.0f} ms (TTFT ≈ end to end, {shape.e2e_ms:,.0f} ms)", evidence,
                            "Something between the engine and this client buffers whole responses (nginx "
                            "proxy_buffering, a gateway, a compression filter): turn buffering off for "
                            "text/event-stream (nginx: proxy_buffering off, or X-Accel-Buffering: no)."))
    elif shape.bursty:
        session.add(Finding("streaming.bursty", "warning",
                            f"tokens arrive in {shape.bursts} bursts: {100 * shape.same_read_share:.0f}% of gaps "
                            f"near zero, then gaps up to {shape.longest_gap_ms:,.0f} ms", evidence,
                            "A proxy flushes the stream in blocks: users see stutter and ITL figures mean little. "
                            "Turn off response buffering (and compression) for the streaming path."))
    else:
        session.add(Finding("streaming.ok", "info", f"tokens stream: {shape.events} events in {shape.bursts} "
                            f"arrivals, first after {shape.ttft_ms:,.0f} ms", evidence))
    if not protocol_named(session.api).asks_stream_usage:
        return
    if exchange.usage_rejected:
        session.add(Finding("streaming.usage_rejected", "warning",
                            "the server refuses stream_options.include_usage (HTTP 400)", evidence,
                            "Clients that ask for token usage in streams fail here (tokometer retries without it "
                            "and counts tokens itself): upgrade the server, or have a gateway drop the option."))
    elif record.output_tokens_source != "usage":
        session.add(Finding("streaming.no_usage", "info",
                            "the stream carries no usage (include_usage is ignored): token counts are estimated",
                            {**evidence, "counted_by": record.output_tokens_source},
                            "Token counts and costs come from the client's own count: give tokometer the "
                            "model's tokenizer (--tokenizer) for exact ones."))


def _client_stalled(shape: StreamShape, watch: StallWatch, evidence: dict[str, Any]) -> Finding:
    """Info: the client itself stalled as the answer streamed, and read what waited meanwhile at once."""
    return Finding("streaming.client_stalled", "info",
                   f"this client could not run for up to {watch.longest_ms:,.0f} ms while the answer streamed "
                   f"({len(watch.stalls)} stalls); {shape.client_held} events waited in its socket and were read "
                   "together after: not counted as the server's bursts", evidence,
                   "The machine running doctor is short of CPU (a server on it, or other work): the stream's "
                   "arrival times are partly this machine's. Run doctor where the client has a core to itself "
                   "for timings that are the server's alone.")
