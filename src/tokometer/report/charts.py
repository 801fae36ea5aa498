"""The report's charts: Plotly figures of `tokometer.report.data.report_data`'s numbers, nothing recomputed.

Each function takes the report's ``runs`` and returns a figure, or None when no run has what it plots:

- `rate_vs_throughput`: per step, decode speed p50 (tok/s per request) against output throughput (tok/s in
  all, or per GPU where the Pareto front is), one line per run, each point labelled with its load, a find-max
  probe that missed drawn as ✕, the run's annotations (the knee ★, the find-max answer ◆; one ★ where they fall
  on one load) marked, and the Pareto front across the runs (its loads ringed ○, a dotted step line);
- `ttft_vs_load`: TTFT p50 and the objective's percentile against the load (rate or concurrency), the TTFT
  objective as a line, each find-max probe marked met (●) or missed (✕);
- `cdf`: the empirical CDF of TTFT or TPOT per step (one line per run × step);
- `time_slices`: per time slice (``bench --time-slice``) of each step, TTFT p50 and p99, output tok/s and the
  requests sent, against the slice's start;
- `timeline`: one run's requests in send order, each a bar of client lag, wait and prefill (or TTFT where
  the server gave no prompt time), decode; failed requests in red; a ramped step's target load (concurrency or
  rate, `tokometer.report.ramps`) as a dashed line on a second axis;
- `server`: the server's own `/metrics` account per step (gauge means, rates, histogram p50s);
- `gpu`: each GPU's telemetry per step;
- `efficiency`: MBU, decode MFU and prefill MFU per step against the estimate's band (expected → bound).

Plotly is imported here only (the ``report`` extra); `require_plotly` says how to install it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tokometer.observe.buckets import Located, describe, from_json
from tokometer.util.errors import ConfigError

__all__ = ["cdf", "efficiency", "gpu", "rate_vs_throughput", "require_plotly", "server", "time_slices", "timeline",
           "ttft_vs_load"]

Run = Mapping[str, Any]
_DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
_PHASES = {"client lag": "#b0b0b0", "wait": "#f4a259", "prefill": "#e76f51", "TTFT (wait + prefill)": "#f4a259",
           "decode": "#2a9d8f", "failed": "#d62828"}


def require_plotly() -> None:
    """Refuse, in one line, when the ``report`` extra is not installed."""
    try:
        import plotly.graph_objects  # noqa: F401
    except ImportError:
        raise ConfigError("the HTML report needs plotly: pip install 'tokometer[report]' "
                          "(or use --format md, which does not)") from None


def _go() -> Any:
    require_plotly()
    import plotly.graph_objects as go

    return go


def _subplots(**kwargs: Any) -> Any:
    require_plotly()
    from plotly.subplots import make_subplots

    return make_subplots(**kwargs)


def _colour(i: int) -> str:
    from plotly.colors import qualitative

    palette: list[str] = qualitative.Plotly
    return palette[i % len(palette)]


def _layout(fig: Any, title: str, height: int = 460, **kwargs: Any) -> Any:
    fig.update_layout(title={"text": title, "x": 0.01}, template="plotly_white", height=height,
                      margin={"l": 60, "r": 20, "t": 60, "b": 50}, legend={"orientation": "h", "y": -0.15},
                      **kwargs)
    return fig


def _p(summary: Mapping[str, Any] | None, name: str, key: str = "p50") -> float | None:
    value = ((summary or {}).get(name) or {}).get(key)
    return float(value) if isinstance(value, (int, float)) else None


def _per(pareto: Mapping[str, Any] | None, run: Run) -> float:
    """What a run's throughputs are divided by on the chart: its GPUs when the front is per GPU, else 1."""
    if not pareto or pareto["basis"] != "per GPU":
        return 1.0
    return float(next((g["count"] for g in pareto["gpus"] if g["run"] == run["id"]), None) or 1)


def _scaled(value: Any, by: float) -> Any:
    return value / by if isinstance(value, (int, float)) and not isinstance(value, bool) else value


def _front(fig: Any, go: Any, pareto: Mapping[str, Any]) -> None:
    """The Pareto front across the runs: a step line through its points (left to right), each ringed."""
    points = pareto["points"]
    ordered = [points[i] for i in pareto["front"]]
    if not ordered:
        return
    fig.add_trace(go.Scatter(
        x=[p["throughput_tok_s"] for p in ordered], y=[p["decode_speed_p50"] for p in ordered], mode="lines+markers",
        line={"color": "#444", "dash": "dot", "shape": "vh", "width": 1.5}, name="Pareto front (across the runs)",
        marker={"size": 17, "symbol": "circle-open", "color": "#444", "line": {"width": 2}},
        customdata=[f"{p['run_name']} {p['load']}" for p in ordered], meta={"kind": "pareto_front"},
        hovertemplate="on the front: %{customdata}<extra></extra>"))


def rate_vs_throughput(runs: Sequence[Run], pareto: Mapping[str, Any] | None = None) -> Any:
    """Per-request decode speed against aggregate throughput across the steps, the knee marked; with ``pareto``
    (`report_data`'s block) the front drawn across the runs, and the throughput per GPU where the front is."""
    go = _go()
    fig = go.Figure()
    for i, run in enumerate(runs):
        steps = run["steps"]
        per = _per(pareto, run)
        x = [_scaled((s["summary"] or {}).get("output_throughput_tok_s"), per) for s in steps]
        y = [_p(s["summary"], "decode_speed_tok_s") for s in steps]
        hover = [[s["label"], _p(s["summary"], "ttft_ms"), _p(s["summary"], "tpot_ms"), s["power"]] for s in steps]
        symbols = [_SYMBOL[_verdict(s)] for s in steps]
        fig.add_trace(go.Scatter(
            x=x, y=y, mode="lines+markers+text", name=run["name"], text=[s["label"] for s in steps],
            textposition="top center", marker={"size": 9, "color": _colour(i), "symbol": symbols},
            line={"color": _colour(i)},
            customdata=hover, meta={"run": run["id"], "kind": "steps"},
            hovertemplate=("%{customdata[0]}: %{x:,.1f} output tok/s, %{y:,.1f} tok/s/request<br>"
                           "TTFT p50 %{customdata[1]:,.1f} ms, TPOT p50 %{customdata[2]:,.2f} ms, "
                           "power %{customdata[3]:,.0f}<extra>" + run["name"] + "</extra>")))
        for mark in run["annotations"]:
            at, mx, my = mark["step"], _scaled(mark.get("x"), per), mark.get("y")
            if mx is None or my is None:
                continue
            knee = mark["kind"] != "find_max"
            fig.add_trace(go.Scatter(
                x=[mx], y=[my], mode="markers", name=f"{mark['text']} ({run['name']})",
                marker={"symbol": "star" if knee else "diamond", "size": 20 if knee else 15, "color": _colour(i),
                        "line": {"width": 1.5, "color": "black"}},
                meta={"run": run["id"], "kind": mark["kind"], "step": at}, hoverinfo="name"))
            # the knee's label up and right, the find-max answer's down and left: two marks never share a spot
            fig.add_annotation(x=mx, y=my, text=mark["text"], showarrow=True, arrowhead=2,
                               ax=40 if knee else -60, ay=-40 if knee else 45)
    if pareto:
        _front(fig, go, pareto)
    per_gpu = pareto is not None and pareto["basis"] == "per GPU"
    return _layout(fig, "Per-request decode speed vs aggregate throughput (p50 per step; ★ the knee: most "
                        "throughput × speed; ◆ find-max; ✕ a probe that missed)",
                   xaxis_title="output tokens/s " + ("per GPU" if per_gpu else "all requests"),
                   yaxis_title="decode tokens/s per request (p50)", yaxis_rangemode="tozero",
                   xaxis_rangemode="tozero")


_SYMBOL = {"met": "circle", "missed": "x", None: "circle"}


def _verdict(step: Mapping[str, Any]) -> str | None:
    """A find-max probe's verdict, ``met`` or ``missed``; None for a step that is not a probe."""
    probe = step.get("probe")
    return None if probe is None else "met" if probe["passed"] else "missed"


def ttft_vs_load(runs: Sequence[Run]) -> Any:
    """TTFT against the load: p50 and the objective's percentile (p99 without one) of each step, in load
    order, the TTFT objective a horizontal line, find-max probes met (●) or missed (✕). Only the loads of one
    kind (the first run's: rate or concurrency) share the axis; None when no run has two such loads."""
    kinds = [load["mode"] for run in runs for load in run["loads"] if load["value"] is not None]
    if not kinds:
        return None
    kind = kinds[0]
    go = _go()
    fig = go.Figure()
    drawn = 0
    for i, run in enumerate(runs):
        slo = run.get("slo") or {}
        key = slo.get("percentile") or "p99"
        points = sorted(((load["value"], position) for load in run["loads"] if load["mode"] == kind
                         and load["value"] is not None for position in load["steps"]
                         if run["steps"][position]["summary"]), key=lambda p: p[0])
        if len({v for v, _ in points}) < 2:
            continue
        drawn += 1
        x = [v for v, _ in points]
        steps = [run["steps"][position] for _, position in points]
        verdicts = [_verdict(s) for s in steps]
        misses = ["; ".join((s.get("probe") or {}).get("misses") or []) or (v or "") for s, v in zip(steps, verdicts,
                                                                                                  strict=True)]
        for name, dash in ((key, "solid"), ("p50", "dot")):
            if name == "p50" and key == "p50":
                continue
            fig.add_trace(go.Scatter(
                x=x, y=[_p(s["summary"], "ttft_ms", name) for s in steps], mode="lines+markers",
                name=f"TTFT {name}" + (f" · {run['name']}" if len(runs) > 1 else ""),
                line={"color": _colour(i), "dash": dash},
                marker={"size": 11 if name == key else 6, "symbol": [_SYMBOL[v] for v in verdicts],
                        "color": [_VERDICT_COLOUR[v] if name == key else _colour(i) for v in verdicts]},
                customdata=[[s["label"], v or "", m] for s, v, m in zip(steps, verdicts, misses, strict=True)],
                meta={"run": run["id"], "kind": "ttft", "percentile": name, "verdicts": verdicts},
                hovertemplate="%{customdata[0]}: TTFT " + name + " %{y:,.1f} ms %{customdata[1]}<br>"
                              "%{customdata[2]}<extra>" + run["name"] + "</extra>"))
        if slo.get("ttft_ms") is not None:
            what = f"{slo['name']} <= {slo['ttft_ms']:g} ms" if slo.get("percentile") else \
                f"per-request TTFT objective (goodput) {slo['ttft_ms']:g} ms"
            fig.add_hline(y=slo["ttft_ms"], line={"color": "#d62828", "dash": "dash", "width": 1.5},
                          annotation_text=f"SLO: {what}", annotation_position="top left")
    if not drawn:
        return None
    unit = "requests/s" if kind == "rate" else "concurrent requests"
    return _layout(fig, "TTFT against load (● met, ✕ missed the objectives; dashed red: the TTFT objective)",
                   xaxis_title=f"load ({unit})", yaxis_title="TTFT, ms", yaxis_rangemode="tozero",
                   xaxis_rangemode="tozero")


_VERDICT_COLOUR = {"met": "#2a9d8f", "missed": "#d62828", None: "#555"}


def cdf(runs: Sequence[Run], metric: str, title: str, axis: str) -> Any:
    """The empirical CDF of ``metric`` (``ttft_ms`` or ``tpot_ms``) per step of every run."""
    go = _go()
    from plotly.colors import sample_colorscale

    fig = go.Figure()
    for i, run in enumerate(runs):
        samples = run["cdf"][metric]
        colours = sample_colorscale("Viridis", max(2, len(samples)), low=0.0, high=0.85)
        for position, values in enumerate(samples):
            if not values:
                continue
            n = len(values)
            name = run["steps"][position]["label"] + (f" · {run['name']}" if len(runs) > 1 else "")
            fig.add_trace(go.Scatter(
                x=values, y=[(k + 1) / n for k in range(n)], mode="lines", line_shape="hv", name=name,
                line={"color": colours[position], "dash": _DASHES[i % len(_DASHES)]},
                meta={"run": run["id"], "step": position}, hovertemplate="%{x:,.2f} ms: %{y:.1%}<extra>"
                + name + "</extra>"))
    return _layout(fig, title, xaxis_title=axis, yaxis_title="share of requests at or below",
                   yaxis_tickformat=".0%")


def time_slices(runs: Sequence[Run]) -> Any:
    """Each step's time slices as steps over time (s from the step's start; each value held from its slice's
    start to its end, the last slice's end added as a point): TTFT p50 (dotted) and p99, output tok/s, requests
    sent; one line per run × step. None when no step has slices."""
    steps = [(run, step, block["slices"]) for run in runs for step in run["steps"]
             if (block := (step.get("summary") or {}).get("time_slices")) and block.get("slices")]
    if not steps:
        return None
    go = _go()
    fig = _subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.06,
                    subplot_titles=("TTFT, ms (p99; dotted: p50)", "output tok/s", "requests sent"))
    for i, (run, step, slices) in enumerate(steps):
        name = step["label"] + (f" · {run['name']}" if len(runs) > 1 else "")
        x = [sl["start_s"] for sl in slices] + [slices[-1]["end_s"]]
        meta = {"run": run["id"], "step": step["step"]}
        for row, key, y, dash, shown in (
                (1, "ttft_p99", [sl["ttft_ms"]["p99"] for sl in slices], "solid", True),
                (1, "ttft_p50", [sl["ttft_ms"]["p50"] for sl in slices], "dot", False),
                (2, "output_tok_s", [sl["output_throughput_tok_s"] for sl in slices], "solid", False),
                (3, "requests", [sl["requests"] for sl in slices], "solid", False)):
            fig.add_trace(go.Scatter(x=x, y=[*y, y[-1]], mode="lines+markers", line_shape="hv", name=name,
                                     legendgroup=name, showlegend=shown, line={"color": _colour(i), "dash": dash},
                                     meta={**meta, "series": key},
                                     hovertemplate="from %{x:.2f} s: %{y:,.1f}<extra>" + name + "</extra>"),
                          row=row, col=1)
    fig.update_xaxes(title_text="s from the step's start", row=3, col=1)
    return _layout(fig, "Time slices (requests by send time; tokens by arrival)", height=720)


def timeline(run: Run) -> Any:
    """Each measured request of ``run`` in send order: client lag, wait, prefill, decode (seconds)."""
    go = _go()
    cols = run["timeline"]["columns"]
    bars: dict[str, tuple[list[int], list[float], list[float]]] = {name: ([], [], []) for name in _PHASES}

    def add(phase: str, row: int, start: float | None, end: float | None) -> None:
        if start is not None and end is not None and end >= start:
            ys, bases, widths = bars[phase]
            ys.append(row)
            bases.append(start)
            widths.append(round(end - start, 6))

    step_starts: dict[int, float] = {}
    for row in range(len(cols["sent_s"])):
        due, sent, first, end = cols["due_s"][row], cols["sent_s"][row], cols["first_token_s"][row], cols["end_s"][row]
        step_starts.setdefault(cols["step"][row], sent)
        add("client lag", row, due, sent)
        if not cols["ok"][row]:
            add("failed", row, sent, end)
            continue
        prefill = cols["server_prefill_s"][row]
        if prefill is not None and first - prefill >= sent:
            add("wait", row, sent, first - prefill)
            add("prefill", row, first - prefill, first)
        else:
            add("TTFT (wait + prefill)", row, sent, first)
        add("decode", row, first, end)
    fig = go.Figure()
    for phase, (ys, bases, widths) in bars.items():
        if ys:
            fig.add_trace(go.Bar(y=ys, x=widths, base=bases, orientation="h", name=phase, width=1.0,
                                 marker={"color": _PHASES[phase], "line": {"width": 0}},
                                 meta={"run": run["id"], "phase": phase},
                                 hovertemplate="request %{y}: %{base:.3f} s + %{x:.3f} s<extra>" + phase + "</extra>"))
    ramps = run["timeline"].get("ramps") or []
    for ramp in ramps:  # the ramp's target, on a second axis
        label = run["steps"][ramp["step"]]["label"]
        fig.add_trace(go.Scatter(x=ramp["t_s"], y=ramp["target"], yaxis="y2", mode="lines", name=f"target {label}",
                                 line={"color": "#d62728", "width": 2, "dash": "dash"},
                                 meta={"run": run["id"], "step": ramp["step"], "ramp": True},
                                 hovertemplate="%{x:.2f} s: %{y:.3g} " + ramp["unit"] + "<extra>ramp target</extra>"))
    if ramps:
        units = sorted({r["unit"] for r in ramps})
        fig.update_layout(yaxis2={"title": "ramp target (" + ", ".join(units) + ")", "overlaying": "y",
                                  "side": "right", "rangemode": "tozero", "showgrid": False})
    for position, start in step_starts.items():
        fig.add_vline(x=start, line={"width": 1, "dash": "dot", "color": "#555"},
                      annotation_text=run["steps"][position]["label"], annotation_position="top left")
    t = run["timeline"]
    shown = f"{t['shown']:,} requests" + (f" (every {t['every']}th of {t['requests']:,})" if t["every"] > 1 else "")
    return _layout(fig, f"{run['name']}: request timeline, {shown}", height=520, barmode="overlay", bargap=0,
                   xaxis_title="seconds from the run's first request", yaxis_title="request, in send order",
                   yaxis_autorange="reversed")


def _per_step(runs: Sequence[Run], block: str) -> list[Run]:
    return [run for run in runs if any(s[block] for s in run["steps"])]


def server(runs: Sequence[Run]) -> Any:
    """The server's own account per step: gauge means, usage gauges in %, rates (with the client's output tok/s
    beside them), histogram p50s (ms). A colour per series, a dash per run."""
    runs = _per_step(runs, "server")
    if not runs:
        return None
    go = _go()
    fig = _subplots(rows=2, cols=2, subplot_titles=("gauges, mean over the step", "cache use (%), mean",
                                                    "per second (client's output tok/s for comparison)",
                                                    "server latency p50 (ms; bars: the bucket holding it)"))
    colour = 0

    def add(run_index: int, run: Run, name: str, values: list[Any], block: str, row: int, col: int,
            extra: dict[str, Any] | None = None) -> None:
        nonlocal colour
        suffix = f" · {run['name']}" if len(runs) > 1 else ""
        fig.add_trace(go.Scatter(x=[s["label"] for s in run["steps"]], y=values, mode="lines+markers",
                                 name=name + suffix, line={"color": _colour(colour),
                                                           "dash": _DASHES[run_index % len(_DASHES)]},
                                 meta={"run": run["id"], "block": block, "name": name}, **(extra or {})),
                      row=row, col=col)
        colour += 1

    for i, run in enumerate(runs):
        blocks = [s["server"] or {} for s in run["steps"]]
        colour = 0
        for name in sorted({k for b in blocks for k in (b.get("gauges") or {})}):
            values = [((b.get("gauges") or {}).get(name) or {}).get("mean") for b in blocks]
            usage = name.endswith("_usage")
            add(i, run, name, [None if v is None else v * 100 for v in values] if usage else values, "gauges", 1,
                2 if usage else 1)
        for name in sorted({k for b in blocks for k in (b.get("rates") or {})}):
            add(i, run, f"{name}/s", [(b.get("rates") or {}).get(name) for b in blocks], "rates", 2, 1)
        add(i, run, "client output tok/s", [(s["summary"] or {}).get("output_throughput_tok_s")
                                            for s in run["steps"]], "client", 2, 1)
        spec = [b.get("speculative") or {} for b in blocks]
        if any(s.get("acceptance_length") is not None for s in spec):  # speculative decoding, tokens per step
            add(i, run, "spec tokens/step", [s.get("acceptance_length") for s in spec], "speculative", 1, 1)
        for name in sorted({k for b in blocks for k in (b.get("histograms") or {})}):
            located = [from_json((b.get("histograms") or {}).get(name), "p50") for b in blocks]
            y, minus, plus = _located_points([None if p is None else p.scaled(1e3) for p in located])
            add(i, run, f"{name} p50", y, "histograms", 2, 2,
                {"error_y": {"type": "data", "symmetric": False, "array": plus, "arrayminus": minus},
                 "text": [describe(None if p is None else p.scaled(1e3), unit="ms") for p in located],
                 "hovertemplate": "%{x}: %{text}"})
    _mark_empty(fig, 2, 2)
    return _layout(fig, "What the server counted, per step (its /metrics)", height=660)


def _located_points(located: Sequence[Located | None]) -> tuple[list[float | None], list[float], list[float]]:
    """Each histogram percentile as a point and its error bars: a number where its bucket locates it, else the
    middle of its bucket with bars to the bucket's edges (`tokometer.observe.buckets`); a ``+Inf`` bucket's
    lower edge (an arrow up would need a marker of its own: the hover text says ``> X``)."""
    y: list[float | None] = []
    minus: list[float] = []
    plus: list[float] = []
    for p in located:
        if p is None or p.kind in ("value", "above", "unknown") or p.lower is None or p.upper is None:
            point = None if p is None else p.lower if p.kind == "above" else p.estimate
            y.append(point)
            minus.append(0.0)
            plus.append(0.0)
            continue
        middle = (p.lower + p.upper) / 2
        y.append(middle)
        minus.append(middle - p.lower)
        plus.append(p.upper - middle)
    return y, minus, plus


def _mark_empty(fig: Any, rows: int, cols: int) -> None:
    """Write "not reported" across each panel of ``fig`` that got no trace."""
    used = {(t.xaxis or "x", t.yaxis or "y") for t in fig.data if any(v is not None for v in t.y or ())}
    for row in range(1, rows + 1):
        for col in range(1, cols + 1):
            n = (row - 1) * cols + col
            axes = ("x" if n == 1 else f"x{n}", "y" if n == 1 else f"y{n}")
            if axes not in used:
                x = fig.layout[axes[0].replace("x", "xaxis")].domain
                y = fig.layout[axes[1].replace("y", "yaxis")].domain
                fig.add_annotation(text="not reported", showarrow=False, xref="paper", yref="paper",
                                   x=(x[0] + x[1]) / 2, y=(y[0] + y[1]) / 2, font={"color": "#888"})


_GPU_PANELS = (
    ("utilization_mean", "utilisation (%), mean", 100.0),
    ("memory_used_max_bytes", "memory used (GiB), max", 1 / 2**30),
    ("power_mean_w", "power (W), mean; limit dotted", 1.0),
    ("sm_clock_mean_mhz", "SM clock (MHz), mean", 1.0),
    ("temperature_max_c", "temperature (°C), max", 1.0),
    ("joules_per_output_token", "energy per output token (J)", 1.0),
)
"""Each GPU panel: the `GpuWindow` field it plots, its title, and the scale to the title's unit."""


def gpu(runs: Sequence[Run]) -> Any:
    """Each GPU's telemetry per step: utilisation, memory, power against its limit, clock, heat, J/token."""
    runs = _per_step(runs, "gpu")
    if not runs:
        return None
    go = _go()
    fig = _subplots(rows=2, cols=3, subplot_titles=[title for _, title, _ in _GPU_PANELS])
    for i, run in enumerate(runs):
        labels = [s["label"] for s in run["steps"]]
        indices = sorted({int(g.get("index", 0)) for s in run["steps"] for g in s["gpu"] or ()})
        for dash, index in enumerate(indices):
            per_step: list[Mapping[str, Any]] = [
                next((g for g in s["gpu"] or () if int(g.get("index", 0)) == index), {}) for s in run["steps"]]
            line = {"color": _colour(i), "dash": _DASHES[dash % len(_DASHES)]}
            legend = True
            for panel, (key, _, scale) in enumerate(_GPU_PANELS):
                values = [None if g.get(key) is None else g[key] * scale for g in per_step]
                if all(v is None for v in values):
                    continue
                fig.add_trace(go.Scatter(x=labels, y=values, mode="lines+markers", line=line,
                                         name=f"GPU {index} · {run['name']}", legendgroup=f"{run['id']}-{index}",
                                         showlegend=legend, meta={"run": run["id"], "gpu": index, "name": key}),
                              row=panel // 3 + 1, col=panel % 3 + 1)
                legend = False
            limits = [g.get("power_limit_w") for g in per_step]
            if any(v is not None for v in limits):
                fig.add_trace(go.Scatter(x=labels, y=limits, mode="lines", line={**line, "dash": "dot"},
                                         name=f"GPU {index} power limit", legendgroup=f"{run['id']}-{index}",
                                         showlegend=False, meta={"run": run["id"], "gpu": index,
                                                                 "name": "power_limit_w"}), row=1, col=3)
    _mark_empty(fig, 2, 3)
    return _layout(fig, "GPU telemetry, per step", height=640)


_EFFICIENCY = (("mbu", "MBU: decode memory bandwidth (%)"), ("decode_mfu", "decode MFU (%)"),
               ("prefill_mfu", "prefill MFU (%)"))


def efficiency(runs: Sequence[Run]) -> Any:
    """MBU, decode MFU and prefill MFU per step (`tokometer estimate --run`), over the band from what a
    well-tuned engine is expected to reach to the bound (100 %)."""
    judged = [run for run in runs if run["efficiency"]]
    if not judged:
        return None
    go = _go()
    fig = _subplots(rows=1, cols=3, subplot_titles=[title for _, title in _EFFICIENCY])
    expected = judged[0]["efficiency"]["expected"]
    for col, (key, _) in enumerate(_EFFICIENCY, 1):
        fig.add_hrect(y0=expected[key] * 100, y1=100, fillcolor="#2a9d8f", opacity=0.12, line_width=0, row=1, col=col,
                      annotation_text=f"expected {expected[key]:.0%} → bound", annotation_position="bottom left",
                      exclude_empty_subplots=False)
    for i, run in enumerate(judged):
        steps = run["efficiency"]["steps"]
        labels = [s["label"] for s in steps]
        for col, (key, _) in enumerate(_EFFICIENCY, 1):
            values = [None if s[key] is None else s[key] * 100 for s in steps]
            fig.add_trace(go.Scatter(x=labels, y=values, mode="lines+markers", name=run["name"],
                                     line={"color": _colour(i)}, showlegend=col == 1,
                                     customdata=[s["bottleneck"] for s in steps],
                                     hovertemplate="%{x}: %{y:.1f}% (bottleneck: %{customdata})<extra></extra>",
                                     meta={"run": run["id"], "name": key}), row=1, col=col)
    for col, (key, _) in enumerate(_EFFICIENCY, 1):
        top = max([s[key] * 100 for run in judged for s in run["efficiency"]["steps"] if s[key] is not None],
                  default=0.0)
        fig.update_yaxes(range=[0, max(105.0, top * 1.08)], row=1, col=col)
    eff = judged[0]["efficiency"]
    return _layout(fig, f"Efficiency against the roofline: {eff['model']} on {eff['hardware']}", height=420)
