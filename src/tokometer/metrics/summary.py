"""`StepSummary`: aggregates of one load step, from its records.

The measurement window holds every request of the step that is not a warm-up
request; failed requests count (by category) but are kept out of latency
distributions. Each field has a row in the metric registry (`tokometer.metrics.registry`: name, unit,
direction, definition); definitions as in docs/reference/metrics.md:

- duration = max(end_ns) - min(sent_ns) over the window
- output throughput = sum(output_tokens) / duration (input and total likewise)
- request throughput = completed requests / duration
- achieved concurrency = sum(E2E) / duration
- goodput = completed requests meeting every SLO / duration
- completion rate = (completed - 1) / (last end - first end) of completed requests
- TTFT growth = mean TTFT of the last quarter of completed requests (in send order) / that of the first quarter
- overload: whether the server kept up (`tokometer.metrics.overload`)
- percentile intervals: where each latency percentile lies at 95 % (`tokometer.metrics.order_stats`)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from tokometer.metrics import registry
from tokometer.metrics import request as m
from tokometer.metrics.agentic import agent_distribution, agent_stats
from tokometer.metrics.batches import inputs_total
from tokometer.metrics.distribution import Distribution
from tokometer.metrics.images import ImageSummary, summarize_images
from tokometer.metrics.order_stats import intervals
from tokometer.metrics.overload import Overload, overload
from tokometer.metrics.prefix import prefix_split
from tokometer.metrics.probes import ProbeSummary
from tokometer.metrics.promptcache import prompt_cache_hit_rate
from tokometer.metrics.reasoning import ReasoningSummary, summarize_reasoning
from tokometer.metrics.sessions import per_turn, session_stats
from tokometer.metrics.spec_requests import spec_per_request
from tokometer.metrics.textcheck import TextCheck
from tokometer.metrics.toolcalls import ToolCallSummary, summarize_tool_calls
from tokometer.records import RequestRecord

__all__ = ["SLO", "StepSummary", "summarize"]

_MS = 1e-6


@dataclass(frozen=True, slots=True)
class SLO:
    """Service-level objectives for goodput; ``None`` means no limit."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None

    def met(self, r: RequestRecord) -> bool:
        checks = ((self.ttft_ms, m.ttft_ns(r)), (self.tpot_ms, m.tpot_ns(r)), (self.e2e_ms, m.e2e_ns(r)))
        return all(not (limit is not None and (value is None or value * _MS > limit)) for limit, value in checks)

    @property
    def empty(self) -> bool:
        return self.ttft_ms is None and self.tpot_ms is None and self.e2e_ms is None


@dataclass(slots=True)
class StepSummary:
    """Everything a report shows about one load step."""

    requests_completed: int
    requests_failed: int
    requests_warmup: int
    errors: dict[str, int]
    finish_reasons: dict[str, int]
    duration_s: float
    output_throughput_tok_s: float
    input_throughput_tok_s: float
    total_throughput_tok_s: float
    request_throughput_rps: float
    achieved_concurrency: float
    send_rate_rps: float | None
    output_tokens_total: int
    output_tokens_source: dict[str, int]
    input_tokens_total: int
    input_tokens_source: dict[str, int]
    length_truncated: int
    goodput_rps: float | None
    distributions: dict[str, Distribution]
    """Each per-request row of the registry (`tokometer.metrics.registry.distribution_rows`: ``ttft_ms``,
    ``tpot_ms``, ...) as a distribution, by its summary attribute, in registry order; read as attributes
    (``summary.ttft_ms``) and written into the JSON under their own names. A summary read from a file older
    than a metric has no entry for it (its JSON is written again without it) and reads it as empty."""
    error_examples: dict[str, str] = field(default_factory=dict)
    prompt_cache_hit_rate: float | None = None
    """Share of prompt tokens the server said it took from its prompt cache, over the requests whose
    answers say (None: none did)."""
    prompt_cache_reported: int = 0
    """Requests whose answers said how many prompt tokens came from the cache."""
    completion_rate_rps: float | None = None
    """The rate the server finished requests at; under open-loop load, below the send rate means the
    queue grew through the step (None: fewer than two completed)."""
    ttft_growth: float | None = None
    """Mean TTFT of the last quarter of completed requests, in send order, over that of the first quarter:
    well above 1 when each request waited longer than the one before (None: fewer than 8 completed)."""
    overload: Overload | None = None
    """The tests of whether the server kept up with the requests sent (`tokometer.metrics.overload`); None with
    fewer than 8 completed."""
    percentile_ci: dict[str, dict[str, list[float | None]]] | None = None
    """Per latency metric (``ttft_ms``, ``tpot_ms``, ``itl_ms``, ``e2e_ms``), per percentile (``p99``), its 95 %
    distribution-free interval [low, high] from order statistics; None for an end the sample cannot bound
    (`tokometer.metrics.order_stats`)."""
    ttft_cold_prefix_ms: Distribution | None = None
    """TTFT of the requests that were the first with their shared prefix (`tokometer.metrics.prefix`);
    None when the step's prompts shared none."""
    ttft_warm_prefix_ms: Distribution | None = None
    """TTFT of the requests sent after their shared prefix had been prefilled once."""
    prefix_cache_speedup: float | None = None
    """Cold TTFT p50 / warm TTFT p50 (None: no shared prefixes, or no cold or no warm request)."""
    reasoning: ReasoningSummary | None = None
    """Reasoning and answer apart (time to first answer token, token counts, the answer's decode speed);
    None when no completed answer of the step had reasoning (`tokometer.metrics.reasoning`)."""
    tool_calls: ToolCallSummary | None = None
    """Time to first tool call, calls and their tokens; None when no completed answer called a tool
    (`tokometer.metrics.toolcalls`)."""
    images: ImageSummary | None = None
    """Images sent and the image tokens the server reported; None when no request sent one
    (`tokometer.metrics.images`)."""
    speculative: dict[str, Any] | None = None
    """Speculative decoding from the answers' own counts (SGLang's ``meta_info``): acceptance rate, tokens per
    step, per request (`tokometer.metrics.spec_requests`); None when no answer gave them."""
    probe: ProbeSummary | None = None
    """The one-token probes sent beside the step's load (``--probe-rate``), apart from its requests
    (`tokometer.metrics.probes`); None without probes."""

    server_numbers_rejected: int = 0
    """Requests (of the window) with a server count or duration that was not believed
    (`RequestRecord.rejected_numbers`): their counts came from the next source down."""
    server_numbers_example: str = ""
    """One such request's ``rejected_numbers``."""

    per_turn: list[dict[str, Any]] | None = None
    """Multi-turn sessions: per turn, its requests, TTFT, prompt length and prompt-cache share
    (`tokometer.metrics.sessions`); None when the step ran no sessions."""
    session_stats: dict[str, Any] | None = None
    tenants: dict[str, Any] | None = None
    """A tenant mix's step: each tenant's block and the mix's goodput and SLO attainment
    (`tokometer.metrics.tenants`); None without a mix."""
    """Multi-turn sessions: sessions completed and failed, turns and duration per session, TTFT growth from
    the first turn to the last (`tokometer.metrics.sessions`); None when the step ran no sessions."""
    agentic: dict[str, Any] | None = None
    """Agent sessions: per turn (TTFT, decode, tool wait, cache share) and per session (task time, tool wait)
    (`tokometer.metrics.agentic`); None when the step ran no agent sessions."""

    inputs_total: int = 0
    """Batched requests (embeddings, rerank): the inputs the completed ones carried (`tokometer.metrics.batches`)."""
    inputs_per_s: float | None = None
    """``inputs_total`` / duration; None when the step sent no batched request."""

    text_check: TextCheck | None = None
    """Whether each answer's received text adds up to the server's count of its output tokens
    (`tokometer.metrics.textcheck`); None when not checked (no answer had a count from the server, or the
    step was summarised again from the store, which keeps no text)."""

    @property
    def error_rate(self) -> float | None:
        """Failed requests / measured requests (None: none measured)."""
        measured = self.requests_completed + self.requests_failed
        return self.requests_failed / measured if measured else None

    @property
    def probe_ttft_ms(self) -> Distribution:
        """The probes' TTFT (`probe`), empty without probes."""
        return self.probe.ttft_ms if self.probe is not None else Distribution.of(())

    @property
    def goodput_share(self) -> float | None:
        """Goodput as a share of the measured requests (None: no objectives, or nothing measured)."""
        measured = self.requests_completed + self.requests_failed
        if self.goodput_rps is None or not self.duration_s or not measured:
            return None
        return self.goodput_rps * self.duration_s / measured
    steady_state: dict[str, Any] | None = None
    """The step over the window where its load was at its target (`tokometer.metrics.window.steady_state`);
    None for a trace or sessions, whose load has no single target."""
    time_slices: dict[str, Any] | None = None
    """The step per slice of ``bench --time-slice`` (`tokometer.metrics.window.time_slices`); None without."""
    output_throughput_per_gpu_tok_s: float | None = None
    """``output_throughput_tok_s`` / the GPUs that served the run (``bench --gpus``, else the vLLM or SGLang
    command line: `tokometer.gpu_count.gpu_count`); None when that is not known."""

    def __getattr__(self, name: str) -> Distribution:
        """A per-request row's distribution by its attribute (``ttft_ms``): `distributions`."""
        if name.startswith("__") or name == "distributions":
            raise AttributeError(name)
        found = self.distributions.get(name)
        if found is not None:
            return found
        if any((row.attribute or row.name) == name for row in registry.distribution_rows()):
            return Distribution.of(())  # a summary read from a file older than the metric
        raise AttributeError(f"StepSummary has no {name!r}")

    @classmethod
    def json_keys(cls) -> list[str]:
        """The names of a summary's JSON (before ``output_tokens`` and ``input_tokens`` are nested): its fields
        and its distributions."""
        names = [f.name for f in fields(cls) if f.name != "distributions"]
        return names + [row.attribute or row.name for row in registry.distribution_rows()]

    @property
    def agentic_task_s(self) -> Distribution:
        """Agent sessions' end-to-end task times (empty without agent sessions): a CSV column's source."""
        return agent_distribution(self.agentic, "task_s")

    @property
    def agentic_tool_wait_s(self) -> Distribution:
        """Agent sessions' time waiting on tools (empty without agent sessions): a CSV column's source."""
        return agent_distribution(self.agentic, "tool_wait_s")

    def naive_line(self) -> str:
        """The naive view: what a simple timing script prints (elapsed time, generated tokens, their average
        tok/s), which mixes TTFT, network and decode; labelled as such where shown."""
        return (
            f"elapsed {self.duration_s:.2f}s, generated tokens {self.output_tokens_total}, "
            f"average {self.output_throughput_tok_s:.2f} token/s"
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            if name == "distributions":
                out.update((key, d.to_json()) for key, d in self.distributions.items())
                continue
            value = getattr(self, name)
            typed = isinstance(value, (Distribution, ReasoningSummary, TextCheck, Overload, ToolCallSummary,
                                       ImageSummary, ProbeSummary))
            out[name] = value.to_json() if typed else value
        tokens = out.pop("output_tokens")
        out["output_tokens"] = {
            "total": self.output_tokens_total,
            "source": self.output_tokens_source,
            "per_request": tokens,
            "text_check": out.pop("text_check"),
        }
        in_tokens = out.pop("input_tokens")
        out["input_tokens"] = {
            "total": self.input_tokens_total,
            "source": self.input_tokens_source,
            "per_request": in_tokens,
        }
        for name in ("output_tokens_total", "output_tokens_source", "input_tokens_total", "input_tokens_source"):
            out.pop(name)
        out["naive_summary"] = self.naive_line()
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StepSummary:
        """The summary `to_json` wrote: in ``bench --json``'s steps and in the store's ``summary`` column alike.

        ``StepSummary.from_json(s.to_json()) == s``. A file older than a metric reads without it: a distribution
        as empty, a count as 0, a rate as None, a table as empty; keys this version does not know are dropped."""
        flat = dict(data)
        flat.pop("naive_summary", None)
        for name in ("output_tokens", "input_tokens"):
            tokens = flat.pop(name, None) or {}
            flat[f"{name}_total"] = tokens.get("total", 0)
            flat[f"{name}_source"] = dict(tokens.get("source") or {})
            flat[name] = tokens.get("per_request")
            if name == "output_tokens":
                flat["text_check"] = tokens.get("text_check")
        values: dict[str, Any] = {"distributions": {
            key: Distribution.from_json(flat[key]) for key in (row.attribute or row.name
                                                               for row in registry.distribution_rows()) if key in flat}}
        for f in fields(cls):
            value = flat.get(f.name)
            kind = str(f.type)
            if f.name == "distributions":
                continue
            if kind.startswith("Distribution"):
                values[f.name] = Distribution.from_json(value) if value is not None or "None" not in kind else None
            elif f.name == "reasoning":
                values[f.name] = ReasoningSummary.from_json(value) if value is not None else None
            elif f.name == "overload":
                values[f.name] = Overload.from_json(value)
            elif f.name in _PARTS:
                values[f.name] = _PARTS[f.name](value) if value is not None else None
            elif f.name == "text_check":
                values[f.name] = TextCheck.from_json(value) if value is not None else None
            elif value is not None:
                values[f.name] = float(value) if kind.startswith("float") else value
            elif f.default is not MISSING or f.default_factory is not MISSING:
                continue
            else:
                values[f.name] = _absent(kind)
        return cls(**values)


_PARTS: dict[str, Any] = {"tool_calls": ToolCallSummary.from_json, "images": ImageSummary.from_json,
                          "probe": ProbeSummary.from_json}
"""The step summary's optional parts read back by their own ``from_json``."""


def _absent(kind: str) -> Any:
    """What a required field of type ``kind`` reads as when an old file lacks it."""
    if "None" in kind:
        return None
    if kind.startswith("dict"):
        return {}
    return 0.0 if kind == "float" else 0


def _values(records: Sequence[RequestRecord], fn: Any) -> list[float]:
    return [v for v in (fn(r) for r in records) if v is not None]


def row_values(row: registry.Metric, records: Sequence[RequestRecord]) -> list[float]:
    """A per-request row's values over ``records`` (unscaled): its value of each (None left out), or each's
    gaps pooled in order."""
    if row.per_request is not None:
        return _values(records, row.per_request)
    return [v for r in records for v in row.per_gap(r)] if row.per_gap is not None else []


def _distributions(ok: Sequence[RequestRecord],
                   window: Sequence[RequestRecord]) -> tuple[dict[str, Distribution], dict[str, Any]]:
    """Each per-request row's distribution by attribute, and the 95 % intervals of the percentiles of those an
    objective may name (``percentile_ci``)."""
    out: dict[str, Distribution] = {}
    ci: dict[str, Any] = {}
    for row in registry.distribution_rows():
        values = row_values(row, window if row.population == "measured" else ok)
        out[row.attribute or row.name] = Distribution.of(values, row.scale)
        if row.percentiles:
            ci[row.name] = intervals(values, row.scale)
    return out, ci


def _errors(failed: Sequence[RequestRecord]) -> dict[str, Any]:
    """The failed requests by category, and one message of each."""
    errors = Counter(r.error for r in failed if r.error)
    examples: dict[str, str] = {}
    for r in failed:
        if r.error and r.error not in examples:
            examples[r.error] = r.error_detail
    return {"errors": dict(sorted(errors.items())), "error_examples": examples}


def _send_rate(window: Sequence[RequestRecord]) -> float | None:
    sends = sorted(r.sent_ns for r in window)
    return (len(sends) - 1) / ((sends[-1] - sends[0]) / 1e9) if len(sends) > 1 and sends[-1] > sends[0] else None


def _tokens(ok: Sequence[RequestRecord], duration_s: float) -> dict[str, Any]:
    """Token totals, their sources and the throughputs over ``duration_s``."""
    out_total = sum(r.output_tokens or 0 for r in ok)
    in_total = sum(r.input_tokens or 0 for r in ok)
    return {"output_throughput_tok_s": _per_s(out_total, duration_s),
            "input_throughput_tok_s": _per_s(in_total, duration_s),
            "total_throughput_tok_s": _per_s(out_total + in_total, duration_s),
            "output_tokens_total": out_total,
            "output_tokens_source": dict(Counter(r.output_tokens_source for r in ok if r.output_tokens_source)),
            "input_tokens_total": in_total,
            "input_tokens_source": dict(Counter(r.input_tokens_source for r in ok if r.input_tokens_source))}


def _per_s(x: float, duration_s: float) -> float:
    return x / duration_s if duration_s > 0 else 0.0


def _parts(records: Sequence[RequestRecord], window: Sequence[RequestRecord],
           ok: Sequence[RequestRecord]) -> dict[str, Any]:
    """The summary's optional parts: sessions, reasoning, tool calls, images, rejected server numbers, the
    prefix cache's effect."""
    return {"per_turn": per_turn(records), "session_stats": session_stats(records), "agentic": agent_stats(records),
            "reasoning": summarize_reasoning(ok), "tool_calls": summarize_tool_calls(ok),
            "images": summarize_images(ok), "speculative": spec_per_request(ok),
            "server_numbers_rejected": sum(1 for r in window if r.rejected_numbers),
            "server_numbers_example": next((r.rejected_numbers for r in window if r.rejected_numbers), ""),
            **_prefix_effect(window)}


def summarize(records: Sequence[RequestRecord], slo: SLO | None = None) -> StepSummary:
    """Aggregate one step's records (warm-up requests are counted, then left out); each per-request row of
    the registry becomes a distribution (`tokometer.metrics.registry.distribution_rows`)."""
    window = [r for r in records if not r.warmup and r.sent_ns]
    ok = [r for r in window if r.ok]
    duration_s = ((max(r.end_ns for r in window) - min(r.sent_ns for r in window)) if window else 0) / 1e9
    send_rate, completion_rate = _send_rate(window), _completion_rate(ok)
    distributions, ci = _distributions(ok, window)
    inputs = inputs_total(ok)
    return StepSummary(
        requests_completed=len(ok),
        requests_failed=len(window) - len(ok),
        requests_warmup=sum(1 for r in records if r.warmup),
        finish_reasons=dict(sorted(Counter(r.finish_reason or "unknown" for r in window).items())),
        duration_s=duration_s,
        request_throughput_rps=_per_s(len(ok), duration_s),
        achieved_concurrency=_per_s(sum(r.end_ns - r.sent_ns for r in window) / 1e9, duration_s),
        send_rate_rps=send_rate,
        length_truncated=sum(1 for r in ok if r.finish_reason == "length"),
        goodput_rps=(_per_s(sum(1 for r in ok if slo.met(r)), duration_s)
                     if slo is not None and not slo.empty else None),
        distributions=distributions,
        prompt_cache_hit_rate=prompt_cache_hit_rate(ok),
        prompt_cache_reported=sum(1 for r in ok if r.server is not None and r.server.cached_tokens is not None),
        completion_rate_rps=completion_rate,
        ttft_growth=_ttft_growth(ok),
        overload=overload(window, send_rate, completion_rate),
        percentile_ci=ci,
        inputs_total=inputs,
        inputs_per_s=_per_s(inputs, duration_s) if any(r.inputs is not None for r in window) else None,
        **_errors([r for r in window if not r.ok]),
        **_tokens(ok, duration_s),
        **_parts(records, window, ok),
    )


def _prefix_effect(window: Sequence[RequestRecord]) -> dict[str, Any]:
    cold, warm = prefix_split(window)
    if not cold and not warm:
        return {}
    cold_ttft = Distribution.of(_values(cold, m.ttft_ns), _MS)
    warm_ttft = Distribution.of(_values(warm, m.ttft_ns), _MS)
    speedup = cold_ttft.p50 / warm_ttft.p50 if cold_ttft.p50 and warm_ttft.p50 else None
    return {"ttft_cold_prefix_ms": cold_ttft, "ttft_warm_prefix_ms": warm_ttft, "prefix_cache_speedup": speedup}


def _completion_rate(ok: Sequence[RequestRecord]) -> float | None:
    ends = sorted(r.end_ns for r in ok)
    if len(ends) < 2 or ends[-1] <= ends[0]:
        return None
    return (len(ends) - 1) / ((ends[-1] - ends[0]) / 1e9)


def _ttft_growth(ok: Sequence[RequestRecord]) -> float | None:
    timed = sorted((r.sent_ns, m.ttft_ns(r) or 0) for r in ok if m.ttft_ns(r) is not None)
    ttfts = [t for _, t in timed]
    if len(ttfts) < 8:
        return None
    quarter = len(ttfts) // 4
    first, last = sum(ttfts[:quarter]) / quarter, sum(ttfts[-quarter:]) / quarter
    return last / first if first > 0 else None
