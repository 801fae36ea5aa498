"""One frame of ``tokometer top`` as a rich renderable (`render_top`), and the sparklines it draws.

The numbers come from `tokometer.observe.top.TopView`; this module only lays them out: a title
line, the server's table (now / over the window / history), its latency percentiles (a number, a
range ``20–40`` or a bound ``≤ 300``, by `tokometer.observe.buckets`' rule), then one line per GPU.
A sparkline is a string of the block characters ``▁▂▃▄▅▆▇█``, one per reading, scaled from 0 (or
the lowest reading, for values that never approach 0) to the highest.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from tokometer.observe.buckets import describe
from tokometer.observe.top import LATENCIES, GpuView, TopView
from tokometer.util.units import GIB

__all__ = ["BLOCKS", "render_top", "sparkline"]

BLOCKS = "▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float], width: int = 30, lo: float | None = 0.0, hi: float | None = None) -> str:
    """The last ``width`` values as block characters, ``lo`` (default 0; None: the lowest value) as ``▁`` and
    ``hi`` (default: the highest value) as ``█``. All values equal (or no range) draw the lowest block."""
    shown = [v for v in values if math.isfinite(v)][-width:] if width > 0 else []
    if not shown:
        return ""
    bottom = min(shown) if lo is None else lo
    top = max(shown) if hi is None else hi
    if top <= bottom:
        return BLOCKS[0] * len(shown)
    last = len(BLOCKS) - 1
    return "".join(BLOCKS[max(0, min(last, round((v - bottom) / (top - bottom) * last)))] for v in shown)


def _num(value: float | None, digits: int = 1, unit: str = "") -> str:
    return "-" if value is None else f"{value:,.{digits}f}{unit}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def _seconds(value: float) -> str:
    return f"{value:.0f} s" if value >= 10 else f"{value:.1f} s"


def _title(view: TopView, interval_s: float | None) -> Text:
    text = Text("tokometer top", style="bold")
    text.append(f"  {view.metrics_url}  ")
    text.append(view.source, style="cyan")
    samples = view.server.samples
    span = f"\nwindow {_seconds(view.window_s)}: {samples} scrape" + ("" if samples == 1 else "s")
    span += f", {view.server.gaps} failed" if view.server.gaps else ""
    if interval_s is not None:
        span += f", one every {_seconds(interval_s)}"
    text.append(span, style="dim")
    if view.no_answer_s is not None:
        reason = " ".join(view.no_answer_reason.split())[:80]
        text.append(f"\n(no answer for {view.no_answer_s:.0f} s: {reason})", style="bold red")
    elif view.source == "none" and view.no_answer_s is None:
        text.append("\n(waiting for the first scrape)", style="yellow")
    return text


def _server_table(view: TopView) -> Table:
    table = Table(box=None, pad_edge=False, padding=(0, 2, 0, 0), show_header=True, header_style="bold")
    table.add_column("server")
    table.add_column("now", justify="right")
    table.add_column("mean", justify="right")
    table.add_column("max", justify="right")
    table.add_column(f"history ({_seconds(view.window_s)})")
    gauges = view.server.gauges

    def mean_max(name: str, fmt: str) -> tuple[str, str]:
        g = gauges.get(name)
        if g is None:
            return "-", "-"
        if fmt == "pct":
            return _pct(g.mean), _pct(g.max)
        return _num(g.mean), _num(g.max, 0)

    table.add_row("requests running", _num(view.running, 0), *mean_max("requests_running", ""),
                  sparkline(view.running_history), style="green" if view.running else None)
    table.add_row("requests waiting", _num(view.waiting, 0), *mean_max("requests_waiting", ""),
                  sparkline(view.waiting_history), style="yellow" if view.waiting else None)
    table.add_row("KV cache", _pct(view.kv_cache_usage), *mean_max("kv_cache_usage", "pct"),
                  sparkline(view.kv_history, hi=1.0))
    history = view.output_tok_s_history
    # a count added to at request ends has no per-scrape maximum: between two scrapes it is one request or none
    peak = _num(max(history), 1) if history and view.output_counted != "at request end" else "-"
    table.add_row("output tok/s", "",
                  _num(view.output_tok_s), peak, sparkline(history), style="dim" if view.output_too_short else None)
    table.add_row("prompt tok/s", "", _num(view.prompt_tok_s), "", "")
    table.add_row("requests/s finished", "", _num(view.requests_s, 2), "", "")
    table.add_row("preemptions", "", _num(view.preemptions, 0), "", "in the window",
                  style="red" if view.preemptions else None)
    if view.prefix_cache_hit_rate is not None:
        table.add_row("prefix-cache hits", "", _pct(view.prefix_cache_hit_rate), "", "")
    spec = view.server.speculative
    if spec is not None and spec.acceptance_rate is not None:
        table.add_row("spec acceptance", "", _pct(spec.acceptance_rate), "", "of drafted tokens")
    if spec is not None and spec.acceptance_length is not None:
        table.add_row("spec tokens/step", "", _num(spec.acceptance_length, 2), "", "1 + accepted per draft")
    return table


def _output_note(view: TopView) -> Text | None:
    """What the output tok/s row is, where the server counts a request's tokens only when it ends."""
    if view.output_in_progress:
        return Text(f"output tok/s: {view.source}'s count of finished requests' tokens plus its /slots' tokens of "
                    "the running ones", style="dim")
    if view.output_counted != "at request end":
        return None
    intervals = max(0, view.server.samples - 1)
    if "requests_finished" in view.server.counters:
        ends = view.output_request_ends or 0
        moved = f"{ends:,.0f} request" + ("" if ends == 1 else "s") + " ended in the window"
    else:
        moved = f"the count moved in {view.output_moved} of {intervals} scrape intervals"
    if view.output_too_short:
        return Text(f"output tok/s: {view.source} adds a request's tokens when it ends and {moved}: the window is "
                    "too short for a rate (a longer --window)", style="yellow")
    return Text(f"output tok/s: {view.source} adds a request's tokens when it ends ({moved}); no per-scrape max",
                style="dim")


def _latency_table(view: TopView) -> Table | None:
    rows = [(label, view.latency_ms(name)) for name, label in LATENCIES]
    if all(ms is None for _, ms in rows):
        return None
    table = Table(box=None, pad_edge=False, padding=(0, 2, 0, 0), header_style="bold")
    table.add_column("latency (ms)")
    for column in ("p50", "p90", "p99", "mean", "count"):
        table.add_column(column, justify="right")
    for (name, label), (_, ms) in zip(LATENCIES, rows, strict=True):
        if ms is None:
            continue
        count = ms["count"]
        table.add_row(label, *(describe(view.located_ms(name, q)) for q in ("p50", "p90", "p99")), _num(ms["mean"]),
                      "-" if count is None else f"{count:,.0f}")
    return table


def _gpu_table(gpus: Sequence[GpuView]) -> Table:
    table = Table(box=None, pad_edge=False, padding=(0, 2, 0, 0), header_style="bold")
    for column, justify in (("GPU", "left"), ("util", "right"), ("", "left"), ("memory", "right"), ("", "left"),
                            ("power", "right"), ("", "left"), ("temp", "right")):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for gpu in gpus:
        s = gpu.latest
        memory = "-"
        if s.memory_used_bytes is not None:
            memory = f"{s.memory_used_bytes / GIB:,.1f}"
            memory += f" / {s.memory_total_bytes / GIB:,.1f} GiB" if s.memory_total_bytes else " GiB"
        power = "-" if s.power_w is None else f"{s.power_w:,.0f}" + (
            f" / {s.power_limit_w:,.0f} W" if s.power_limit_w else " W")
        name = f"{s.index} {s.name}".strip() + (f" ({', '.join(s.throttle)})" if s.throttle else "")
        table.add_row(name, _pct(s.utilization), sparkline(gpu.utilization_history, 20, hi=1.0), memory,
                      sparkline(gpu.memory_history, 20, hi=s.memory_total_bytes), power,
                      sparkline(gpu.power_history, 20, hi=s.power_limit_w),
                      _num(s.temperature_c, 0, " °C"))
    return table


def render_top(view: TopView, interval_s: float | None = None) -> RenderableType:
    """One frame: title, the server's table, its latencies, the GPUs."""
    parts: list[RenderableType] = [_title(view, interval_s), Text("")]
    if view.source == "unknown":
        parts.append(Text(f"not an engine tokometer knows: {view.raw_samples} samples, kept raw "
                          "(tokometer top --once --json shows them)"))
    else:
        parts.append(_server_table(view))
        note = _output_note(view)
        if note is not None:
            parts.append(note)
        latency = _latency_table(view)
        if latency is not None:
            parts += [Text(""), latency]
    if view.gpus:
        parts += [Text(""), _gpu_table(view.gpus)]
    return Group(*parts)
