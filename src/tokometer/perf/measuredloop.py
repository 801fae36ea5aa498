"""A saved run's steps beside the closed-loop estimate of exactly their load (``estimate --run N``).

For each step of a run held at a fixed concurrency B (``bench -c B``: a closed loop), the estimate's batch
row for B users sending the step's own mean prompt and answer lengths (`tokometer.perf.closedloop`), set
beside what was measured:

    measured ITL        mean over the step's requests of each one's mean time between tokens (TPOT)
    measured TTFT       mean of the requests' TTFT
    measured tok/s      the step's output throughput (its summary; else output tokens / the step's span)
    estimated           `closed_loop(d, B, mean input, mean output)`, bound and expected, with the cached
                        tokens a step holds taken from the step's own lengths (`tokometer.perf.lengths`: a
                        step sees its long answers in proportion to their length)

Means, as the closed loop's are (a median ITL hides the few long steps that carry a prompt). A step at a
rate (an open loop) or from a trace has no fixed B: it is listed without an estimate, saying so.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tokometer.metrics.request import tpot_ns, ttft_ns
from tokometer.perf.closedloop import STEP_TOKENS, ClosedLoop, closed_loop
from tokometer.perf.lengths import LengthSums
from tokometer.perf.roofline import BOUND, Deployment, Efficiency

if TYPE_CHECKING:
    from tokometer.records import RequestRecord
    from tokometer.store.runs import StoredRun, StoredStep

__all__ = ["LoopBeside", "loops_beside"]


@dataclass(frozen=True)
class LoopBeside:
    """One step: its load, its mean lengths, what was measured and the closed loop estimated for it."""

    step: int
    load: str
    concurrency: int | None
    """None: not a closed loop (a rate or a trace): no estimate."""
    input_tokens: int
    output_tokens: int
    decode_context: float
    """Tokens a decoding sequence held cached on average over the step's decode steps, from its requests' lengths
    (`tokometer.perf.lengths`; I + O / 2 when they were alike)."""
    measured_itl_s: float | None
    measured_ttft_s: float | None
    measured_tok_s: float | None
    bound: ClosedLoop | None
    expected: ClosedLoop | None

    def ratio(self) -> float | None:
        """Measured output tok/s / expected: 1.0 is the estimate met."""
        if self.measured_tok_s is None or self.expected is None:
            return None
        return self.measured_tok_s / self.expected.aggregate_tok_s

    def to_json(self) -> dict[str, Any]:
        def loop(c: ClosedLoop | None) -> dict[str, Any] | None:
            return None if c is None else {"itl_ms": c.itl_s * 1e3, "ttft_ms": c.ttft_s * 1e3,
                                            "aggregate_tok_s": c.aggregate_tok_s,
                                            "per_request_tok_s": c.per_request_tok_s, "saturated": c.saturated}

        def ms(x: float | None) -> float | None:
            return None if x is None else x * 1e3

        return {"step": self.step, "load": self.load, "concurrency": self.concurrency,
                "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "decode_context_tokens": self.decode_context,
                "measured": {"itl_ms": ms(self.measured_itl_s), "ttft_ms": ms(self.measured_ttft_s),
                             "aggregate_tok_s": self.measured_tok_s},
                "estimated": {"bound": loop(self.bound), "expected": loop(self.expected)},
                "measured_over_expected_tok_s": self.ratio()}


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _throughput(step: StoredStep, records: list[RequestRecord]) -> float | None:
    """The step's output tok/s: its summary's, else its output tokens over the span from first send to last token."""
    if step.summary is not None and step.summary.output_throughput_tok_s:
        return float(step.summary.output_throughput_tok_s)
    span = max(r.last_token_ns for r in records) - min(r.sent_ns for r in records)
    return sum(float(r.output_tokens or 0) for r in records) / (span / 1e9) if span > 0 else None


def _step_context(done: list[RequestRecord]) -> tuple[float, float | None]:
    """The tokens a decoding sequence of the step held on average (`decode_context` of its requests' lengths) and
    the room a slot held reserved (`reserved_room`); the requests that produced no token past their first decode
    nothing and are left out (all of them: 1 and None, the means' room)."""
    pairs = [(float(r.input_tokens or 0), float(r.output_tokens or 0)) for r in done if (r.output_tokens or 0) > 0]
    if not pairs:
        return 1.0, None
    sums = LengthSums()
    for i, o in pairs:
        sums.add(i, o)
    return sums.decode_context(), sums.reserved_room()


def _closed_concurrency(step: StoredStep) -> int | None:
    """B of a step held at a fixed concurrency (synchronous: 1); None for a rate or a trace."""
    load = step.load
    if load is None or load.mode not in ("synchronous", "concurrency"):
        return None
    return 1 if load.mode == "synchronous" else int(load.concurrency)


def _label(step: StoredStep) -> str:
    load = step.load
    if load is None:
        return "-"
    return f"{load.rate}/s" if load.mode == "rate" else load.trace or load.mode if load.mode == "trace" \
        else f"c={load.concurrency}"


def loops_beside(run: StoredRun, records: list[RequestRecord], d: Deployment, efficiency: Efficiency, *,
                 chunked: bool = True, step_tokens: int = STEP_TOKENS,
                 max_batch: int | None = None) -> list[LoopBeside]:
    """Each step of ``run`` with completed measured requests beside the closed loop of its concurrency and
    mean lengths on ``d`` (module docstring)."""
    out = []
    for step in run.steps:
        done = [r for r in records if r.step == step.index and not r.warmup and r.ok and r.first_token_ns]
        if not done:
            continue
        i = max(1, round(statistics.fmean(float(r.input_tokens or 0) for r in done)))
        o = max(1, round(statistics.fmean(float(r.output_tokens or 0) for r in done)))
        b = _closed_concurrency(step)
        context, room = _step_context(done)
        est = [None if b is None else closed_loop(d, b, i, o, eff, chunked=chunked, step_tokens=step_tokens,
                                                  max_batch=max_batch, decode_context=context, room_tokens=room)
               for eff in (BOUND, efficiency)]
        out.append(LoopBeside(step.index, _label(step), b, i, o, context,
                              _mean([t / 1e9 for r in done if (t := tpot_ns(r)) is not None]),
                              _mean([t / 1e9 for r in done if (t := ttft_ns(r)) is not None]),
                              _throughput(step, done), est[0], est[1]))
    return out
