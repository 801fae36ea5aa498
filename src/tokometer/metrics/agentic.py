"""Per-turn and per-session metrics of agent sessions (``bench --agents``), from their records.

The records of an agent session carry ``session``, ``turn`` (its index in the session), ``agent`` and
``ready_ns`` (when what the turn waited for had ended; `tokometer.load.agentic`). The turns' TTFT, prompt
length and cache share also appear in the sessions' blocks (`tokometer.metrics.sessions`); this block adds
what is an agent's own:

- **per turn** (``by_turn``, ``turn`` from 1): TTFT, decode time (first to last token), the time the turn
  waited on its tool (``tool_wait_ms``: from ``ready_ns`` to sending, the client's wait, not the server's),
  the prompt length and the share the server said it took from its prefix cache;
- **per session** (``by_session``, at most `MAX_SESSION_ROWS`): its turns and agents, ``task_s`` (end-to-end:
  the session's start to the last token of its last turn), ``tool_wait_s`` (the time no request of it was in
  flight: waiting on tools), ``in_requests_s`` (the time at least one was), TTFT mean and cache share;
- over the sessions: their count, those without a failed turn, and the distributions of the above.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any, Final

from tokometer.metrics import request as m
from tokometer.metrics.distribution import Distribution
from tokometer.metrics.promptcache import prompt_cache_hit_rate
from tokometer.records import RequestRecord

__all__ = ["MAX_SESSION_ROWS", "agent_distribution", "agent_stats", "busy_ns"]

MAX_SESSION_ROWS: Final = 1000
"""Sessions listed one by one in ``by_session`` (the distributions cover them all)."""
_MS, _S = 1e-6, 1e-9


def _measured(records: Sequence[RequestRecord]) -> list[RequestRecord]:
    return [r for r in records if not r.warmup and r.sent_ns and r.agent is not None and r.session is not None
            and r.turn is not None]


def busy_ns(records: Sequence[RequestRecord], until_ns: int | None = None) -> int:
    """The time at least one of ``records`` was in flight (sent to end), overlaps counted once; with
    ``until_ns``, only up to then (a session's task ends at its last token, before its stream closes)."""
    total, reach = 0, 0
    for start, end in sorted((r.sent_ns, r.end_ns) for r in records if r.sent_ns and r.end_ns):
        end = end if until_ns is None else min(end, until_ns)
        if end <= reach:
            continue
        total += end - max(start, reach)
        reach = end
    return total


def _decode_ns(r: RequestRecord) -> int | None:
    return r.last_token_ns - r.first_token_ns if r.ok and r.first_token_ns and r.last_token_ns else None


def _tool_wait_ns(r: RequestRecord) -> int | None:
    return r.sent_ns - r.ready_ns if r.ready_ns and r.sent_ns >= r.ready_ns else None


def _turn_row(turn: int, rows: list[RequestRecord]) -> dict[str, Any]:
    ok = [r for r in rows if r.ok]
    inputs = [float(r.input_tokens) for r in ok if r.input_tokens is not None]
    cached = [float(n) for n in (r.server.cached_tokens for r in ok if r.server is not None) if n is not None]
    return {
        "turn": turn + 1,
        "agents": sorted({r.agent or "" for r in rows}),
        "requests": len(ok),
        "failed": len(rows) - len(ok),
        "ttft_ms": Distribution.of((v for v in map(m.ttft_ns, ok) if v is not None), _MS).to_json(),
        "decode_ms": Distribution.of((v for v in map(_decode_ns, ok) if v is not None), _MS).to_json(),
        "tool_wait_ms": Distribution.of((v for v in map(_tool_wait_ns, rows) if v is not None), _MS).to_json(),
        "input_tokens_mean": sum(inputs) / len(inputs) if inputs else None,
        "cached_tokens_mean": sum(cached) / len(cached) if cached else None,
        "prompt_cache_hit_rate": prompt_cache_hit_rate(ok),
    }


def _session_row(number: int, rows: list[RequestRecord]) -> dict[str, Any]:
    start = min(r.ready_ns or r.sent_ns for r in rows)
    end = max(r.last_token_ns or r.end_ns for r in rows)
    busy = busy_ns(rows, end)  # within the task: its tool wait and time in requests add up to it
    ttfts = [v for v in map(m.ttft_ns, rows) if v is not None]
    return {
        "session": number,
        "turns": len(rows),
        "agents": len({r.agent for r in rows}),
        "failed": sum(1 for r in rows if not r.ok),
        "task_s": (end - start) * _S,
        "tool_wait_s": max(0, end - start - busy) * _S,
        "in_requests_s": busy * _S,
        "ttft_ms_mean": sum(ttfts) / len(ttfts) * _MS if ttfts else None,
        "prompt_cache_hit_rate": prompt_cache_hit_rate([r for r in rows if r.ok]),
    }


def agent_stats(records: Sequence[RequestRecord]) -> dict[str, Any] | None:
    """The step's agent sessions, per turn and per session; None when no record is an agent's turn."""
    by_session: dict[int, list[RequestRecord]] = defaultdict(list)
    by_turn: dict[int, list[RequestRecord]] = defaultdict(list)
    for r in _measured(records):
        assert r.session is not None and r.turn is not None
        by_session[r.session].append(r)
        by_turn[r.turn].append(r)
    if not by_session:
        return None
    sessions = [_session_row(n, by_session[n]) for n in sorted(by_session)]
    completed = sum(1 for s in sessions if not s["failed"])

    def dist(key: str) -> dict[str, float | int | None]:
        return Distribution.of(float(s[key]) for s in sessions).to_json()

    return {
        "sessions": len(sessions),
        "completed": completed,
        "failed": len(sessions) - completed,
        "turns": dist("turns"),
        "agents": dist("agents"),
        "task_s": dist("task_s"),
        "tool_wait_s": dist("tool_wait_s"),
        "in_requests_s": dist("in_requests_s"),
        "prompt_cache_hit_rate": prompt_cache_hit_rate([r for rs in by_session.values() for r in rs if r.ok]),
        "by_turn": [_turn_row(k, by_turn[k]) for k in sorted(by_turn)],
        "by_session": sessions[:MAX_SESSION_ROWS],
    }


def agent_distribution(stats: dict[str, Any] | None, key: str) -> Distribution:
    """The distribution ``key`` of an `agent_stats` block (as saved), empty when there is none."""
    return Distribution.from_json((stats or {}).get(key))
