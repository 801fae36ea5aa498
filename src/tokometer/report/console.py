"""Console output of a benchmark: a live progress line, a table per step, a sweep table.

The sweep table puts per-request decode speed beside aggregate throughput: how
much each request slows down as the load buys throughput, in one glance.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from tokometer.benchmark.observation import SERVER_LATENCIES, client_counterpart
from tokometer.benchmark.run import BenchResult, StepResult
from tokometer.load.profiles import LoadStep
from tokometer.load.runner import StepLimits
from tokometer.metrics import Distribution, StepSummary, registry
from tokometer.observe.buckets import describe, from_json
from tokometer.records import RequestRecord
from tokometer.report import tables
from tokometer.report.agentic import agent_lines
from tokometer.report.headline import reasoning_line, startup_line
from tokometer.report.speculative import spec_line
from tokometer.report.tenants import tenant_table
from tokometer.report.windows import slice_table, steady_lines
from tokometer.util.shown import clipped

__all__ = ["LiveProgress", "render_result", "render_step"]


def _f(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


class LiveProgress:
    """A `BenchObserver` showing a progress bar with live counts while a step runs."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.progress = Progress(
            TextColumn("{task.description}", style="bold", markup=False),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[detail]}", markup=False),
            TimeElapsedColumn(),
            console=console,
            transient=True,
            refresh_per_second=4,
        )
        self._task: TaskID | None = None
        self._done = self._failed = self._tokens = 0

    def __enter__(self) -> LiveProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def step_started(self, index: int, step: LoadStep, limits: StepLimits) -> None:
        self._done = self._failed = self._tokens = 0
        if self._task is not None:
            self.progress.remove_task(self._task)
        self._task = self.progress.add_task(f"step {index + 1}: {step.describe()}", total=limits.total, detail="")

    def request_done(self, record: RequestRecord) -> None:
        self._done += 1
        if not record.ok:
            self._failed += 1
        self._tokens += record.output_tokens or 0
        if self._task is not None:
            detail = f"{self._tokens:,} tokens, {self._failed} failed"
            self.progress.update(self._task, completed=self._done, detail=detail)

    def step_finished(self, result: StepResult) -> None:
        render_step(self.console, result)


def _dist_row(table: Table, name: str, d: Distribution, digits: int = 2) -> None:
    if d.count == 0:
        return
    table.add_row(name, _f(d.mean, digits), _f(d.p50, digits), _f(d.p90, digits), _f(d.p99, digits),
                  _f(d.max, digits), str(d.count))


def session_lines(s: StepSummary) -> list[str]:
    """Multi-turn sessions: one line for the sessions, then TTFT, prompt length and cache share per turn."""
    stats, turns = s.session_stats, s.per_turn or []
    if not stats:
        return []
    out = [f"sessions: {stats['sessions']} ({stats['completed']} completed, {stats['failed']} ended by a failure); "
           f"turns per session {_f(stats['turns']['mean'], 1)}, session duration p50 "
           f"{_f(stats['duration_s']['p50'], 2)} s; TTFT grew {_f(stats['ttft_turn_growth'], 2)}x from the first "
           "turn to the last"]
    for t in turns:
        rate = t["prompt_cache_hit_rate"]
        out.append(f"  turn {t['turn']}: {t['requests']} ok" + (f", {t['failed']} failed" if t["failed"] else "")
                   + f"; TTFT p50 {_f(t['ttft_ms']['p50'], 2)} ms, p99 {_f(t['ttft_ms']['p99'], 2)} ms; prompt "
                   f"{_f(t['input_tokens_mean'], 0)} tokens"
                   + (f", {100 * rate:.0f}% from the server's cache" if rate is not None else ""))
    return out


def server_lines(server: Mapping[str, Any] | None, summary: StepSummary | None = None) -> list[str]:
    """The step's "server" block: what the server's own /metrics said during it, its latency percentiles
    (each a number, a range or a bound: `tokometer.observe.buckets`) beside the client's own where it has them."""
    if not server:
        return []
    gauges, rates, hist = server.get("gauges") or {}, server.get("rates") or {}, server.get("histograms") or {}

    def gauge(name: str, digits: int = 1, scale: float = 1.0, unit: str = "") -> str:
        g = gauges.get(name) or {}
        if g.get("mean") is None:
            return "-"
        return f"{scale * g['mean']:.{digits}f}{unit} (max {scale * g['max']:.{digits}f}{unit})"

    line = (f"server ({server.get('source', '?')}, {server.get('samples', 0)} samples"
            + (f", {server['gaps']} gaps" if server.get("gaps") else "") + "): "
            f"running {gauge('requests_running')}, waiting {gauge('requests_waiting')}, "
            f"KV cache {gauge('kv_cache_usage', 0, 100.0, '%')}")
    tok = rates.get("generation_tokens")
    second = f"server counted {tok:,.1f} output tok/s" if tok is not None else "server counted no output tokens"
    if tok is not None and "generation_tokens" in (server.get("live") or []):
        second += " (finished requests' tokens plus the running ones' from /slots)"
    elif tok is not None and "generation_tokens" in (server.get("at_request_end") or []):
        second += " (added as each request ended)"
    preempted = (server.get("counters") or {}).get("preemptions")
    if preempted:
        second += f"; {preempted:.0f} preemptions"
    if server.get("prefix_cache_hit_rate") is not None:
        second += f"; prefix-cache hits {100 * server['prefix_cache_hit_rate']:.0f}%"
    out = [line, second, *filter(None, [spec_line(server.get("speculative"))])]
    for name, label in SERVER_LATENCIES:
        block = hist.get(name)
        if not block or not block.get("count"):
            continue
        ms = {q: (None if (p := from_json(block, q)) is None else p.scaled(1e3)) for q in ("p50", "p99")}
        mean = block.get("mean")
        text = (f"server {label}: p50 {describe(ms['p50'])} / p99 {describe(ms['p99'])} ms"
                + (f", mean {1e3 * mean:,.{3 if 1e3 * mean < 1 else 1}f} ms" if mean is not None else "")
                + f" ({block['count']:,.0f} observed)")
        counterpart = client_counterpart(name, str(server.get("source", "")))
        client = getattr(summary, counterpart[0], None) if summary is not None and counterpart else None
        if isinstance(client, Distribution) and client.p50 is not None and counterpart is not None:
            text += f"; client {counterpart[1]} p50 {_f(client.p50)} / p99 {_f(client.p99)} ms"
        out.append(text)
    return out


def gpu_lines(gpu: Mapping[str, Any]) -> list[str]:
    """One GPU's line of the step: utilisation, memory, power, energy per token, findings."""
    parts = [f"GPU {gpu.get('index', '?')} {gpu.get('name', '')}".rstrip() + ":"]
    for key, label, scale, unit in (("utilization_mean", "util", 100.0, "%"), ("power_mean_w", "power", 1.0, " W"),
                                    ("memory_used_max_bytes", "memory", 2**-30, " GiB"),
                                    ("joules_per_output_token", "energy", 1.0, " J/token")):
        value = gpu.get(key)
        if value is not None:
            parts.append(f"{label} {scale * value:,.1f}{unit}")
    return [" ".join(parts)]


def render_step(console: Console, result: StepResult) -> None:
    """The detailed table of one step, then its counts and warnings."""
    s = result.summary
    if s.inputs_per_s is not None:
        render_batch_step(console, result)
        return
    table = _step_table(result)
    for name, digits in tables.STEP_TABLE:
        row = registry.by_name(name)
        _dist_row(table, row.heading, getattr(s, row.attribute or row.name), digits)
    console.print(table)
    sources = ", ".join(f"{k} {v}" for k, v in sorted(s.output_tokens_source.items())) or "none"
    errors = ", ".join(f"{k} {v}" for k, v in s.errors.items())
    console.print(
        f"  requests: {s.requests_completed} completed, {s.requests_failed} failed"
        + (f" ({errors})" if errors else "")
        + (f", {s.requests_warmup} warm-up not counted" if s.requests_warmup else "")
        + f"; {s.length_truncated} stopped at max_tokens"
    )
    console.print(
        f"  throughput: {_f(s.output_throughput_tok_s)} output tok/s"
        + (f" ({_f(s.output_throughput_per_gpu_tok_s)} per GPU)" if s.output_throughput_per_gpu_tok_s is not None
           else "")
        + f", {_f(s.request_throughput_rps, 2)} req/s"
        f" over {s.duration_s:.2f} s; achieved concurrency {_f(s.achieved_concurrency, 2)}"
        + (f"; send rate {_f(s.send_rate_rps, 2)}/s" if result.load.open_loop else "")
        + (f"; goodput {_f(s.goodput_rps, 2)} req/s" if s.goodput_rps is not None else "")
    )
    check = s.text_check
    console.print(f"  output tokens counted by: {sources}" + (
        f"; received text short of the count in {len(check.short)} of {sum(check.checked.values())} answers"
        if check is not None and check.short else ""))
    if s.reasoning is not None:
        console.print(f"  {reasoning_line(s.reasoning.to_json())}")
    for text in [p.line() for p in (s.tool_calls, s.images, s.probe) if p is not None] + [spec_line(s.speculative)]:
        if text is not None:
            console.print(f"  {text}")
    if s.prompt_cache_hit_rate is not None:
        console.print(f"  prompt cache: {100 * s.prompt_cache_hit_rate:.0f}% of prompt tokens came from the server's "
                      f"cache ({s.prompt_cache_reported} answers said)")
    if s.ttft_cold_prefix_ms is not None and s.ttft_warm_prefix_ms is not None:
        speedup = f"{s.prefix_cache_speedup:.2f}x" if s.prefix_cache_speedup is not None else "-"
        console.print(f"  shared prefixes: TTFT p50 cold {_f(s.ttft_cold_prefix_ms.p50)} ms "
                      f"({s.ttft_cold_prefix_ms.count}), warm {_f(s.ttft_warm_prefix_ms.p50)} ms "
                      f"({s.ttft_warm_prefix_ms.count}): prefix-cache speed-up {speedup}")
    lines: list[str | Text] = [*(session_lines(s) if s.agentic is None else agent_lines(s.agentic)), *steady_lines(s)]
    for line in lines:
        console.print(Text.assemble("  ", line))
    if (slices := slice_table(s)) is not None:
        console.print(slices)
    if (tenants := tenant_table(s.tenants)) is not None:
        console.print(tenants)
    for line in server_lines(result.server, s) + [g for block in result.step.gpu for g in gpu_lines(block)]:
        console.print(f"  {line}")
    console.print(f"  naive view (generated tokens / elapsed time: mixes TTFT, network and decode): {s.naive_line()}")
    _problems(console, result)


def _problems(console: Console, result: StepResult) -> None:
    """A step's error examples (its category in red) and warnings, then a blank line."""
    for error, example in result.summary.error_examples.items():
        console.print(Text.assemble("  ", (error, "red"), f": {example}"))
    for warning in result.warnings:
        console.print(Text.assemble("  ", ("warning:", "yellow"), f" {warning}"))
    console.print()


def _step_table(result: StepResult) -> Table:
    """A step's table, titled and with its columns, empty."""
    step = result.step
    title = (f"Step {step.index + 1}: {result.load.describe()}"
             + (f" (trial {step.trial})" if step.trial is not None else "")
             + (" (interrupted)" if step.interrupted else ""))
    table = Table(title=title, title_justify="left", show_edge=False)
    for column in ("metric", "mean", "p50", "p90", "p99", "max", "n"):
        table.add_column(column, justify="left" if column == "metric" else "right")
    return table


def render_batch_step(console: Console, result: StepResult) -> None:
    """One step of embeddings or rerank requests: one JSON answer each, so latency is the whole response."""
    s = result.summary
    table = _step_table(result)
    _dist_row(table, "latency (ms)", s.e2e_ms)
    _dist_row(table, "input tokens/request", s.input_tokens, 1)
    _dist_row(table, "client lag (ms)", s.client_lag_ms, 3)
    console.print(table)
    errors = ", ".join(f"{k} {v}" for k, v in s.errors.items())
    per_request = s.inputs_total / s.requests_completed if s.requests_completed else 0
    console.print(f"  requests: {s.requests_completed} completed, {s.requests_failed} failed"
                  + (f" ({errors})" if errors else "")
                  + (f", {s.requests_warmup} warm-up not counted" if s.requests_warmup else "")
                  + f"; {s.inputs_total} inputs ({_f(per_request, 1)} per request)")
    sources = ", ".join(f"{k} {v}" for k, v in sorted(s.input_tokens_source.items())) or "none"
    console.print(f"  throughput: {_f(s.request_throughput_rps, 2)} req/s, {_f(s.inputs_per_s, 1)} inputs/s, "
                  f"{_f(s.input_throughput_tok_s)} input tok/s (counted by: {sources}) over {s.duration_s:.2f} s; "
                  f"achieved concurrency {_f(s.achieved_concurrency, 2)}"
                  + (f"; send rate {_f(s.send_rate_rps, 2)}/s" if result.load.open_loop else ""))
    console.print("  not streamed: latency is the whole response; there is no TTFT, TPOT or ITL")
    for line in server_lines(result.server, s) + [g for block in result.step.gpu for g in gpu_lines(block)]:
        console.print(f"  {line}")
    _problems(console, result)


def step_name(result: StepResult) -> str:
    """A step's load in a few characters, with its trial (``c=4 #2``) when the sweep was repeated."""
    trial = result.step.trial
    return result.load.short() + (f" #{trial}" if trial is not None else "")


def _batch_sweep(console: Console, result: BenchResult) -> None:
    table = Table(title="Sweep: latency vs throughput (not streamed: latency is the whole response)",
                  title_justify="left", show_edge=False)
    for column in ("load", "ok", "failed", "req/s", "inputs/s", "input tok/s", "latency p50 ms",
                   "latency p99 ms", "lag p99 ms"):
        table.add_column(column, justify="left" if column == "load" else "right", no_wrap=column == "load")
    for step in result.steps:
        s = step.summary
        table.add_row(step_name(step), str(s.requests_completed), str(s.requests_failed),
                      _f(s.request_throughput_rps, 2), _f(s.inputs_per_s, 1), _f(s.input_throughput_tok_s),
                      _f(s.e2e_ms.p50), _f(s.e2e_ms.p99), _f(s.client_lag_ms.p99, 2))
    console.print(table)


def render_result(console: Console, result: BenchResult, warnings: Sequence[str] | None = None) -> None:
    """The sweep table (when there is more than one step, or the run searched for a maximum), the search's
    answer, and the run's own ``warnings`` (its steps' were shown with each step; by default all of its own)."""
    warnings = result.warnings if warnings is None else warnings
    search = result.find_max()
    if len(result.steps) > 1 and all(step.summary.inputs_per_s is not None for step in result.steps):
        _batch_sweep(console, result)
    elif len(result.steps) > 1 or search is not None:
        title = ("Find max: each probe against the objectives" if search is not None
                 else "Sweep: per-request speed vs aggregate throughput")
        table = Table(title=title, title_justify="left", show_edge=False)
        columns = ["load", "ok", "failed", *(c.title for c in tables.CONSOLE_SWEEP)]
        if search is not None:
            columns.append("objectives")
        for column in columns:
            table.add_column(column, justify="left" if column in ("load", "objectives") else "right",
                             no_wrap=column == "load")
        verdicts = {p.step: p for p in search.probes} if search is not None else {}
        for step in result.steps:
            s = step.summary
            row: list[str | Text] = [step_name(step), str(s.requests_completed), str(s.requests_failed),
                                     *(_f(c.of(s), c.digits) for c in tables.CONSOLE_SWEEP)]
            if search is not None:
                probe = verdicts.get(step.step.index)
                row.append("-" if probe is None else Text("met", style="green") if probe.passed
                           else Text.assemble(("missed", "red"), ": " + "; ".join(probe.misses)))
            table.add_row(*row)
        console.print(table)
    if search is not None:
        console.print(Text.assemble(("Find max:", "bold"), f" {search.answer()}"))
    for warning in warnings:
        console.print(Text.assemble(("warning:", "yellow"), f" {warning}"))
    if (startup := startup_line(result.run.engine)) is not None:
        console.print(startup)
    where = f"saved as run {result.run_id}" if result.run_id is not None else "not saved"
    seed = result.spec.seed
    console.print(f"Run {result.status}: {where}; model {clipped(result.run.model)}; "
                  f"prompts: {result.run.prompt_source}; seed {seed} (--seed {seed} repeats it)")
