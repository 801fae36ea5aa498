"""Send one streaming request and fill its `RequestRecord`.

The HTTP work is done by `tokometer.client.http1`, which stamps the request
just before its single socket write and every chunk in ``data_received``.
Nothing is parsed until the stream has ended; then `assemble()` splits the
bytes into events and derives the first/last token stamps, token counts and
server timings.

Failures are data: every exception on the request path ends as an error
category in the record, never as an exception out of `StreamClient.send`
(cancellation excepted, which is recorded and then re-raised).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from time import perf_counter_ns

import orjson

from tokometer.client.assemble import BackgroundAssembler, assemble
from tokometer.client.http1 import (
    ConnectError,
    HttpPool,
    HttpTimeout,
    PeerReset,
    ProtocolViolation,
    StreamedResponse,
    TlsOptions,
    transport_error_category,
)
from tokometer.prompt import Prompt
from tokometer.protocols.common.base import GenerationParams, ProtocolClient, answer_length
from tokometer.protocols.common.framing import EXTRA_EVENTS, MAX_BODY_BYTES, MAX_EVENT_BYTES, EventWatch, event_limit
from tokometer.protocols.common.mediatype import not_an_api_answer
from tokometer.protocols.embeddings.client import batch_inputs
from tokometer.records import RequestRecord, describe_http_failure
from tokometer.util.readbudget import BUDGET_FLOOR_BYTES, response_budget

__all__ = ["StreamClient", "Target", "Timeouts", "event_limit"]

_BUDGET_SETTING = "--max-response-bytes (bench; the default is sized from max_tokens)"
@dataclass(frozen=True, slots=True)
class Target:
    """Where requests go: a base URL (``http://host:port/v1`` for OpenAI) and credentials."""

    base_url: str
    api_key: str | None = field(default=None, repr=False)
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    tls: TlsOptions = field(default_factory=TlsOptions)
    """How to check an https server's certificate."""


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Per-request limits: connecting, silence between bytes, and in all (seconds: the total one is a deadline
    for the whole answer), the size of one streamed event, and the read budget of a whole answer (bytes, everything
    counted; 0: sized from the request's ``max_tokens``, `response_budget`). Past a size limit the request is a
    ``protocol`` error, past a time limit a ``timeout``."""

    connect: float = 10.0
    idle: float = 60.0
    total: float = 600.0
    max_event_bytes: int = MAX_EVENT_BYTES
    max_response_bytes: int = 0


class StreamClient:
    """Runs requests of one protocol against one target over a keep-alive pool."""

    def __init__(
        self,
        target: Target,
        backend: ProtocolClient,
        params: GenerationParams,
        timeouts: Timeouts = Timeouts(),
        count_tokens: Callable[[str], int] | None = None,
    ) -> None:
        self.target = target
        self.backend = backend
        self.params = params
        self.count_tokens = count_tokens
        self.max_event_bytes = timeouts.max_event_bytes
        self.max_response_bytes = timeouts.max_response_bytes
        self.assembler = BackgroundAssembler()
        self.pool = HttpPool(target.base_url, connect_timeout=timeouts.connect, idle_timeout=timeouts.idle,
                             total_timeout=timeouts.total, tls=target.tls)
        self._headers = {"Content-Type": "application/json", "Accept": "text/event-stream, application/x-ndjson"}
        self._headers.update(backend.fixed_headers())
        if target.api_key:
            self._headers.update(backend.auth_headers(target.api_key))
        self._headers.update(target.headers)

    async def drain(self) -> None:
        """Wait until every finished stream has been parsed and handed on."""
        await self.assembler.drain()

    async def close(self) -> None:
        await self.assembler.close()
        await self.pool.close()

    async def __aenter__(self) -> StreamClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def send(self, prompt: Prompt, record: RequestRecord,
                   on_done: Callable[[RequestRecord], None] | None = None) -> RequestRecord:
        """Send ``prompt``, stream the answer, and fill ``record``; never raises but for cancellation.

        With ``on_done``, returns as soon as the stream has ended and the record
        is finished (parsed) in the background, then handed to ``on_done``;
        without it, returns the finished record.
        """
        if self.backend.streams:
            record.requested_output_tokens = answer_length(prompt, self.params)
        else:  # one JSON answer: nothing generated; the record counts the inputs sent
            record.inputs = len(batch_inputs(prompt))
        finished: asyncio.Future[RequestRecord] | None = None
        if on_done is None:
            finished = asyncio.get_running_loop().create_future()
            on_done = finished.set_result
        record.tenant = prompt.tenant  # a mix's tenant: its own model (a LoRA adapter) and headers
        params = replace(self.params, model=prompt.model) if prompt.model else self.params
        headers = _over(self._headers, prompt.headers) if prompt.headers else self._headers
        for attempt in (0, 1):
            request = self.backend.build(prompt, params)
            raw = self.pool.encode("POST", request.path, orjson.dumps(request.body), headers)
            record.request_bytes = len(raw)
            retry = await self._send_once(raw, record, on_done, event_limit(record.requested_output_tokens))
            if not retry or attempt:
                break
            record.error = None
            record.error_detail = ""
        return await finished if finished is not None else record

    async def _send_once(self, raw: bytes, record: RequestRecord, on_done: Callable[[RequestRecord], None],
                         max_events: int = 0) -> bool:
        limit = self.max_event_bytes if self.backend.streams else max(self.max_event_bytes, MAX_BODY_BYTES)
        watch = EventWatch(self.backend.framing, limit, max_events)
        response = StreamedResponse(watch=watch, max_bytes=self._budget(record), max_bytes_setting=_BUDGET_SETTING)
        try:
            await self.pool.request(raw, response)
        except asyncio.CancelledError:
            self._fill(record, response)
            self._fail(record, "cancelled", "cancelled before the answer ended")
            assemble(record, self.backend, response.chunks, response.stamps, self.count_tokens)
            record.finish_reason = "cancelled"
            on_done(record)
            raise
        except (HttpTimeout, ConnectError, PeerReset) as exc:
            self._fill(record, response)
            detail = str(exc)
            if isinstance(exc, ProtocolViolation) and max_events and watch.events > max_events:
                detail = (f"server ignored max_tokens: {watch.events} events for max_tokens "
                          f"{record.requested_output_tokens} (reading stops past 2 x max_tokens + {EXTRA_EVENTS} "
                          "events); what came until then is kept")
            self._fail(record, transport_error_category(exc), detail)
        else:
            self._fill(record, response)
            if not 200 <= response.status < 300:
                text = b"".join(response.chunks)[:4096].decode("utf-8", "replace")
                if self._usage_rejected(response.status, text):
                    return True
                failure = describe_http_failure(response.status, response.headers, text)
                assert failure is not None
                record.error, record.error_detail = failure
                record.finish_reason = "error"
                on_done(record)
                return False
            if (what := not_an_api_answer(response.headers, response.chunks)) is not None:
                record.error, record.error_detail = "protocol", f"HTTP {response.status}: {what}"
                record.finish_reason = "error"
                on_done(record)
                return False
        self.assembler.submit(record, self.backend, response.chunks, response.stamps, self.count_tokens, on_done)
        return False

    def _budget(self, record: RequestRecord) -> int:
        """The read budget of this request's answer: the one set, else sized from its ``max_tokens``
        (a ``json`` answer's from the largest body accepted)."""
        if self.max_response_bytes:
            return self.max_response_bytes
        if not self.backend.streams:
            return response_budget(None, MAX_BODY_BYTES + BUDGET_FLOOR_BYTES)
        return response_budget(record.requested_output_tokens, max_event_bytes=self.max_event_bytes)

    @staticmethod
    def _fill(record: RequestRecord, response: StreamedResponse) -> None:
        record.sent_ns = response.sent_ns or perf_counter_ns()
        record.connect_ns = response.connect_ns
        record.first_byte_ns = response.first_byte_ns
        record.status = response.status or None
        record.end_ns = response.end_ns or perf_counter_ns()

    def _usage_rejected(self, status: int, text: str) -> bool:
        if status not in (400, 422) or not self.backend.wants_usage(self.params):
            return False
        lowered = text.lower()
        if "stream_options" in lowered or "include_usage" in lowered:
            self.backend.include_usage_rejected = True
            return True
        return False

    @staticmethod
    def _fail(record: RequestRecord, category: str, detail: str) -> None:
        if not record.end_ns:
            record.end_ns = perf_counter_ns()
        record.error = category  # type: ignore[assignment]
        record.error_detail = detail
        record.finish_reason = "error"


def _over(headers: dict[str, str], extra: tuple[tuple[str, str], ...]) -> dict[str, str]:
    """``headers`` with ``extra`` put over them, names matched without regard to case."""
    replaced = {name.lower() for name, _ in extra}
    return {**{k: v for k, v in headers.items() if k.lower() not in replaced}, **dict(extra)}
