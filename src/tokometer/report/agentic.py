"""Agent sessions (``bench --agents``) in the console and the HTML report: lines and tables of a step's
``agentic`` block (`tokometer.metrics.agentic`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["AGENT_TURN_COLUMNS", "agent_lines", "agent_turn_tables"]

AGENT_TURN_COLUMNS = ("turn", "agents", "ok", "failed", "TTFT p50 ms", "decode p50 ms", "tool wait p50 ms",
                      "prompt tokens", "cache share")


def _f(value: Any, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _share(value: Any) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def agent_lines(stats: Mapping[str, Any] | None) -> list[str]:
    """One line for the sessions (task time, tool wait, cache reuse), then one per turn."""
    if not stats:
        return []
    task, tools, busy = stats["task_s"], stats["tool_wait_s"], stats["in_requests_s"]
    out = [f"agent sessions: {stats['sessions']} ({stats['completed']} completed, {stats['failed']} with a failed "
           f"turn); turns per session {_f(stats['turns']['mean'])}, agents {_f(stats['agents']['mean'])}; task "
           f"time p50 {_f(task['p50'], 2)} s, p99 {_f(task['p99'], 2)} s (start to last token); waiting on tools "
           f"p50 {_f(tools['p50'], 2)} s, in requests p50 {_f(busy['p50'], 2)} s; prefix cache "
           f"{_share(stats['prompt_cache_hit_rate'])} of prompt tokens (as the server said)"]
    for row in stats["by_turn"]:
        out.append(f"  turn {row['turn']} ({', '.join(row['agents'])}): {row['requests']} ok"
                   + (f", {row['failed']} failed" if row["failed"] else "")
                   + f"; TTFT p50 {_f(row['ttft_ms']['p50'], 2)} ms, decode p50 {_f(row['decode_ms']['p50'], 2)} "
                   f"ms, tool wait p50 {_f(row['tool_wait_ms']['p50'], 1)} ms; prompt "
                   f"{_f(row['input_tokens_mean'], 0)} tokens, {_share(row['prompt_cache_hit_rate'])} cached")
    return out


def _turn_row(row: Mapping[str, Any]) -> list[Any]:
    return [row["turn"], ", ".join(row["agents"]), row["requests"], row["failed"], _f(row["ttft_ms"]["p50"], 2),
            _f(row["decode_ms"]["p50"], 2), _f(row["tool_wait_ms"]["p50"]), _f(row["input_tokens_mean"], 0),
            _share(row["prompt_cache_hit_rate"])]


def agent_turn_tables(runs: Sequence[Mapping[str, Any]]) -> list[tuple[str, list[str], list[list[Any]]]]:
    """(title, the sessions' line, per-turn rows) for every step of ``runs`` (report data) with agent sessions."""
    out = []
    for run in runs:
        for step in run.get("steps") or ():
            stats = (step.get("summary") or {}).get("agentic")
            if stats:
                out.append((f"{run.get('name', '')}, {step.get('label', '')}", agent_lines(stats)[:1],
                            [_turn_row(row) for row in stats["by_turn"]]))
    return out
