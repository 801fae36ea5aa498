"""The headline numbers and the per-step table of a report, as text: one source for the HTML page and the
markdown summary. Input: one run of `tokometer.report.data.report_data`'s ``runs``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tokometer.report import tables
from tokometer.report.beside import beside_lines
from tokometer.util.shown import clipped

__all__ = ["columns", "describe", "fmt", "headline", "reasoning_line", "startup_line", "step_rows"]



def columns() -> tuple[str, ...]:
    """The per-step table's columns: the load, its counts, `tokometer.report.tables.REPORT_SWEEP`, and the
    knee's power."""
    return ("load", "ok", "failed", *(c.title for c in tables.REPORT_SWEEP), "power")


def fmt(value: float | int | None, digits: int = 1) -> str:
    """A number for a table: thousands separated, ``-`` for none."""
    if value is None:
        return "-"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.{digits}f}"


def _dist(summary: Mapping[str, Any], name: str, key: str) -> float | None:
    value = (summary.get(name) or {}).get(key)
    return float(value) if isinstance(value, (int, float)) else None


def step_rows(run: Mapping[str, Any]) -> list[list[str]]:
    """One row of `columns` per step; the knee's load is marked ``(knee)`` (each of its trials), a find-max
    probe ``(met)`` or ``(missed)``."""
    rows = []
    knee = run["loads"][run["knee_load"]]["steps"] if run.get("knee_load") is not None else []
    for position, step in enumerate(run["steps"]):
        s = step["summary"] or {}
        label = step["label"] + (" (knee)" if position in knee else "")
        probe = step.get("probe")
        label += "" if probe is None else " (met)" if probe["passed"] else " (missed)"
        label += " (interrupted)" if step["interrupted"] else ""
        rows.append([label, fmt(s.get("requests_completed")), fmt(s.get("requests_failed")),
                     *(fmt(c.read(s), c.digits) for c in tables.REPORT_SWEEP), fmt(step["power"], 0)])
    return rows


def reasoning_line(reasoning: Mapping[str, Any]) -> str:
    """A step's reasoning in one sentence, from its summary's ``reasoning`` (`ReasoningSummary.to_json`)."""
    tokens = reasoning.get("reasoning_tokens") or {}
    share = reasoning.get("reasoning_share")
    sources = ", ".join(f"{k} {v}" for k, v in sorted((tokens.get("source") or {}).items())) or "none"
    line = (f"reasoning: {reasoning.get('requests')} answers reasoned, "
            f"{fmt(_dist(tokens, 'per_request', 'mean'))} reasoning tokens each on average (counted by: {sources}), "
            f"{fmt(100 * share if share is not None else None, 0)}% of output tokens; time to first answer token "
            f"p50 {fmt(_dist(reasoning, 'ttfat_ms', 'p50'))} ms, p99 {fmt(_dist(reasoning, 'ttfat_ms', 'p99'))} ms; "
            f"answer decode p50 {fmt(_dist(reasoning, 'answer_decode_speed_tok_s', 'p50'))} tok/s "
            "(TPOT and decode speed count reasoning and answer tokens)")
    if tokens.get("hidden"):
        line += (f"; {tokens['hidden']} reasoning tokens were counted by the server but never streamed "
                 "(left out of TPOT, ITL and decode speed)")
    if reasoning.get("no_answer"):
        line += f"; {reasoning['no_answer']} ended before their answer began"
    return line


def startup_line(engine: Any) -> str | None:
    """``Engine started in ...`` for a run's engine identity (an `EngineIdentity` or its dict) whose start-up
    was timed (`tokometer.engines.startup`), else None."""
    from tokometer.engines.startup import startup_of

    facts = getattr(engine, "facts", engine)
    startup = startup_of(facts if isinstance(facts, Mapping) else None)
    return f"Engine {startup.describe()}" if startup is not None else None


def describe(run: Mapping[str, Any]) -> str:
    """What was measured: ``model M at URL (api); engine E VERSION`` (and its start-up where it was timed)."""
    from tokometer.engines.startup import startup_of

    engine = run["engine"] or {}
    what = f"model {clipped(run['model'])} at {run['target']} ({run['api']})"
    if engine.get("engine"):
        what += f"; engine {engine['engine']} {engine.get('engine_version') or ''}".rstrip()
    if (startup := startup_of(engine)) is not None:
        what += f", {startup.describe()}"
    return what


def _session_lines(done: list[tuple[Mapping[str, Any], Mapping[str, Any]]]) -> list[str]:
    """Multi-turn sessions: TTFT as the history grows, turn by turn, a sentence per step that has turns."""
    lines = []
    for step, s in done:
        turns = [t for t in s.get("per_turn") or [] if (t.get("ttft_ms") or {}).get("p50") is not None]
        if len(turns) > 1:
            cache = turns[-1].get("prompt_cache_hit_rate")
            lines.append(f"Sessions at {step['label']}: TTFT p50 by turn " + ", ".join(
                f"{fmt(float(t['ttft_ms']['p50']))}" for t in turns) + f" ms (turns 1-{turns[-1]['turn']}; prompt "
                f"{fmt(turns[0].get('input_tokens_mean'), 0)} to {fmt(turns[-1].get('input_tokens_mean'), 0)} tokens"
                + (f", {100 * cache:.0f}% of the last turn's from the server's cache" if cache is not None else "")
                + ").")
    return lines


def headline(run: Mapping[str, Any]) -> list[str]:
    """A few sentences: the knee, the fastest single request, the most throughput, failures, the client."""
    steps = run["steps"]
    done = [(step, step["summary"]) for step in steps if step["summary"]]
    if not done:
        return [f"{run['name']}: no step finished."]
    lines = []
    if run.get("knee_load") is not None:
        load = run["loads"][run["knee_load"]]
        pooled = f" ({load['trials']} trials pooled)" if load["trials"] > 1 else ""
        lines.append(f"Knee (most throughput × per-request speed): {load['label']}{pooled}, "
                     f"{fmt(load['output_throughput_tok_s'])} output tok/s in all at "
                     f"{fmt(load['decode_speed_p50'])} tok/s per request, TTFT p50 {fmt(load['ttft_p50_ms'])} ms.")
    elif len(run.get("loads") or []) == 1:
        lines.append("No knee: the run has one load (a knee is a trade-off between loads; trials of one load "
                     "are pooled).")
    search = run.get("find_max")
    if search:
        lines.append(f"Find max: {search['answer']}.")
        probes = {p["step"]: p for p in search["probes"]}
        verdicts = [f"{step['label']} {'met' if probes[step['step']]['passed'] else 'missed'}"
                    + ("" if probes[step["step"]]["passed"] else f" ({'; '.join(probes[step['step']]['misses'])})")
                    for step in sorted(steps, key=lambda st: st["step"]) if step["step"] in probes]
        lines.append("Probes, in the order run: " + ", ".join(verdicts) + ".")
    fastest = max(done, key=lambda d: _dist(d[1], "decode_speed_tok_s", "p50") or 0.0)
    busiest = max(done, key=lambda d: d[1].get("output_throughput_tok_s") or 0.0)
    lines.append(f"Fastest per request: {fmt(_dist(fastest[1], 'decode_speed_tok_s', 'p50'))} tok/s "
                 f"(decode p50 at {fastest[0]['label']}); most in all: "
                 f"{fmt(busiest[1].get('output_throughput_tok_s'))} output tok/s (at {busiest[0]['label']}).")
    lines += _session_lines(done)
    lines += beside_lines(done)
    reasoned = [(step, s["reasoning"]) for step, s in done if s.get("reasoning")]
    if reasoned:
        step, reasoning = reasoned[-1]
        lines.append(f"Reasoning model: time to first answer token p50 "
                     f"{fmt(_dist(reasoning, 'ttfat_ms', 'p50'))} ms against TTFT p50 "
                     f"{fmt(_dist(step['summary'], 'ttft_ms', 'p50'))} ms; "
                     f"{fmt(100 * (reasoning.get('reasoning_share') or 0.0), 0)}% of output tokens were reasoning "
                     f"(at {step['label']}).")
    failed = sum(int(s.get("requests_failed") or 0) for _, s in done)
    completed = sum(int(s.get("requests_completed") or 0) for _, s in done)
    lines.append(f"Requests: {completed:,} completed, {failed:,} failed.")
    troubled = [step["label"] for step in steps if (step["health"] or {}).get("saturated")]
    checked = [step for step in steps if step["health"]]  # an imported run has no self-check of the client
    if troubled:
        lines.append(f"The client could not keep up at {', '.join(troubled)}: those steps measure the client.")
    elif checked:
        lines.append("The client kept up at every step." if len(checked) == len(steps) else
                     f"The client kept up at the {len(checked)} of {len(steps)} steps it checked itself in.")
    noted = [(step["label"], step["health"]["note"]) for step in steps if (step["health"] or {}).get("note")]
    if noted:
        lines.append(f"Self-check notes at {', '.join(label for label, _ in noted)}; at {noted[0][0]}: "
                     f"{noted[0][1]}.")
    return lines
