"""The simulator's answers: scripted timing, or tokens from the engine model; streamed, or whole.

Both are ASGI callables returned by the generate endpoint. They share the
headers, the optional empty role-only first event, the mid-stream faults and
the send trace; they differ in who decides when a token is ready: a fixed
script (`ScriptedStream`) or the continuous-batching engine (`EngineStream`).

A request that does not stream (``stream`` false, or absent where the protocol's default is not to
stream: OpenAI, llama.cpp) is timed the same way and answered with one JSON body when its last
token is ready; the trace's event stamps are then the moments tokens were ready. Its mid-stream
faults become what a server whose handler failed answers: ``reset`` and ``stall`` (after its time) a
bare 500 (uvicorn's, no response having started), ``error_event`` a 500 with the protocol's error
body, ``malformed`` a body cut short.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import orjson
from starlette.types import Message, Receive, Scope, Send

from tokometer.datasets.words import WORDS
from tokometer.protocols.common.server import ProtocolServer, RequestInfo, StreamTiming
from tokometer.sim.engine import Sequence
from tokometer.sim.reasoning import event_text
from tokometer.sim.state import SimState, SimulatedReset
from tokometer.sim.trace import SendTrace
from tokometer.util.clock import PRECISE_SPIN_NS, sleep_until

__all__ = ["EngineStream", "ScriptedStream"]

_NS_PER_MS = 1_000_000
_MID_STREAM = ("reset", "stall", "error_event", "malformed")


class _Stream:
    """What every streamed answer does: headers, tokens, faults, trace."""

    def __init__(self, state: SimState, proto: ProtocolServer, info: RequestInfo, trace: SendTrace, n_tokens: int,
                 finish: str, *, ttft_factor: float = 1.0, ttft_extra_ms: float = 0.0) -> None:
        self.state = state
        self.proto = proto
        self.info = info
        self.trace = trace
        self.n_tokens = n_tokens
        self.finish = finish
        self.sent = 0
        self.disconnected = False
        self.gone = asyncio.Event()
        self._send: Send | None = None
        self.spin_ns = PRECISE_SPIN_NS if state.config.precise else 0
        self.ttft_factor = ttft_factor
        """Scales the scripted TTFT (below 1 for a prompt the simulated prefix cache holds)."""
        self.ttft_extra_ms = ttft_extra_ms
        """Added to the scripted TTFT: the time to load the request's LoRA adapter (`tokometer.sim.adapters`)."""
        self._held: list[bytes] | None = [] if state.config.buffer_stream else None
        """With ``buffer_stream``: the body so far, sent in one piece when the answer ends."""
        self._whole: tuple[list[int], list[str], list[str]] | None = None if info.stream else ([], [], [])
        """Not streamed: the answer's token ids, text and reasoning so far, sent as one body at the end."""
        self._failed: tuple[int, bytes] | None = None
        """Not streamed: the status and body a mid-stream fault sends instead of the answer."""

    async def _watch_disconnect(self, receive: Receive) -> None:
        while True:
            message: Message = await receive()
            if message["type"] == "http.disconnect":
                self.disconnected = True
                self.trace.disconnected_ns = time.perf_counter_ns()
                self.gone.set()
                return

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        watcher = asyncio.create_task(self._watch_disconnect(receive))
        self._send = send
        self.state.in_flight += 1
        try:
            await self._start()
            await self._body()
            self.trace.completion_tokens = self.sent
            if self._whole is not None:
                await self._send_whole()
                return
            if self.n_tokens == 0:
                await self._write(self.proto.finish(self.info, self.finish, 0, self._timing()))
            held, self._held = self._held, None
            if held:
                await self._write(b"".join(held))  # a buffering proxy lets the whole answer go at once
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            self.state.in_flight -= 1
            watcher.cancel()
            self.trace.end_ns = time.perf_counter_ns()
            self.trace.disconnected = self.disconnected
            if self.state.metrics is not None:
                self.state.metrics.observe(self.trace)

    async def _body(self) -> None:
        raise NotImplementedError

    async def _send_whole(self) -> None:
        """The answer of a request that does not stream: one JSON body (or what a fault made of it)."""
        assert self._whole is not None and self._send is not None
        if self.disconnected:
            return
        ids, text, reasoning = self._whole
        status, content_type = 200, b"application/json"
        if self._failed is not None:
            status, body = self._failed
        else:
            body = orjson.dumps(self.proto.whole(self.info, "".join(text), "".join(reasoning), ids, self.finish,
                                                 self.sent, self._timing()))
        await self._send({"type": "http.response.start", "status": status, "headers": [
            (b"content-type", content_type), (b"content-length", str(len(body)).encode()),
            (b"x-sim-request-id", str(self.trace.seq).encode())]})
        self.trace.headers_ns = time.perf_counter_ns()
        await self._send({"type": "http.response.body", "body": body, "more_body": False})

    async def _write(self, body: bytes, more: bool = True) -> None:
        if self._held is not None:
            self._held.append(body)
            return
        assert self._send is not None
        await self._send({"type": "http.response.body", "body": body, "more_body": more})

    async def _start(self) -> None:
        cfg, trace = self.state.config, self.trace
        if trace.fault == "slow_first_byte":
            await sleep_until(trace.received_ns + int(cfg.slow_first_byte_ms * _NS_PER_MS), self.spin_ns)
        assert self._send is not None
        if self._whole is not None:
            return  # the head goes with the whole answer
        await self._send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", self.proto.content_type.encode()), (b"cache-control", b"no-cache"),
            (b"x-sim-request-id", str(trace.seq).encode())]})
        trace.headers_ns = time.perf_counter_ns()
        if cfg.empty_first_event:
            start = self.proto.start(self.info)
            if start:
                await self._write(start)

    def fault_due(self) -> bool:
        return self.sent >= self.state.config.fault_after_tokens and self.trace.fault in _MID_STREAM

    async def write_tokens(self, take: int) -> None:
        """Send the next ``take`` tokens as one event (with the closing events after the last)."""
        trace = self.trace
        ids = [(trace.seq * 31 + self.sent + i) % len(WORDS) for i in range(take)]
        text, reasoning = event_text(self.state.config, self.proto, self.info, ids, self.sent)
        if self._whole is not None:
            self._whole[0].extend(ids)
            self._whole[1].append(text)
            self._whole[2].append(reasoning)
            trace.event_ns.append(time.perf_counter_ns())
            trace.event_tokens.append(take)
            self.sent += take
            return
        if self.sent + take == self.n_tokens:
            body = self.proto.last_tokens(self.info, ids, text, self.sent, self.finish, self._timing(), reasoning)
        else:
            body = self.proto.tokens(self.info, ids, text, self.sent, reasoning)
        stamp = time.perf_counter_ns()
        await self._write(body)
        trace.event_ns.append(stamp)
        trace.event_tokens.append(take)
        self.sent += take

    async def mid_stream_fault(self) -> bool:
        """Apply the request's mid-stream fault; True when the stream must end here."""
        fault = self.trace.fault
        self.trace.fault = fault + ":done"
        if fault == "reset":
            raise SimulatedReset("simulated connection reset")
        if fault == "stall":
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.state.config.stall_s):
                    await self.gone.wait()
            if self._whole is not None and not self.disconnected:
                raise SimulatedReset("simulated stall: the handler fails without an answer")
            return True
        if fault == "error_event":
            if self._whole is not None:
                error = self.proto.error_body(500, "simulated engine failure", "server_error")
                self._failed = (500, orjson.dumps(error))
                return True
            await self._write(self.proto.error_event(self.info, "simulated engine failure"))
            return True
        await self.write_malformed()
        return False

    async def write_malformed(self) -> None:
        """The ``malformed`` fault: a broken event in a stream, or a body cut short (status 200) for a whole answer."""
        if self._whole is not None:
            self._failed = (200, b'{"id": "cmpl-broken", "choices": [{"index": 0, "text": "bro')
            return
        await self._write(self.proto.malformed())

    def _timing(self) -> StreamTiming:
        events = self.trace.event_ns
        now = time.perf_counter_ns()
        first = events[0] if events else now
        return StreamTiming(
            prompt_ms=(first - self.trace.received_ns) / _NS_PER_MS,
            decode_ms=(now - first) / _NS_PER_MS,
            total_ms=(now - self.trace.received_ns) / _NS_PER_MS,
        )


class ScriptedStream(_Stream):
    """Event ``k`` is due at ``received + ttft + k * itl * tokens_per_event``; absolute, so a late
    event never delays the next. With ``load_slowdown`` each wait is stretched by the requests in flight
    when it is scheduled. With a draft (``spec_tokens``) every event after the first is one step of
    ``itl`` x the draft's step factor carrying 1 + the accepted tokens (`tokometer.sim.speculative`)."""

    async def _body(self) -> None:
        cfg = self.state.config
        base = self.trace.received_ns
        if self.trace.fault == "slow_first_byte":
            base += int(cfg.slow_first_byte_ms * _NS_PER_MS)
        ttft_ns = int((cfg.ttft_ms * self.ttft_factor + self.ttft_extra_ms) * _NS_PER_MS)
        draft = self.state.draft
        step_ns = int(cfg.itl_ms * _NS_PER_MS * (draft.step_factor if draft else cfg.tokens_per_event))
        due = base + int(ttft_ns * self._load_factor())
        while self.sent < self.n_tokens:
            await sleep_until(due, self.spin_ns)
            if self.disconnected:
                return
            if self.fault_due() and await self.mid_stream_fault():
                return
            take = cfg.tokens_per_event if draft is None else 1 + (draft.verify() if self.sent else 0)
            take = min(take, self.n_tokens - self.sent)
            if draft is not None and self.sent and cfg.spec_meta:
                self._count_verify(take - 1, draft.tokens)
            await self.write_tokens(take)
            due += int(step_ns * self._load_factor())

    def _count_verify(self, kept: int, drafted: int) -> None:
        """One verify step of this answer, ``kept`` of the ``drafted`` tokens in it (those past the answer's
        end not counted, as SGLang counts them), for its ``meta_info``."""
        steps, accepted, proposed = self.info.spec_counts or (0, 0, 0)
        self.info.spec_counts = (steps + 1, accepted + kept, proposed + drafted)

    def _load_factor(self) -> float:
        """How much slower than idle the next token is (``load_slowdown``: per other request in flight)."""
        return 1.0 + self.state.config.load_slowdown * max(0, self.state.in_flight - 1)


class EngineStream(_Stream):
    """Tokens arrive when the engine model's steps produce them."""

    def __init__(self, *args: Any, blocks: tuple[bytes, ...] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.blocks = blocks
        """The prompt's block hashes, for the engine's prefix cache."""

    async def _body(self) -> None:
        engine = self.state.engine
        assert engine is not None
        if self.n_tokens == 0:
            return
        self._fault = asyncio.Event()
        seq = Sequence(self.trace.seq, self.info.prompt_tokens, self.n_tokens, self._emit, blocks=self.blocks,
                       adapter=self.trace.adapter)
        engine.submit(seq)
        done = asyncio.ensure_future(seq.done.wait())
        gone = asyncio.ensure_future(self.gone.wait())
        fault = asyncio.ensure_future(self._fault.wait())
        try:
            await asyncio.wait((done, gone, fault), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in (done, gone, fault):
                waiter.cancel()
        if not seq.done.is_set():
            engine.cancel(seq)
        if self._fault.is_set():
            await self.mid_stream_fault()

    async def _emit(self, seq: Sequence, total: int) -> None:
        """Called by the engine loop: must never block it (faults are acted on by the stream's task)."""
        self.trace.admitted_ns = seq.admitted_ns
        if self.blocks:
            self.info.cached_tokens = seq.cached_tokens  # known once admitted; reported with the usage
        if self.disconnected or self._fault.is_set():
            return
        if self.fault_due():
            if self.trace.fault == "malformed":
                self.trace.fault += ":done"
                await self.write_malformed()
            else:
                self._fault.set()
                return
        await self.write_tokens(total - self.sent)
