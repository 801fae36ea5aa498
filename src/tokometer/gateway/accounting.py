"""Accounting for one relayed request, concern by concern: health, metrics, the log line, the cache.

`Figures.of` reads a `RelayOutcome` once: every latency and token figure is
`tokometer.metrics.request`'s, of the record the relay filled. Then each concern is a function of
the outcome and its figures: `feed_health` (the router's view of the upstream), `observe` (the
Prometheus series), `log_entry` (the request log's line), `cached_answer` (what the answer cache
keeps, if anything). The gateway (`Gateway.finish`) calls them in that order and charges the key's
budget. A cached answer replayed is logged by `replay_entry`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tokometer.gateway.cache import CachedAnswer
from tokometer.gateway.requestlog import RequestLogEntry, cost_usd
from tokometer.metrics.request import decode_speed_tok_s, tpot_ns, ttft_ns
from tokometer.protocols.gateway_clients import api_name

if TYPE_CHECKING:
    from tokometer.gateway.outcome import RelayContext, RelayOutcome
    from tokometer.gateway.prometheus import GatewayMetrics
    from tokometer.gateway.router import Router

__all__ = ["Figures", "cached_answer", "feed_health", "log_entry", "observe", "replay_entry"]


@dataclass(frozen=True, slots=True)
class Figures:
    """One relayed request's figures (times in ns; None: not measured)."""

    ttft: int | None
    tpot: float | None
    e2e: int
    upstream_ttft: int | None
    """The upstream's own TTFT: `ttft_ns` of the record as if sent when the upstream request was."""
    overhead: int | None
    """The gateway's own time on the first token: before the upstream request, and after its first token reached
    the gateway until it reached the client; for a non-streamed answer, after the upstream's whole answer arrived
    (the client can have nothing sooner: the upstream's decode is the upstream's time, not the gateway's)."""
    prompt: int | None
    completion: int | None
    cost: float | None

    @classmethod
    def of(cls, outcome: RelayOutcome) -> Figures:
        record, upstream_sent = outcome.record, outcome.upstream_sent_ns
        ttft, tpot = ttft_ns(record), tpot_ns(record)
        upstream_ttft = None if ttft is None or not upstream_sent else ttft + record.sent_ns - upstream_sent
        overhead = None
        answered = record.first_token_ns if outcome.ctx.stream else outcome.upstream_done_ns
        if upstream_sent and answered and outcome.first_sent_ns and outcome.hedge != "hedge":
            overhead = (upstream_sent - record.sent_ns) + (outcome.first_sent_ns - answered)
        prompt, completion = outcome.answer.prompt_tokens or outcome.ctx.prompt_tokens, record.output_tokens
        upstream = outcome.upstream
        cost = cost_usd(upstream.cfg, prompt or 0, completion or 0) if upstream is not None else None
        return cls(ttft, tpot, record.end_ns - record.sent_ns, upstream_ttft, overhead, prompt, completion, cost)


def feed_health(router: Router, outcome: RelayOutcome, figures: Figures) -> None:
    """A successful answer's upstream TTFT and TPOT go into its upstream's health window."""
    upstream = outcome.upstream
    if upstream is not None and outcome.record.ok and not outcome.served_by:  # a resumed answer's TPOT is no one's
        upstream_ttft, tpot = figures.upstream_ttft, figures.tpot
        router.health[upstream.name].success(None if upstream_ttft is None else upstream_ttft / 1e6,
                                             None if tpot is None else tpot / 1e6)


def observe(metrics: GatewayMetrics, outcome: RelayOutcome, figures: Figures) -> None:
    """The request in its route's and upstream's Prometheus series."""
    upstream = outcome.upstream
    series = metrics.series(outcome.ctx.route.model, upstream.name if upstream is not None else "none")
    series.observe_record(outcome.record)
    series.request(outcome.status)
    series.observe("duration", figures.e2e / 1e9)
    if figures.prompt:
        series.add("input", figures.prompt)
    if figures.completion:
        series.add("output", figures.completion)
    if figures.cost:
        series.add("cost", figures.cost)
    if figures.overhead is not None:
        series.observe("overhead", figures.overhead / 1e9)


def log_entry(outcome: RelayOutcome, figures: Figures) -> RequestLogEntry:
    """The request log's line of a relayed request."""
    ctx, upstream = outcome.ctx, outcome.upstream
    return RequestLogEntry(key=ctx.key, route=ctx.route.model, upstream=upstream.name if upstream else None,
                           model_served=outcome.answer.model or None, status=outcome.status,
                           prompt_tokens=figures.prompt, completion_tokens=figures.completion, cost_usd=figures.cost,
                           ttft_ms=_ms(figures.ttft), tpot_ms=_ms(figures.tpot),
                           decode_tok_s=decode_speed_tok_s(outcome.record), e2e_ms=figures.e2e / 1e6, cache_hit=False,
                           fallback=outcome.fallback, retries=outcome.retries, error=outcome.error,
                           upstream_ttft_ms=_ms(figures.upstream_ttft), overhead_ms=_ms(figures.overhead),
                           hedge=outcome.hedge, resumes=max(0, len(outcome.served_by) - 1),
                           served_by=list(outcome.served_by) or None, api=api_name(ctx.api, ctx.endpoint))


def replay_entry(ctx: RelayContext, hit: CachedAnswer) -> RequestLogEntry:
    """The request log's line of an answer replayed from the cache."""
    return RequestLogEntry(key=ctx.key, route=ctx.route.model, upstream=hit.served_by, model_served=hit.model,
                           status=200, prompt_tokens=hit.prompt_tokens, completion_tokens=hit.completion_tokens,
                           cost_usd=0.0, ttft_ms=None, decode_tok_s=None,
                           e2e_ms=(time.perf_counter_ns() - ctx.received_ns) / 1e6, cache_hit=True, fallback=False,
                           retries=0, error=None, api=api_name(ctx.api, ctx.endpoint))


def cached_answer(outcome: RelayOutcome, figures: Figures) -> CachedAnswer | None:
    """What the cache keeps of a complete answer (None: nothing: it failed, was cut, or called a tool; the
    cache keeps text)."""
    answer, upstream = outcome.answer, outcome.upstream
    complete = outcome.status == 200 and outcome.error is None and answer.finish_reason is not None \
        and not answer.cut and not answer.has_tool_calls
    if not complete or upstream is None:
        return None
    return CachedAnswer(model=answer.model, text=answer.text, finish_reason=answer.finish_reason or "stop",
                        prompt_tokens=figures.prompt or 0, completion_tokens=figures.completion or 0,
                        served_by=upstream.name, created=int(time.time()), reasoning=answer.reasoning)


def _ms(ns: float | None) -> float | None:
    return None if ns is None else ns / 1e6
