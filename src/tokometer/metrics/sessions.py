"""Per-turn and per-session metrics of multi-turn chat sessions (``bench --sessions``), from their records.

Records of a session carry ``session`` and ``turn`` (from 0; `tokometer.records`). Over the measured
requests (warm-up sessions left out):

- **per turn** (`per_turn`): for turn k (1-based in the output) the completed and failed requests, the TTFT
  distribution, the mean prompt length the server counted (it grows with the history), and the share of
  the prompt the server took from its prompt cache: how TTFT behaves as the history grows, and whether the
  server reused the history's KV;
- **per session** (`session_stats`): sessions seen, those that ran every turn they started without a
  failure (``completed``) and those a failed turn ended (``failed``), turns and duration (first send to
  last end, think times included) per session, completed sessions per second, and ``ttft_turn_growth``:
  TTFT p50 of the last turn that at least half the sessions reached / TTFT p50 of the first turn.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from tokometer.metrics import request as m
from tokometer.metrics.distribution import Distribution
from tokometer.metrics.promptcache import prompt_cache_hit_rate
from tokometer.records import RequestRecord

__all__ = ["per_turn", "session_stats"]

_MS = 1e-6


def _measured(records: Sequence[RequestRecord]) -> list[RequestRecord]:
    return [r for r in records if not r.warmup and r.sent_ns and r.session is not None and r.turn is not None]


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def per_turn(records: Sequence[RequestRecord]) -> list[dict[str, Any]] | None:
    """One entry per turn number (``turn`` from 1), or None when no record belongs to a session."""
    by_turn: dict[int, list[RequestRecord]] = defaultdict(list)
    for r in _measured(records):
        assert r.turn is not None
        by_turn[r.turn].append(r)
    if not by_turn:
        return None
    out = []
    for turn in sorted(by_turn):
        ok = [r for r in by_turn[turn] if r.ok]
        cached = [float(n) for n in (r.server.cached_tokens for r in ok if r.server is not None) if n is not None]
        out.append({
            "turn": turn + 1,
            "requests": len(ok),
            "failed": len(by_turn[turn]) - len(ok),
            "ttft_ms": Distribution.of((v for v in map(m.ttft_ns, ok) if v is not None), _MS).to_json(),
            "input_tokens_mean": _mean([float(r.input_tokens) for r in ok if r.input_tokens is not None]),
            "cached_tokens_mean": _mean(cached),
            "prompt_cache_hit_rate": prompt_cache_hit_rate(ok),
        })
    return out


def session_stats(records: Sequence[RequestRecord]) -> dict[str, Any] | None:
    """The step's sessions in aggregate, or None when no record belongs to a session."""
    by_session: dict[int, list[RequestRecord]] = defaultdict(list)
    for r in _measured(records):
        assert r.session is not None
        by_session[r.session].append(r)
    if not by_session:
        return None
    failed = sum(1 for rs in by_session.values() if any(not r.ok for r in rs))
    first = min(r.sent_ns for rs in by_session.values() for r in rs)
    last = max(r.end_ns for rs in by_session.values() for r in rs)
    span_s = (last - first) / 1e9
    completed = len(by_session) - failed
    return {
        "sessions": len(by_session),
        "completed": completed,
        "failed": failed,
        "turns": Distribution.of(float(len(rs)) for rs in by_session.values()).to_json(),
        "duration_s": Distribution.of(
            (max(r.end_ns for r in rs) - min(r.sent_ns for r in rs)) / 1e9 for rs in by_session.values()).to_json(),
        "session_throughput_sps": completed / span_s if span_s > 0 else None,
        "ttft_turn_growth": _turn_growth(records, len(by_session)),
    }


def _turn_growth(records: Sequence[RequestRecord], sessions: int) -> float | None:
    turns = per_turn(records) or []
    reached = [t for t in turns if t["requests"] * 2 >= sessions and t["ttft_ms"]["p50"] is not None]
    if len(reached) < 2 or not reached[0]["ttft_ms"]["p50"]:
        return None
    return float(reached[-1]["ttft_ms"]["p50"]) / float(reached[0]["ttft_ms"]["p50"])
