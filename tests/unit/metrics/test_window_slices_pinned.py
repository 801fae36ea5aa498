"""`tokometer.metrics.window.time_slices` gives exactly what its first, per-slice implementation gave.

That implementation walked every event of every request once per slice (minutes at the 1,000-slice cap with
10k requests). `_reference` below is a copy of it, kept here as the definition the faster one must match,
key for key and float for float, on hand-built records with the awkward cases: warm-up, failed and unsent
requests, fractional, empty and unsorted events, events outside the step, slices
widened at the cap, an SLO.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pytest

from tokometer.metrics.summary import SLO, summarize
from tokometer.metrics.window import MAX_SLICES, _Load, _target_mean, origin_ns, time_slices
from tokometer.records import RequestRecord

S = 1_000_000_000
T0 = 50 * S


def _ref_arrived(r: RequestRecord, a: int, b: int) -> float:
    if not r.ok or not r.output_tokens or not r.event_ns:
        return 0.0
    streamed = sum(r.event_tokens)
    if streamed <= 0:
        return 0.0
    inside = sum(k for t, k in zip(r.event_ns, r.event_tokens, strict=False) if a <= t < b)
    return inside * r.output_tokens / streamed


def _ref_window(records: Sequence[RequestRecord], chosen: Sequence[RequestRecord], load: _Load, t0: int, a: int,
                b: int, target: Any, slo: SLO | None) -> dict[str, Any]:
    length_s = (b - a) / 1e9
    measured = [r for r in records if not r.warmup and r.sent_ns]
    summary = summarize(chosen, slo)
    tokens = sum(_ref_arrived(r, t0 + a, t0 + b) for r in measured)
    completed = sum(1 for r in measured if r.ok and t0 + a <= r.end_ns < t0 + b)
    return {
        "start_s": round(a / 1e9, 6), "end_s": round(b / 1e9, 6),
        "requests": len(chosen), "completed": summary.requests_completed, "failed": summary.requests_failed,
        "target": _target_mean(target, a / 1e9, b / 1e9),
        "achieved_concurrency": round(load.concurrency(a, b), 6),
        "send_rate_rps": round(load.sends(a, b) / length_s, 6) if length_s > 0 else None,
        "request_throughput_rps": round(completed / length_s, 6) if length_s > 0 else None,
        "output_throughput_tok_s": round(tokens / length_s, 6) if length_s > 0 else None,
        "ttft_ms": summary.ttft_ms.to_json(), "ttst_ms": summary.ttst_ms.to_json(),
        "tpot_ms": summary.tpot_ms.to_json(), "itl_ms": summary.itl_ms.to_json(), "e2e_ms": summary.e2e_ms.to_json(),
        "goodput_rps": (round(sum(1 for r in chosen if r.ok and slo.met(r)) / length_s, 6)
                        if slo is not None and not slo.empty and length_s > 0 else None),
        "overload": summary.overload.to_json() if summary.overload is not None else None,
    }


def _reference(records: Sequence[RequestRecord], slice_s: float, target: Any,
               slo: SLO | None = None) -> dict[str, Any]:
    t0 = origin_ns(records)
    load = _Load(records, t0)
    span = int(load.end.max()) if load.end.size else 0
    width = int(slice_s * 1e9)
    note = None
    if span // width + 1 > MAX_SLICES:
        width = span // MAX_SLICES + 1
        note = f"{slice_s:g} s would cut this step into more than {MAX_SLICES} slices: slices of {width / 1e9:g} s"
    measured = [r for r in records if not r.warmup and r.sent_ns]
    slices = []
    for k in range(span // width + 1 if load.sent.size else 0):
        a, b = k * width, (k + 1) * width
        chosen = [r for r in measured if a <= r.sent_ns - t0 < b]
        slices.append({"index": k, **_ref_window(records, chosen, load, t0, a, b, target, slo)})
    return {"slice_s": width / 1e9, "requests_by": "sent", "note": note, "slices": slices}


def _records(seed: int, n: int = 120) -> list[RequestRecord]:
    """``n`` requests over about 6 s, of every awkward kind."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        sent = T0 + int(rng.uniform(0, 5) * S)
        first = sent + int(rng.uniform(0.01, 0.5) * S)
        events = rng.randint(1, 40)
        stamps = sorted(first + int(rng.uniform(0, 1.5) * S) for _ in range(events))
        tokens = [rng.choice((1.0, 1.0, 2.0, 0.3, 1.7, 0.1)) for _ in range(events)]
        kind = rng.random()
        r = RequestRecord(index=i, sent_ns=sent, due_ns=sent - int(rng.uniform(0, 0.05) * S),
                          first_byte_ns=stamps[0], first_token_ns=stamps[0], last_token_ns=stamps[-1],
                          end_ns=stamps[-1] + int(rng.uniform(0, 0.02) * S), event_ns=stamps, event_tokens=tokens,
                          output_tokens=max(1, int(sum(tokens) * rng.uniform(0.8, 1.3))),
                          output_tokens_source="usage", input_tokens=100, status=200, finish_reason="length")
        if kind < 0.08:
            r.warmup = True
        elif kind < 0.14:
            r.error, r.status = "http_5xx", 500
        elif kind < 0.18:
            r.sent_ns = 0  # never sent
        elif kind < 0.22:
            rng.shuffle(r.event_ns)  # stamps out of order (a store edited by hand)
        elif kind < 0.26:
            r.event_tokens = [0.0 if k % 3 else t for k, t in enumerate(r.event_tokens)]  # empty events
        elif kind < 0.29:
            r.event_tokens = [0.0] * len(r.event_tokens)  # nothing streamed
        elif kind < 0.32:
            r.output_tokens = None
        elif kind < 0.35:
            r.event_ns = [t - 60 * S for t in r.event_ns]  # stamps before the step's start
        elif kind < 0.38:
            r.event_ns = [t + 30 * S for t in r.event_ns]  # stamps after its last slice
        out.append(r)
    return out


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("slice_s", [0.25, 1.0, 0.7, 10.0, 0.000_003])
def test_time_slices_match_the_per_slice_definition(seed: int, slice_s: float) -> None:
    records = _records(seed)
    slo = SLO(ttft_ms=250.0) if seed % 2 else None

    def target(t: float) -> float:
        return min(8.0, 1 + t)

    assert time_slices(records, slice_s, target, slo) == _reference(records, slice_s, target, slo)


def test_an_empty_step_and_a_step_of_warm_up_alone_match() -> None:
    assert time_slices([], 1.0, lambda t: None) == _reference([], 1.0, lambda t: None)
    warm = [r for r in _records(7, 30) if r.sent_ns]
    for r in warm:
        r.warmup = True
    assert time_slices(warm, 0.5, lambda t: 2.0) == _reference(warm, 0.5, lambda t: 2.0)
