"""The summary of a `QualityResult`, the verdict by a stated rule, and the CI gates.

Figures (`summarise`):

- agreement: exact-match rate of the greedy token paths (with its Wilson interval), where the
  first divergence falls (median position over the items that diverge), top-1 agreement and mean
  KL(A‖B) per compared position (pooled over all items' positions; see `agreement`);
- accuracy: each endpoint's share of items answered right (Wilson 95 %), and B − A with the paired
  McNemar-based interval and exact p-value (`stats`);
- speed, from the same streamed requests: median TTFT and median decode tok/s of each, and B's
  decode speed as a multiple of A's.

The rule (`Verdict.kind`), first that applies:

    same        every greedy path identical and mean KL < 1e-6: B answers exactly as A
    worse       the paired interval of accuracy B − A lies wholly below 0
    better      ... wholly above 0
    close       exact match ≥ 90 %: B mostly answers as A, no accuracy difference detected
    different   otherwise: B often answers differently, no accuracy difference detected at this n

Gates, only when asked for (`gate_failures`): ``--min-agreement X`` fails when the exact-match rate
is below X; ``--max-accuracy-drop P`` fails when accuracy A − B exceeds P points.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any

from tokometer.quality.runner import EndpointRun, QualityResult
from tokometer.quality.stats import PairedDifference, paired_difference, wilson_interval
from tokometer.util.shown import clipped

__all__ = ["SAME_KL", "EndpointSummary", "Summary", "Verdict", "gate_failures", "summarise"]

SAME_KL = 1e-6
"""Mean KL (nats) below which two endpoints' distributions count as the same."""
CLOSE_AGREEMENT = 0.9


@dataclass(frozen=True)
class EndpointSummary:
    """One endpoint's figures."""

    label: str
    model: str
    url: str
    accuracy: float
    accuracy_low: float
    accuracy_high: float
    correct: int
    failed: int
    ttft_p50_ms: float | None
    decode_p50_tok_s: float | None
    output_tokens: int


@dataclass(frozen=True)
class Verdict:
    """The rule's outcome and the one-sentence summary."""

    kind: str
    headline: str
    rule: str


@dataclass(frozen=True)
class Summary:
    """Everything ``tokometer quality`` reports."""

    items: int
    compared: int
    exact_match: float
    exact_low: float
    exact_high: float
    diverging: int
    divergence_median: float | None
    positions: int
    forced_positions: int
    top1_agreement: float | None
    mean_kl: float | None
    max_kl: float | None
    kl_method: str
    top_logprobs: int
    max_tokens: int
    a: EndpointSummary
    b: EndpointSummary
    difference: PairedDifference
    decode_ratio: float | None
    ttft_ratio: float | None
    verdict: Verdict
    seconds: float
    by_task: dict[str, tuple[int, int, int]]
    """Per task: (A right, B right, items)."""

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["difference"]["half_width"] = self.difference.half_width
        return data


def _endpoint(run: EndpointRun) -> EndpointSummary:
    n = len(run.correct)
    correct = sum(run.correct)
    low, high = wilson_interval(correct, n)
    return EndpointSummary(run.endpoint.label, run.endpoint.model, run.endpoint.base_url, correct / n if n else 0.0,
                           low, high, correct, run.failed, run.ttft_p50_ms, run.decode_p50_tok_s, run.output_tokens)


def _ratio(new: float | None, old: float | None) -> float | None:
    return new / old if new and old else None


def _verdict(exact: float, mean_kl: float | None, top1: float | None, diff: PairedDifference,
             b: EndpointSummary, ratio: float | None) -> Verdict:
    if exact == 1.0 and (mean_kl is None or mean_kl < SAME_KL):
        kind, words = "same", "B answers exactly as A"
    elif diff.high < 0:
        kind, words = "worse", "B is less accurate than A beyond noise"
    elif diff.low > 0:
        kind, words = "better", "B is more accurate than A beyond noise"
    elif exact >= CLOSE_AGREEMENT:
        kind, words = "close", "B mostly answers as A; no accuracy difference detected"
    else:
        kind, words = "different", f"B often answers differently from A; no accuracy difference detected at n={diff.n}"
    parts = [f"{exact:.0%} agreement"]
    if top1 is not None and mean_kl is not None:
        parts[0] += f" (top-1 {top1:.0%}, KL {mean_kl:.3g} nats)"
    parts.append(f"{diff.difference * 100:+.1f} ± {diff.half_width * 100:.1f} points accuracy")
    speed = f" at {ratio:.2f}× A's decode speed" if ratio else ""
    headline = f"{kind}: {clipped(b.model)} keeps {' and '.join(parts)}{speed} — {words}."
    rule = ("same: all paths identical and KL < 1e-6; worse/better: the paired 95 % interval of B − A excludes 0; "
            "close: agreement ≥ 90 %; else different")
    return Verdict(kind, headline, rule)


def summarise(result: QualityResult) -> Summary:
    """The figures and the verdict of a finished comparison."""
    compared = [c for c in result.comparisons if c is not None]
    exact_count = sum(c.exact for c in compared)
    exact = exact_count / len(compared) if compared else 0.0
    exact_low, exact_high = wilson_interval(exact_count, len(compared))
    divergences = [c.divergence for c in compared if c.divergence is not None]
    kls = [k for c in compared for k in c.kl]
    top1 = [t for c in compared for t in c.top1_same]
    mean_kl = statistics.fmean(kls) if kls else None
    top1_rate = sum(top1) / len(top1) if top1 else None
    a, b = _endpoint(result.a), _endpoint(result.b)
    diff = paired_difference(result.a.correct, result.b.correct)
    ratio = _ratio(b.decode_p50_tok_s, a.decode_p50_tok_s)
    return Summary(
        items=len(result.items), compared=len(compared), exact_match=exact, exact_low=exact_low,
        exact_high=exact_high, diverging=len(divergences),
        divergence_median=statistics.median(divergences) if divergences else None,
        positions=len(kls), forced_positions=sum(c.forced_positions for c in compared),
        top1_agreement=top1_rate, mean_kl=mean_kl, max_kl=max(kls) if kls else None, kl_method=result.kl_method,
        top_logprobs=result.spec.top_logprobs, max_tokens=result.spec.max_tokens, a=a, b=b, difference=diff,
        decode_ratio=ratio, ttft_ratio=_ratio(b.ttft_p50_ms, a.ttft_p50_ms),
        verdict=_verdict(exact, mean_kl, top1_rate, diff, b, ratio), seconds=result.seconds,
        by_task=_by_task(result))


def _by_task(result: QualityResult) -> dict[str, tuple[int, int, int]]:
    counts: dict[str, tuple[int, int, int]] = {}
    for item, a_ok, b_ok in zip(result.items, result.a.correct, result.b.correct, strict=True):
        a_right, b_right, n = counts.get(item.task, (0, 0, 0))
        counts[item.task] = (a_right + a_ok, b_right + b_ok, n + 1)
    return counts


def gate_failures(summary: Summary, min_agreement: float | None, max_accuracy_drop: float | None) -> list[str]:
    """The CI gates that failed, in words (empty: pass, or no gate asked for)."""
    failed = []
    if min_agreement is not None and summary.exact_match < min_agreement:
        failed.append(f"agreement {summary.exact_match:.1%} is below --min-agreement {min_agreement:g}")
    drop = -summary.difference.difference * 100
    if max_accuracy_drop is not None and drop > max_accuracy_drop:
        failed.append(f"accuracy dropped {drop:.1f} points, more than --max-accuracy-drop {max_accuracy_drop:g}")
    return failed
