"""OpenTelemetry traces of the gateway's requests, exported over OTLP: off unless ``[tracing] endpoint`` is set.

Each client request is one span (kind SERVER) whose parent is the client's W3C ``traceparent``, if it sent
one. Each upstream request made for it is a child span (kind CLIENT): the first attempt, its retries, the
fallbacks, a hedge's two legs, and the attempts that carry an answer on after a mid-stream failure (a resume)
or a length cut (a continuation). Each upstream request carries its own span's ``traceparent``, so the
engine's spans join the same trace. Attribute names follow OpenTelemetry's GenAI semantic conventions
(``gen_ai.*``, ``server.*``, ``error.type``); what they have no name for is ``tokometer.*``:

- request span: ``gen_ai.operation.name`` (``chat`` or ``text_completion``), ``gen_ai.request.model`` (the
  route), ``gen_ai.request.stream``, ``gen_ai.request.max_tokens``, ``gen_ai.response.model`` (what served it),
  ``gen_ai.response.finish_reasons``, ``gen_ai.usage.input_tokens``/``output_tokens``,
  ``gen_ai.response.time_to_first_chunk`` (TTFT as the client saw it, seconds), ``http.response.status_code``,
  ``error.type``; ``tokometer.upstream``, ``tokometer.fallback``, ``tokometer.retries``, ``tokometer.hedge``
  (the leg that won), ``tokometer.resumes``, ``tokometer.overhead_ms``, ``tokometer.client_api``,
  ``tokometer.cache`` (``hit``: answered from the answer cache, with no upstream request).
- attempt span: ``gen_ai.operation.name``, ``gen_ai.provider.name`` (who defines the upstream's protocol:
  ``openai``, ``anthropic``, ``ollama``, ``tgi``, ``llama.cpp``), ``gen_ai.request.model`` (the name sent upstream),
  ``server.address``/``server.port``, ``gen_ai.response.time_to_first_chunk`` (the upstream's own TTFT),
  ``error.type`` (the failure's category, as ``tokometer bench`` names it); ``tokometer.upstream``,
  ``tokometer.attempt`` (``primary``: the first of its segment, ``retry``, ``fallback`` or ``hedge``),
  ``tokometer.segment`` (1, then 2, ... for each resume or continuation), ``tokometer.segment.cause``
  (``resume``, ``continue``), ``tokometer.attempt.outcome`` (``cancelled``: a hedge's loser; ``broke``: failed
  after its first token).

The SDK and the exporter are the ``otel`` extra, imported only when tracing is configured: a gateway without
it pays one ``None`` check per request and per upstream attempt, nothing per event. Spans are exported in
batches from the SDK's own thread, off the event loop.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Coroutine, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

from tokometer.protocols.registry import protocol_named
from tokometer.util.errors import ConfigError

if TYPE_CHECKING:
    from tokometer.gateway.config import TracingConfig

# This module is a leaf of the gateway (the router and the upstreams import it): what it is handed is typed
# ``Any`` here, and named in the docstrings: ``Opened`` (`tokometer.gateway.router`), ``Upstream`` and
# ``UpstreamError`` (`tokometer.gateway.upstream`), ``RelayOutcome`` (`tokometer.gateway.outcome`), ``Figures``
# (`tokometer.gateway.accounting`).
Opened = Any
Upstream = Any
UpstreamError = Any
RelayOutcome = Any
Figures = Any
T = TypeVar("T")

__all__ = ["INSTALL_HINT", "RequestTrace", "Tracer", "attempt", "carrying_on", "check_sdk", "segment_failed",
           "tracer_for", "upstream_headers"]

INSTALL_HINT = "pip install 'tokometer[otel]'"

_TRACE: ContextVar[RequestTrace | None] = ContextVar("tokometer_trace", default=None)
"""The request being traced in this task (None: tracing is off, or this request is not traced)."""
_UPSTREAM_HEADERS: ContextVar[dict[str, str] | None] = ContextVar("tokometer_trace_headers", default=None)
"""The trace headers (``traceparent``, ``tracestate``) of the upstream attempt running in this task."""

_OPERATIONS = {"chat": "chat", "completions": "text_completion"}


def check_sdk(cfg: TracingConfig) -> None:
    """Raise a one-line ConfigError when tracing is configured and the OpenTelemetry SDK is not installed."""
    if cfg.endpoint is None:
        return
    exporter = "grpc" if cfg.protocol == "grpc" else "http"
    try:
        for module in ("opentelemetry.sdk.trace", f"opentelemetry.exporter.otlp.proto.{exporter}.trace_exporter"):
            importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(f"[tracing] endpoint is set but the OpenTelemetry SDK or its OTLP {cfg.protocol} exporter "
                          f"is not installed ({exc.name}): {INSTALL_HINT}, or remove [tracing] endpoint") from None


def tracer_for(cfg: TracingConfig) -> Tracer | None:
    """The gateway's tracer, or None: tracing is off (no ``endpoint``)."""
    if cfg.endpoint is None:
        return None
    check_sdk(cfg)
    return Tracer(cfg)


def _exporter(cfg: TracingConfig) -> Any:
    """The OTLP span exporter ``cfg`` asks for (http/protobuf or grpc)."""
    assert cfg.endpoint is not None
    headers = dict(cfg.headers) or None
    if cfg.protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        return GrpcExporter(endpoint=cfg.endpoint, insecure=cfg.endpoint.startswith("http://"), headers=headers,
                            timeout=cfg.timeout_s)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    endpoint = cfg.endpoint
    if urlsplit(endpoint).path in ("", "/"):
        endpoint = endpoint.rstrip("/") + "/v1/traces"
    return OTLPSpanExporter(endpoint=endpoint, headers=headers, timeout=cfg.timeout_s)


class Tracer:
    """The gateway's tracer provider (its own, not the process's global one), sampler and batch exporter."""

    def __init__(self, cfg: TracingConfig) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self.provider = TracerProvider(resource=Resource.create({"service.name": cfg.service_name}),
                                       sampler=ParentBased(TraceIdRatioBased(cfg.sample_ratio)))
        self.provider.add_span_processor(BatchSpanProcessor(_exporter(cfg)))
        self.tracer = self.provider.get_tracer("tokometer.gateway")
        self.propagator = TraceContextTextMapPropagator()

    def begin(self, headers: Mapping[str, str], endpoint: str, api: str) -> RequestTrace:
        """Start the span of a client's request (its parent: the request's ``traceparent``); the request's
        upstream attempts in this task become its children."""
        from opentelemetry.trace import SpanKind

        parent = self.propagator.extract(headers)
        operation = _OPERATIONS.get(endpoint, endpoint)
        span = self.tracer.start_span(operation, context=parent, kind=SpanKind.SERVER, attributes={
            "gen_ai.operation.name": operation, "tokometer.client_api": api})
        trace = RequestTrace(self, span, operation)
        _TRACE.set(trace)
        return trace

    def finish(self, outcome: RelayOutcome, figures: Figures) -> None:
        """End the span of this task's relayed request with what it came to."""
        trace = _TRACE.get()
        if trace is not None:
            _TRACE.set(None)
            trace.relayed(outcome, figures)

    def shutdown(self) -> None:
        """Export what is left and stop (blocks up to the export timeout: call it off the event loop)."""
        self.provider.shutdown()


class RequestTrace:
    """The span of one client request, and the attempts made for it."""

    __slots__ = ("cause", "last", "operation", "segment", "span", "tracer")

    def __init__(self, tracer: Tracer, span: Any, operation: str) -> None:
        self.tracer = tracer
        self.span = span
        self.operation = operation
        self.segment = 1
        self.cause: str | None = None
        self.last: str | None = None
        """The upstream of this segment's previous attempt (None: none yet)."""

    def answered(self, status: int, route: str | None, cache: str | None) -> None:
        """End the span of a request answered before routing (refused, or replayed from the cache: ``cache`` is
        its ``x-tokometer-cache`` header)."""
        _TRACE.set(None)
        span = self.span
        if route is not None:
            span.update_name(f"{self.operation} {route}")
            span.set_attribute("gen_ai.request.model", route)
        if cache is not None:
            span.set_attribute("tokometer.cache", cache)
        span.set_attribute("http.response.status_code", status)
        if status >= 400:
            _error(span, str(status), f"HTTP {status}")
        span.end()

    def relayed(self, outcome: RelayOutcome, figures: Figures) -> None:
        """End the span of a relayed request."""
        ctx, span, answer = outcome.ctx, self.span, outcome.answer
        span.update_name(f"{self.operation} {ctx.route.model}")
        values: dict[str, Any] = {
            "gen_ai.request.model": ctx.route.model, "gen_ai.request.stream": ctx.stream,
            "gen_ai.request.max_tokens": ctx.requested_max_tokens, "gen_ai.response.model": answer.model or None,
            "gen_ai.response.finish_reasons": [answer.finish_reason] if answer.finish_reason else None,
            "gen_ai.usage.input_tokens": figures.prompt, "gen_ai.usage.output_tokens": figures.completion,
            "gen_ai.response.time_to_first_chunk": None if figures.ttft is None else figures.ttft / 1e9,
            "http.response.status_code": outcome.status,
            "tokometer.upstream": outcome.upstream.name if outcome.upstream is not None else None,
            "tokometer.fallback": outcome.fallback, "tokometer.retries": outcome.retries,
            "tokometer.hedge": outcome.hedge, "tokometer.resumes": max(0, len(outcome.served_by) - 1),
            "tokometer.overhead_ms": None if figures.overhead is None else figures.overhead / 1e6}
        span.set_attributes({name: value for name, value in values.items() if value is not None})
        if outcome.record.error is not None or outcome.status >= 400:
            _error(span, outcome.record.error or str(outcome.status), outcome.error or "")
        span.end()

    def attempt(self, coro: Coroutine[Any, Any, T], upstream: Upstream, hedge: bool) -> Coroutine[Any, Any, T]:
        """``coro`` (one upstream attempt) inside a child span whose ``traceparent`` the upstream request carries."""
        from opentelemetry.trace import SpanKind, set_span_in_context

        kind = "hedge" if hedge else "primary" if self.last is None else \
            "retry" if self.last == upstream.name else "fallback"
        if not hedge:
            self.last = upstream.name
        cfg = upstream.cfg
        host, port = _server(cfg.url)
        values: dict[str, Any] = {
            "gen_ai.operation.name": self.operation, "gen_ai.provider.name": _provider(cfg.api),
            "server.address": host, "server.port": port, "tokometer.upstream": upstream.name,
            "tokometer.attempt": kind, "tokometer.segment": self.segment, "tokometer.segment.cause": self.cause,
            "gen_ai.request.model": cfg.model or None}
        span = self.tracer.tracer.start_span(f"{self.operation} {cfg.model or upstream.name}",
                                             context=set_span_in_context(self.span), kind=SpanKind.CLIENT,
                                             attributes={name: value for name, value in values.items()
                                                         if value is not None})
        headers: dict[str, str] = {}
        self.tracer.propagator.inject(headers, context=set_span_in_context(span))
        return _run_attempt(coro, span, headers)

    def carrying_on(self, cause: str) -> None:
        """The answer goes on in a new segment (``cause``: ``resume`` or ``continue``)."""
        self.segment += 1
        self.cause = cause
        self.last = None


async def _run_attempt(coro: Coroutine[Any, Any, T], span: Any, headers: dict[str, str]) -> T:
    """Await one attempt with its trace headers in this task's context; its span ends with a failure here, and
    when the upstream request is released (`Opened.release`) otherwise."""
    import asyncio

    token = _UPSTREAM_HEADERS.set(headers)
    try:
        opened = await coro
    except asyncio.CancelledError:
        span.set_attribute("tokometer.attempt.outcome", "cancelled")
        span.end()
        raise
    except BaseException as exc:
        category = getattr(exc, "category", None)
        _error(span, str(category or type(exc).__qualname__), str(exc)[:300])
        status = getattr(exc, "status", None)
        if isinstance(status, int):
            span.set_attribute("http.response.status_code", status)
        span.end()
        raise
    finally:
        _UPSTREAM_HEADERS.reset(token)
    got: Opened = opened
    if got.first_token_ns is not None and got.call.sent_ns:
        span.set_attribute("gen_ai.response.time_to_first_chunk", (got.first_token_ns - got.call.sent_ns) / 1e9)
    span.set_attribute("http.response.status_code", got.call.status or 200)
    got.span = span
    return opened


def _error(span: Any, error_type: str, detail: str) -> None:
    from opentelemetry.trace import StatusCode

    span.set_attribute("error.type", error_type)
    span.set_status(StatusCode.ERROR, detail)


@functools.lru_cache(maxsize=256)
def _server(url: str) -> tuple[str | None, int]:
    """An upstream URL's ``server.address`` and ``server.port``."""
    parts = urlsplit(url)
    return parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)


@functools.lru_cache(maxsize=64)
def _provider(api: str) -> str:
    """``gen_ai.provider.name`` for an upstream speaking ``api``: who defines the protocol, in lower case (the
    conventions' ``openai`` and ``anthropic``; ``ollama``, ``tgi``, ``llama.cpp`` for the others)."""
    return protocol_named(api).vendor.lower()


# -- the hooks (each a no-op costing one context-variable read when the request is not traced) -------------------
def attempt(coro: Coroutine[Any, Any, T], upstream: Upstream, hedge: bool = False) -> Coroutine[Any, Any, T]:
    """``coro``, one upstream attempt of the request in this task: as it is, or inside its span when traced."""
    trace = _TRACE.get()
    return coro if trace is None else trace.attempt(coro, upstream, hedge)


def upstream_headers() -> dict[str, str] | None:
    """The trace headers the upstream request of this task's attempt carries (None: not traced)."""
    return _UPSTREAM_HEADERS.get()


def carrying_on(cause: str) -> None:
    """The traced request in this task goes on in a new segment (``resume`` or ``continue``)."""
    trace = _TRACE.get()
    if trace is not None:
        trace.carrying_on(cause)


def segment_failed(opened: Opened, failure: UpstreamError) -> None:
    """The segment ``opened`` served failed after its first token: its span says how."""
    if _TRACE.get() is not None and opened.span is not None:
        span = opened.span
        span.set_attribute("tokometer.attempt.outcome", "broke")
        _error(span, failure.category, failure.detail[:300])
