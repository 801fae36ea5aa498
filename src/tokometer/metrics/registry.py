"""The metric registry: every name a step's summary has, once, as plain data.

One row per metric (`Metric`): its name, unit, direction, one-line definition, and which of its percentiles
an objective or a gate may name. Everything that spells a metric's name reads it from here:

- `tokometer.metrics.DEFINITIONS`, the ``definitions`` block of every JSON result (`definitions`);
- ``compare``'s metric table (`tokometer.compare.gate.gate_metrics`: each row's ``gate`` percentiles and thresholds,
  then the gate's own metrics of a step as a whole; names, labels, units and directions come from here);
- ``bench --find-max``'s objectives (`objective`: ``ttft_p99``, ``goodput_share``, ``error_rate``);
- the CSV's columns (`csv_columns`, in registry order).

**Per-request rows.** A row with a per-request function (``per_request``: a request record to its value, or
None; ``per_gap``: to the values of its gaps, as ITL) is aggregated by the registry's readers alone: the step's
summary holds its distribution (`tokometer.metrics.summarize`, over the completed requests or, ``population``
``measured``, every measured one), with its 95 % percentile intervals where an objective may name a percentile;
``window`` puts it in each time slice and steady state (`tokometer.metrics.window`) and their CSV rows;
``gate`` makes ``compare`` judge those percentiles at those thresholds; ``heading`` names its line in the
console's step table (`tokometer.report.tables.STEP_TABLE` lists the rows shown); ``prometheus`` gives it a
histogram of the gateway's. Adding such a metric is one row and its
function.

`StepSummary`'s fields and this table are held against each other by a unit test
(tests/unit/metrics/test_registry.py): a summary field without a row here, or a row naming no field or
property of the summary, fails it.

**Names.** ``name`` is the key a JSON result uses (``output_tokens.source`` for the nested ones);
``field`` the `StepSummary` attribute that holds it (``output_tokens_source``). ``short`` is the name an
objective (``--slo``) or a threshold (``compare --threshold``) takes: a percentile is ``short`` + ``_p99``.
Each short name has one unit: ``goodput`` is req/s (`goodput_rps`), ``goodput_share`` the share of the
measured requests that met every per-request objective, ``error_rate`` the share that failed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Final, Literal

from tokometer.metrics import request as m
from tokometer.metrics.textcheck import SLACK, TOLERANCE
from tokometer.records import RequestRecord

__all__ = [
    "LATENCY_PERCENTILES",
    "METRICS",
    "NOTES",
    "Aggregate",
    "Direction",
    "Metric",
    "by_name",
    "csv_columns",
    "definitions",
    "distribution_rows",
    "gate_rows",
    "objective",
    "percentile_metrics",
    "prometheus_rows",
    "rows",
    "using",
    "window_rows",
]

Direction = Literal["lower", "higher"]
Aggregate = Literal["distribution", "gaps", "step"]
"""How a row is aggregated over a step: the distribution of its per-request values, the distribution of every
request's gaps pooled, or by the summary from the step as a whole (a count, a rate, a table)."""

LATENCY_PERCENTILES: Final[tuple[str, ...]] = ("p50", "p90", "p95", "p99", "p99.9")
"""The percentiles an objective or a threshold may name (a `Distribution` has each)."""


@dataclass(frozen=True, slots=True)
class Metric:
    """One metric of a step's summary."""

    name: str
    """The key in a JSON result: ``ttft_ms``; a nested one with a dot: ``output_tokens.source``."""
    definition: str
    """One line, written into every JSON result's ``definitions``."""
    unit: str = ""
    """``ms``, ``s``, ``tok/s``, ``req/s``, ``tokens``, ``requests``, ``share`` (0 to 1), ``ratio``; empty for
    a table or a text."""
    better: Direction | None = None
    """Which way is better; None where neither is (a count, a table)."""
    field: str | None = ""
    """The `StepSummary` field or property that holds it ("": the same as ``name``; None: inside another
    field, as the ``reasoning.`` rows are)."""
    label: str = ""
    """How a table heads it: ``TTFT``."""
    short: str = ""
    """The name objectives and thresholds take (``ttft``: ``ttft_p99``); empty when none does."""
    percentiles: tuple[str, ...] = ()
    """A distribution's percentiles an objective or a threshold may name (``ttft_p99``)."""
    csv: tuple[str, ...] = ()
    """Its columns in the CSV: ``""`` for the value itself, or the distribution's statistics (``p50``,
    ``mean``); none: not in the CSV."""
    per_request: Callable[[RequestRecord], float | None] | None = None
    """From one request record to its value (times the row's ``scale``), None where undefined for it."""
    per_gap: Callable[[RequestRecord], Sequence[float]] | None = None
    """From one request record to the values of its gaps (ITL), pooled over the step's requests."""
    scale: float = 1.0
    """What a per-request value is multiplied by for the row's unit (1e-6: ns to ms)."""
    population: Literal["completed", "measured"] = "completed"
    """Whose values a per-request row's distribution holds: the completed requests, or every measured one."""
    window: bool = False
    """A distribution each time slice and steady state has (and their CSV rows)."""
    gate: tuple[tuple[str, float], ...] = ()
    """The percentiles ``compare`` judges, each with its default threshold (relative: 0.05 = 5 %)."""
    heading: str = ""
    """Its line in the console's step table, unit included: ``TTFT (ms)``."""
    digits: int = 1
    """Decimals a table shows it with."""
    prometheus: tuple[str, ...] = ()
    """The gateway's histogram of it (in seconds): its name and help text; empty when none."""

    @property
    def attribute(self) -> str | None:
        """The `StepSummary` attribute that holds it (None: inside another one)."""
        return self.name if self.field == "" else self.field

    @property
    def aggregate(self) -> Aggregate:
        """How the row is aggregated over a step (`Aggregate`)."""
        if self.per_request is not None:
            return "distribution"
        return "gaps" if self.per_gap is not None else "step"


_LATENCY = LATENCY_PERCENTILES
_MS = 1e-6

METRICS: Final[tuple[Metric, ...]] = (
    # -- what happened to the requests
    Metric("requests_completed", "measured requests that completed (warm-up requests left out)", "requests",
           csv=("",)),
    Metric("requests_failed", "measured requests that failed, whatever the category", "requests", csv=("",)),
    Metric("requests_warmup", "warm-up requests: sent, counted here, and left out of every other figure",
           "requests"),
    Metric("errors", "failed requests by category (http_429, reset, timeout, ...): a table of counts"),
    Metric("error_examples", "one error message per category, as the first failed request of it gave"),
    Metric("error_rate", "failed requests / measured requests (a share; compare judges its change in points)",
           "share", "lower", label="error rate", short="error_rate"),
    Metric("finish_reasons", "measured requests by finish reason (stop, length, error, cancelled, unknown)"),
    Metric("length_truncated", "completed requests that ended at max_tokens (finish reason length)", "requests"),
    # -- the step as a whole
    Metric("duration_s", "max(end) - min(sent) over the measured requests (warm-up excluded)", "s", csv=("",)),
    Metric("output_throughput_tok_s", "sum of output tokens of completed requests / duration", "tok/s", "higher",
           label="output throughput", short="output_throughput", csv=("",)),
    Metric("output_throughput_per_gpu_tok_s", "output_throughput_tok_s / the GPUs that served the run (bench "
           "--gpus, else the vLLM or SGLang command line tokometer started); null when not known", "tok/s",
           "higher"),
    Metric("input_throughput_tok_s", "sum of input tokens of completed requests / duration", "tok/s"),
    Metric("total_throughput_tok_s", "sum of input and output tokens of completed requests / duration", "tok/s"),
    Metric("request_throughput_rps", "completed requests / duration", "req/s", "higher", csv=("",)),
    Metric("achieved_concurrency", "sum of E2E of measured requests / duration", "requests", csv=("",)),
    Metric("send_rate_rps", "(requests sent - 1) / (last send - first send): the offered load actually achieved",
           "req/s"),
    Metric("completion_rate_rps", "(completed requests - 1) / (last end - first end): the rate the server "
           "finished requests; under a request rate, below send_rate_rps means the queue grew through the step",
           "req/s"),
    Metric("goodput_rps", "completed requests meeting every given SLO / duration", "req/s", "higher",
           label="goodput", short="goodput"),
    Metric("goodput_share", "completed requests meeting every given SLO / measured requests: goodput as a share "
           "(the --find-max objective goodput_share)", "share", "higher", label="goodput share",
           short="goodput_share"),
    # -- per request, as distributions (in the order a summary's JSON has them)
    Metric("ttft_ms", "time to first token: first event carrying generated text (or reasoning text) minus the "
           "time the request was sent; role-only, empty and usage-only events do not count", "ms", "lower",
           label="TTFT", short="ttft", percentiles=_LATENCY, csv=("p50", "p90", "p99"), per_request=m.ttft_ns,
           scale=_MS, window=True, gate=(("p50", 0.05), ("p99", 0.10)), heading="TTFT (ms)",
           prometheus=("gen_ai_server_time_to_first_token_seconds",
                       "Time to first token, from the gateway receiving the request.")),
    Metric("ttst_ms", "time to second token: the arrival of the content event that brought the second streamed "
           "token (reasoning and tool-call tokens count, as for TTFT) minus the time the request was sent; equals "
           "TTFT when the first event carried two tokens or more, else TTFT plus the first chunk gap (TTFT + ITL "
           "when both events carried one token); left out for an answer of fewer than two streamed tokens", "ms",
           "lower", label="TTST", short="ttst", percentiles=_LATENCY, csv=("p50", "p99"), per_request=m.ttst_ns,
           scale=_MS, window=True, gate=(("p50", 0.05), ("p99", 0.10)), heading="TTST (ms)",
           prometheus=("tokometer_gateway_time_to_second_token_seconds",
                       "Time to second token, from the gateway receiving the request.")),
    Metric("ttft_from_due_ms", "first token minus the time the load profile scheduled the request (includes "
           "client lag)", "ms", "lower", per_request=m.ttft_from_due_ns, scale=_MS),
    Metric("tpot_ms", "decode time per output token: (last token time - first token time) / (output tokens - "
           "tokens of the first event); equals (last - first) / (output_tokens - 1) when the first event carries "
           "one token; tokens the server counted but never streamed (hidden reasoning) are left out", "ms",
           "lower", label="TPOT", short="tpot", percentiles=_LATENCY, csv=("p50", "p99"), per_request=m.tpot_ns,
           scale=_MS, window=True, gate=(("p50", 0.05), ("p99", 0.10)), heading="TPOT (ms)", digits=3,
           prometheus=("gen_ai_server_time_per_output_token_seconds", "Decode time per output token.")),
    Metric("itl_ms", "inter-token latency: each gap between consecutive content events divided by the tokens the "
           "later event carried (token-normalised)", "ms", "lower", label="ITL", short="itl",
           percentiles=_LATENCY, csv=("p50", "p99"), per_gap=m.itl_ns, scale=_MS, window=True,
           gate=(("p50", 0.05),), heading="ITL (ms)", digits=3),
    Metric("chunk_gap_ms", "raw gaps between consecutive content events, not normalised", "ms", "lower",
           per_gap=m.chunk_gaps_ns, scale=_MS),
    Metric("e2e_ms", "end-to-end latency: stream closed minus request sent", "ms", "lower", label="E2E",
           short="e2e", percentiles=_LATENCY, csv=("p50", "p99"), per_request=m.e2e_ns, scale=_MS, window=True,
           gate=(("p50", 0.05), ("p99", 0.10)), heading="E2E latency (ms)"),
    Metric("decode_speed_tok_s", "1 / TPOT per request: the steady decode-phase speed (tokens/s once the answer "
           "streams); TPOT and decode speed count reasoning and answer tokens alike, as far as they were streamed",
           "tok/s", "higher", label="decode speed", csv=("p50", "mean"), per_request=m.decode_speed_tok_s,
           heading="decode speed (tok/s/request)"),
    Metric("e2e_speed_tok_s", "output tokens / E2E per request: the naive average speed, a whole request's time "
           "over its tokens (mixes network, TTFT and decode)", "tok/s", "higher", per_request=m.e2e_speed_tok_s),
    Metric("prefill_speed_tok_s", "input tokens / TTFT per request as the client sees it (includes queueing and "
           "network)", "tok/s", "higher", per_request=m.prefill_speed_tok_s,
           heading="prefill speed, client view (tok/s)"),
    Metric("client_lag_ms", "time the request was sent minus the time it was scheduled; > 0 means the client fell "
           "behind", "ms", "lower", label="client lag", csv=("p99",), per_request=m.client_lag_ns, scale=_MS,
           population="measured", heading="client lag (ms)", digits=3),
    Metric("connect_ms", "time spent opening new connections (requests that reused a kept-alive connection are "
           "not in it)", "ms", "lower", per_request=m.connect_ns, scale=_MS, population="measured"),
    Metric("output_tokens.total", "sum of output tokens of the completed requests", "tokens",
           field="output_tokens_total", csv=("",)),
    Metric("output_tokens.source", "where output token counts came from: usage (server usage block), native "
           "(engine counters), tokenizer, estimate (count of content events)", field="output_tokens_source",
           csv=("",)),
    Metric("output_tokens.per_request", "output tokens per completed request, as a distribution", "tokens",
           field="output_tokens", per_request=m.output_count, heading="output tokens"),
    Metric("output_tokens.text_check", "per completed answer whose output count is the server's (usage, "
           "native): the text received (answer and reasoning fields) counted by the model's tokenizer where one "
           "is local, else its UTF-8 bytes (an upper bound: a token is at least one byte); an answer is short "
           "when the server's count (less reasoning it did not send) exceeds that by more than "
           f"max({SLACK} tokens, {TOLERANCE:.0%}); null when not checked", field="text_check"),
    Metric("input_tokens.total", "sum of input (prompt) tokens of the completed requests", "tokens",
           field="input_tokens_total"),
    Metric("input_tokens.source", "where input token counts came from: usage (server usage block), native "
           "(engine counters), prompt_spec (the length the prompt was built to)", field="input_tokens_source"),
    Metric("input_tokens.per_request", "input tokens per completed request, as a distribution", "tokens",
           field="input_tokens", per_request=m.input_count),
    Metric("server_prefill_ms", "the engine's own prompt-processing time, where the protocol reports it", "ms",
           "lower", per_request=m.server_prefill_ms, heading="server prefill (ms)"),
    Metric("server_decode_tok_s", "the engine's own decode speed, where the protocol reports it", "tok/s",
           "higher", per_request=m.server_decode_tok_s, heading="server decode (tok/s)"),
    # -- queueing, caches, the server's own numbers
    Metric("ttft_growth", "mean TTFT of the last quarter of completed requests (in send order) / mean TTFT of "
           "the first quarter: well above 1 when requests waited longer as the step went on (a growing queue)",
           "ratio", "lower"),
    Metric("ttft_cold_prefix_ms", "TTFT of the requests that were the run's first with their shared prefix "
           "(--prefix-groups): nothing can have cached it", "ms", "lower"),
    Metric("ttft_warm_prefix_ms", "TTFT of the requests sent after an earlier request with the same prefix had "
           "its first token (its prefill, the prefix's included, was done)", "ms", "lower"),
    Metric("prefix_cache_speedup", "ttft_cold_prefix_ms p50 / ttft_warm_prefix_ms p50: about 1 without a prefix "
           "cache", "ratio", "higher"),
    Metric("prompt_cache_hit_rate", "sum of prompt tokens the server said came from its prompt cache / sum of "
           "prompt tokens, over the prompt_cache_reported answers that said; null when none did", "share"),
    Metric("prompt_cache_reported", "completed answers that said how many prompt tokens came from the cache",
           "requests"),
    Metric("server_numbers_rejected", "measured requests with a server count or duration that was not believed: "
           "their counts came from the next source down", "requests"),
    Metric("server_numbers_example", "one such request's rejected numbers, in words"),
    # -- multi-turn sessions
    Metric("per_turn", "multi-turn sessions, per turn: its requests, TTFT, prompt length and prompt-cache share; "
           "null without sessions"),
    Metric("session_stats", "multi-turn sessions: sessions completed and failed, turns and duration per "
           "session, session throughput, TTFT growth from the first turn to the last; null without sessions"),
    Metric("agentic", "agent sessions (bench --agents): per turn TTFT, decode, tool wait, prompt length and "
           "prompt-cache share; per session task time (start to the last token), tool wait, time in requests; "
           "null without agent sessions"),
    Metric("agentic_task_s", "agent sessions: end-to-end task time, the session's start to its last token",
           "s", "lower", label="agent task time", csv=("p50", "p99")),
    Metric("agentic_tool_wait_s", "agent sessions: time with no request of the session in flight (waiting on "
           "tools)", "s", label="agent tool wait", csv=("p50",)),
    # -- tenant mixes
    Metric("tenants", "tenant mixes (bench --mix): each tenant's requests and share of the step's, its TTFT, TPOT, "
           "ITL and E2E, output tokens and requests a second over the step's duration, and against its own SLO its "
           "goodput and SLO attainment (requests meeting it / its measured requests); then the mix's goodput and "
           "attainment; null without a mix"),
    # -- reasoning models
    Metric("reasoning", "reasoning models only (null when no answer of the step had reasoning): reasoning sent in "
           "reasoning_content / reasoning deltas (Ollama: thinking) or inline between <think> and </think>"),
    Metric("reasoning.ttfat_ms", "time to first answer token: the first event carrying answer text that is not "
           "only whitespace (not reasoning, not a think tag) minus the time the request was sent; equals TTFT for "
           "an answer without reasoning; answers that never got past their reasoning are left out (counted in "
           "no_answer)", "ms", "lower", field=None),
    Metric("reasoning.reasoning_tokens", "output tokens that were reasoning, per answer that reasoned: usage "
           "(usage.completion_tokens_details.reasoning_tokens), native (tokens of the reasoning events where each "
           "event's count is exact), tokenizer (the model's tokenizer on the reasoning text), estimate (each "
           "event's share of the output by characters); an answer cut while reasoning was all reasoning; hidden: "
           "those the server counted but never streamed (o-series APIs), kept out of TPOT, ITL and decode speed",
           "tokens", field=None),
    Metric("reasoning.answer_tokens", "output tokens - reasoning tokens, per completed answer", "tokens",
           field=None),
    Metric("reasoning.reasoning_share", "sum of reasoning tokens / sum of output tokens of the completed answers",
           "share", field=None),
    Metric("reasoning.answer_decode_speed_tok_s", "decode speed of the answer alone: tokens of the events after "
           "the first answer event / (last token time - first answer token time)", "tok/s", "higher", field=None),
    # -- did the server keep up (find-max's overload test) and how sure is each percentile
    Metric("overload", "whether the server kept up with the requests sent: queue_grew when the 99 % lower bound of "
           "the Theil-Sen slope of TTFT (E2E without streaming) against send time is above zero (Mann-Kendall, "
           "one-sided, alpha 1 %); fell_behind when the completions over their span against the sends over theirs, "
           "as two Poisson counts, have an exact conditional binomial p below 1 %; sustained_rps = send rate / "
           "(1 + slope)"),
    Metric("percentile_ci", "per latency metric and percentile, its 95 % distribution-free interval [low, high]: "
           "the order statistics whose ranks bracket the percentile by the binomial distribution; null for an end "
           "the sample cannot bound (a p99 needs 368 values for an upper end)"),
    # -- the step over its plateau and per time slice (bench --time-slice)
    Metric("steady_state", "the step over the window where its load was at its target (within --steady-tolerance): "
           "requests sent after the window opened and finished before it closed, so the first wave and the drain "
           "are left out; null for a trace or sessions, whose load has no single target"),
    Metric("time_slices", "the step per slice of bench --time-slice: a request belongs to the slice it was sent "
           "in, output tokens to the slice they arrived in; null without --time-slice"),
    # -- tool calls and images
    Metric("tool_calls", "answers that called a tool only (null when none did): tool-call deltas (delta.tool_calls, "
           "a function name or an argument fragment) are output, so they count for TTFT, TPOT and ITL like answer "
           "text"),
    Metric("tool_calls.time_to_first_tool_call_ms", "the first event carrying a tool-call delta minus the time the "
           "request was sent; equals TTFT when the answer began with its call", "ms", "lower", field=None),
    Metric("tool_calls.tool_call_tokens", "output tokens that were tool calls, per answer that called one: all "
           "output tokens (their source) when the answer streamed nothing else, else the model's tokenizer on the "
           "names and argument fragments (tokenizer), else each event's share by characters (estimate)", "tokens",
           field=None),
    Metric("images", "requests that sent images only (bench --images): images sent, and image_tokens: "
           "usage.prompt_tokens_details.image_tokens where the server reports it (reported: how many answers did); "
           "unknown otherwise, never guessed"),
    Metric("speculative", "speculative decoding from the answers' own counts where they give them (SGLang's "
           "meta_info: verify steps, drafted and kept tokens): acceptance_rate = kept / drafted, acceptance_length "
           "= 1 + kept / verify steps, per request as a distribution; null when no answer said"),
    # -- probes beside the load (bench --probe-rate)
    Metric("probe", "one-token probes sent beside the step's load at --probe-rate per second (Poisson), kept out "
           "of every other figure of the step: sent, completed, failed, errors by category, ttft_ms; null without "
           "probes"),
    Metric("probe_ttft_ms", "TTFT of the completed probes: how long a newcomer waited behind the running load "
           "(queueing, then the prefill of its short prompt); the probe block's ttft_ms", "ms", "lower",
           label="probe TTFT", csv=("count", "p50", "p90", "p99", "max")),
    # -- batched requests (embeddings, rerank: one JSON answer, latency is e2e_ms, no TTFT)
    Metric("inputs_total", "embeddings and rerank: inputs (texts) the completed requests carried, each answer "
           "checked to have one result per input; 0 for generation", "inputs", csv=("",)),
    Metric("inputs_per_s", "inputs_total / duration (null for generation)", "inputs/s", "higher", csv=("",)),
)

NOTES: Final[dict[str, str]] = {
    "percentiles": "linear interpolation between closest ranks (numpy default)",
}
"""How every distribution is computed: in ``definitions`` beside the metrics, not a metric itself."""

_active: list[tuple[Metric, ...]] = [METRICS]
_index: dict[int, tuple[dict[str, Metric], dict[str, Metric]]] = {}


def rows() -> tuple[Metric, ...]:
    """The registry's rows, in order: `METRICS`, or a test's own within `using`."""
    return _active[-1]


@contextmanager
def using(metrics: Sequence[Metric]) -> Iterator[tuple[Metric, ...]]:
    """Within the block, the registry is ``metrics`` (a test registering a row of its own); every reader of the
    rows sees them."""
    _active.append(tuple(metrics))
    try:
        yield _active[-1]
    finally:
        _active.pop()


def _indexes() -> tuple[dict[str, Metric], dict[str, Metric]]:
    """The rows by name and by short name (made once per registry)."""
    current = rows()
    found = _index.get(id(current))
    if found is None or (current and found[0].get(current[0].name) is not current[0]):
        found = _index[id(current)] = ({row.name: row for row in current},
                                       {row.short: row for row in current if row.short})
    return found


def by_name(name: str) -> Metric:
    """The row of ``name`` (``ttft_ms``); `KeyError` for a name the registry does not have."""
    return _indexes()[0][name]


def definitions() -> dict[str, str]:
    """Every metric's definition by name, and the `NOTES`: the ``definitions`` block of a JSON result."""
    return {**{row.name: row.definition for row in rows()}, **NOTES}


def objective(name: str) -> tuple[Metric, str | None] | None:
    """What an objective or threshold name means: ``ttft_p99`` -> (the ``ttft_ms`` row, ``"p99"``);
    ``goodput`` -> (the ``goodput_rps`` row, None); None for a name that is neither."""
    by_short = _indexes()[1]
    if name in by_short:
        metric = by_short[name]
        return None if metric.percentiles else (metric, None)
    short, sep, stat = name.rpartition("_")
    metric_or_none = by_short.get(short) if sep else None
    if metric_or_none is None or stat not in metric_or_none.percentiles:
        return None
    return metric_or_none, stat


def percentile_metrics() -> tuple[Metric, ...]:
    """The metrics whose percentiles an objective may name (``ttft``, ``tpot``, ...), in registry order."""
    return tuple(row for row in rows() if row.percentiles)


def distribution_rows() -> tuple[Metric, ...]:
    """The rows a step's summary aggregates from per-request values (`Metric.aggregate`), in registry order."""
    return tuple(row for row in rows() if row.aggregate != "step")


def window_rows() -> tuple[Metric, ...]:
    """The distributions each time slice and steady state has, in registry order."""
    return tuple(row for row in distribution_rows() if row.window)


def gate_rows() -> list[tuple[Metric, str, float]]:
    """What ``compare`` judges of the per-request rows: (row, percentile, default threshold), in registry order."""
    return [(row, stat, threshold) for row in distribution_rows() for stat, threshold in row.gate]


def prometheus_rows() -> tuple[Metric, ...]:
    """The per-request rows the gateway keeps a histogram of, in seconds: rows in ms with a ``prometheus`` name
    and a short name."""
    return tuple(row for row in rows() if row.prometheus and row.per_request is not None and row.unit == "ms"
                 and row.short)


def csv_columns() -> list[tuple[str, Metric, str]]:
    """The CSV's metric columns in order: (column, metric, statistic), statistic ``""`` for the value itself.
    A column is the summary attribute (``output_tokens_total``), or it and the statistic (``ttft_ms_p50``)."""
    out = []
    for row in rows():
        for stat in row.csv:
            attribute = row.attribute or row.name
            out.append((f"{attribute}_{stat}" if stat else attribute, row, stat))
    return out
