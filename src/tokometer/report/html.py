"""``tokometer report -o report.html``: one self-contained page that works offline.

Everything is inside the file: plotly.js (written in once, from the ``plotly`` package), the charts of
`tokometer.report.charts`, the tables, and the numbers the charts plot, whole, as JSON in
``<script type="application/json" id="tokometer-data">`` (`tokometer.report.data`) so that they can be
read back. The page fetches nothing: no CDN, no fonts, no MathJax.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from tokometer.report import charts
from tokometer.report.agentic import AGENT_TURN_COLUMNS, agent_turn_tables
from tokometer.report.headline import columns, describe, fmt, headline, step_rows
from tokometer.report.pareto import PARETO_COLUMNS, pareto_lines, pareto_rows, pareto_title
from tokometer.report.slices import slice_columns, slice_tables
from tokometer.report.steady import STEADY_NOTE, steady_columns, steady_rows
from tokometer.report.tenants import TENANT_COLUMNS, tenant_tables
from tokometer.util.jsontext import dumps

__all__ = ["CHART_IDS", "DATA_ID", "embed_json", "render_html"]

DATA_ID = "tokometer-data"
CHART_IDS = {"rate": "chart-rate-throughput", "ttft": "chart-ttft-cdf", "tpot": "chart-tpot-cdf",
             "timeline": "chart-timeline-run-{id}", "server": "chart-server", "gpu": "chart-gpu",
             "efficiency": "chart-efficiency", "ttft_load": "chart-ttft-load", "slices": "chart-time-slices"}
"""The ``id`` of each chart's element (``.data`` there holds the traces Plotly drew)."""

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0 auto; max-width: 1200px;
       padding: 1rem 1.5rem 3rem; color: #222; }
h1 { font-size: 1.6rem; margin-bottom: .2rem; } h2 { margin-top: 2.2rem; border-bottom: 1px solid #ddd; }
.meta, .note { color: #555; } .note { font-style: italic; }
table { border-collapse: collapse; margin: .6rem 0 1rem; font-size: .9rem; }
th, td { border-bottom: 1px solid #e4e4e4; padding: .25rem .6rem; text-align: right; }
th:first-child, td:first-child { text-align: left; } th { background: #f6f6f6; }
td.text, th.text { text-align: left; } tr.bad td { color: #b00020; }
pre { background: #f6f6f6; padding: .6rem; overflow-x: auto; font-size: .8rem; }
.chart { margin: .5rem 0 1.5rem; }
"""


def embed_json(data: Any) -> str:
    """``data`` as JSON safe inside a ``<script>`` element (``<``, ``>`` and ``&`` escaped; NaN as null)."""
    text = dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def _e(value: Any) -> str:
    return html.escape(str(value))


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], text_columns: Sequence[int] = (0,),
           bad: Sequence[bool] = ()) -> str:
    """An HTML table; the ``text_columns`` are aligned left, the others (numbers) right; ``bad`` rows in red."""

    def cell(tag: str, i: int, value: Any) -> str:
        kind = ' class="text"' if i in text_columns else ""
        return f"<{tag}{kind}>{_e(value)}</{tag}>"

    def tr(i: int, row: Sequence[Any]) -> str:
        marked = ' class="bad"' if i < len(bad) and bad[i] else ""
        return f"<tr{marked}>" + "".join(cell("td", j, v) for j, v in enumerate(row)) + "</tr>"

    head = "".join(cell("th", i, h) for i, h in enumerate(header))
    body = "".join(tr(i, row) for i, row in enumerate(rows))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _chart(fig: Any, div_id: str) -> str:
    import plotly.io as pio

    chart: str = pio.to_html(fig, full_html=False, include_plotlyjs=False, div_id=div_id,
                             config={"displaylogo": False, "responsive": True})
    return f'<div class="chart">{chart}</div>'


def _note(text: str) -> str:
    return f'<p class="note">{_e(text)}</p>'


def _summary(runs: Sequence[Mapping[str, Any]]) -> str:
    parts = []
    for run in runs:
        what = describe(run)
        items = "".join(f"<li>{_e(line)}</li>" for line in headline(run))
        parts.append(f"<h3>{_e(run['name'])}: {_e(what)}</h3><p class=\"meta\">{_e(run['status'])}, started "
                     f"{_e(run['started_at'])}</p><ul>{items}</ul>{_table(columns(), step_rows(run))}")
    return "".join(parts)


def _share(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def _health(runs: Sequence[Mapping[str, Any]]) -> str:
    header = ("load", "verdict", "client lag p99 ms", "limit ms", "loop lag p99 ms", "limit ms", "client CPU",
              "host CPU busy", "workers", "note")
    parts = []
    for run in runs:
        rows, bad = [], []
        for step in run["steps"]:
            h = step["health"]
            if not h:
                rows.append([step["label"], "not measured", *["-"] * 7, ""])
                bad.append(False)
                continue
            rows.append([step["label"], h.get("verdict", ""), fmt(h.get("client_lag_p99_ms"), 2),
                         fmt(h.get("client_lag_limit_ms"), 1), fmt(h.get("loop_lag_p99_ms"), 2),
                         fmt(h.get("loop_lag_limit_ms"), 1), _share(h.get("cpu_fraction")),
                         _share(h.get("host_cpu_busy")), fmt(h.get("workers")),
                         "; ".join([*h.get("problems", []), h.get("note") or ""]).strip("; ")])
            bad.append(bool(h.get("saturated")))
        parts.append(f"<h3>{_e(run['name'])}</h3>{_table(header, rows, text_columns=(0, 1, len(header) - 1), bad=bad)}")
    return "".join(parts)


def _facts(title: str, facts: Mapping[str, Any] | None) -> str:
    if not facts:
        return f"<h4>{_e(title)}</h4>" + _note("not recorded")
    rows = [[k, dumps(v, ensure_ascii=False) if isinstance(v, (dict, list)) else ("-" if v is None else v)]
            for k, v in facts.items()]
    return f"<h4>{_e(title)}</h4>" + _table(("name", "value"), rows, text_columns=(0, 1))


def _details(runs: Sequence[Mapping[str, Any]]) -> str:
    parts = []
    for run in runs:
        parts.append(f"<h3>{_e(run['name'])}</h3><details><summary>spec, engine and host</summary>"
                     f"{_facts('spec (as saved; secret headers redacted)', run['spec'])}"
                     f"{_facts('engine', run['engine'])}{_facts('host', run['host'])}</details>")
    return "".join(parts)


def _pareto(front: Mapping[str, Any] | None) -> str:
    """The Pareto front's table and sentences (`tokometer.report.pareto`), under the chart that draws it."""
    if not front:
        return ""
    return (f"<h3>Pareto front</h3>{_note(pareto_title(front))}"
            + _table(PARETO_COLUMNS, pareto_rows(front), text_columns=(0, 1, 2, 5))
            + "".join(f"<p>{_e(line)}</p>" for line in pareto_lines(front)))


def _slices(runs: Sequence[Mapping[str, Any]]) -> str:
    """A chart of every step's time slices, then a table per step (`tokometer.report.slices`); a note when no
    step has them."""
    tables = slice_tables(runs)
    if not tables:
        return _note("No step of these runs was cut into time slices (bench --time-slice).")
    chart = _chart(charts.time_slices(runs), CHART_IDS["slices"])
    return chart + "".join(f"<h3>{_e(title)}</h3>" + _table(slice_columns(), rows, text_columns=())
                           for title, rows in tables) + _note(
        "A request belongs to the slice it was sent in; output tokens to the slice they arrived in; the load "
        "(concurrency, send rate) counts warm-up requests too (the metric definitions page, \"Time slices and "
        "steady state\").")


def _agents(runs: Sequence[Mapping[str, Any]]) -> str:
    """Per step with agent sessions (bench --agents), its sessions' line and a table of its turns."""
    found = agent_turn_tables(runs)
    if not found:
        return _note("No step of these runs ran agent sessions (bench --agents).")
    return "".join(f"<h3>{_e(title)}</h3>" + "".join(_note(line) for line in lines)
                   + _table(AGENT_TURN_COLUMNS, rows, text_columns=(1,)) for title, lines, rows in found)
def _tenants(runs: Sequence[Mapping[str, Any]]) -> str:
    """A table per step of a tenant mix (``bench --mix``, `tokometer.report.tenants`)."""
    return "".join(f"<h3>{_e(title)}</h3>" + _table(TENANT_COLUMNS, rows, text_columns=(0, 11))
                   for title, rows in tenant_tables(runs)) + _note(
        "Each tenant against its own SLO; throughput and goodput over the whole step's duration, so the tenants' "
        "add up to the mix's.")


def _optional(fig: Any, div_id: str, absent: str) -> str:
    return _chart(fig, div_id) if fig is not None else _note(absent)


def render_html(data: Mapping[str, Any]) -> str:
    """The whole page for `tokometer.report.data.report_data`'s ``data``; needs the ``report`` extra."""
    charts.require_plotly()
    from plotly.offline import get_plotlyjs

    runs = data["runs"]
    timelines = "".join(_chart(charts.timeline(run), CHART_IDS["timeline"].format(id=run["id"])) for run in runs)
    notes = [f"{run['name']}: {run['efficiency_note']}" for run in runs if run["efficiency_note"]]
    notes += [f"{run['name']}, {step['label']}: {over['message']} (left out of the chart: not an efficiency)"
              for run in runs if run["efficiency"] for step in run["efficiency"]["steps"]
              for over in step.get("over_peak", {}).values()]
    efficiency = charts.efficiency(runs)
    sections = [
        ("Summary", _summary(runs)),
        ("Per-request speed vs aggregate throughput", _chart(charts.rate_vs_throughput(runs, data.get("pareto")),
                                                             CHART_IDS["rate"])
         + _note("Each point is a step, at its p50 decode speed and its output throughput. The knee (★) is the "
                 "step with the largest power, output tok/s × decode tok/s per request: past it, more load buys "
                 "mostly waiting (tokometer/metrics/knee.py; the metric definitions page). The knee is over loads: "
                 "the trials of a load are pooled, one load has no knee, and a find-max probe that missed its "
                 "objectives (✕) is never it; ◆ marks the find-max answer.") + _pareto(data.get("pareto"))),
        ("TTFT against load", _optional(charts.ttft_vs_load(runs), CHART_IDS["ttft_load"],
                                        "Fewer than two loads of one kind: no TTFT-against-load chart.")),
        ("Steady state", _table(steady_columns(), steady_rows(runs), text_columns=(0, 1, 2, 6)) + _note(STEADY_NOTE)),
        ("Time slices", _slices(runs)),
        ("Agent sessions", _agents(runs)),
        *([("Tenants", _tenants(runs))] if tenant_tables(runs) else []),
        ("Latency distributions", _chart(charts.cdf(runs, "ttft_ms", "TTFT per step (CDF)", "TTFT, ms"),
                                         CHART_IDS["ttft"])
         + _chart(charts.cdf(runs, "tpot_ms", "TPOT per step (CDF)", "TPOT, ms"), CHART_IDS["tpot"])),
        ("Request timeline", timelines + _note(
            "Client lag: scheduled → sent. Wait and prefill split TTFT where the server reported its own prompt "
            "time (wait = TTFT − that time); otherwise TTFT is one bar. Decode: first token → end of the stream.")),
        ("Server metrics", _optional(charts.server(runs), CHART_IDS["server"],
                                     "None of these runs has the server's own /metrics account.")),
        ("GPU telemetry", _optional(charts.gpu(runs), CHART_IDS["gpu"], "None of these runs read a GPU.")),
        ("Efficiency against the roofline", (_chart(efficiency, CHART_IDS["efficiency"]) if efficiency else "")
         + "".join(_note(n) for n in notes)),
        ("The client's self-check", _health(runs)),
        ("Runs: spec, engine, host", _details(runs)),
    ]
    body = "".join(f"<section><h2>{_e(title)}</h2>{content}</section>" for title, content in sections)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{_e(data["title"])}</title>'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<meta name=\"generator\" content=\"tokometer {_e(data['tokometer_version'])}\">"
            f"<style>{_CSS}</style><script type=\"text/javascript\">{get_plotlyjs()}</script></head><body>"
            f"<h1>{_e(data['title'])}</h1><p class=\"meta\">tokometer {_e(data['tokometer_version'])}; "
            f"{len(runs)} run{'s' if len(runs) != 1 else ''}; this page works offline and carries its numbers "
            f"as JSON (<code>#{DATA_ID}</code>).</p>{body}"
            f'<script type="application/json" id="{DATA_ID}">{embed_json(data)}</script></body></html>\n')
