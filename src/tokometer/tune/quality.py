"""`quality_against_baseline`: does a variant that changes the weights still answer as the baseline did?

A tune variant with another quantisation, model file or dtype may be faster only because it computes
something else. This runs ``tokometer quality``'s own comparison (`tokometer.quality.run_quality`, then
`tokometer.quality.summarise`) with the baseline's running engine as endpoint A and the variant's as B,
on the first ``items`` questions of the shipped evaluation set, and returns its figures as plain JSON:

    agreement          exact-match rate of the greedy answers' token paths (with its Wilson 95 % interval)
    top1_agreement     share of compared positions whose most likely next token is the same
    mean_kl            mean KL(baseline ‖ variant) per compared position, nats
    accuracy           each one's share of the items answered right, and variant − baseline with its
                       paired 95 % interval
    verdict            quality's word (same, close, different, better, worse) and its headline
    line               one line saying all that

Every request is greedy (temperature 0) and the speed pass sends one request at a time by default, so
two calls on the same engines give the same answers. Teacher forcing (scoring the variant past each
divergence on the baseline's path) is off by default: it costs a request per token after every divergence,
which for a coarse quantisation tripled the time; ``mean_kl`` is then taken up to each first divergence.

The default, 16 items with 8-token answers, is about 50 requests to each engine. Measured on a 2-core
Intel Xeon VM with the bundled Gemma 3 270M: 24 items of the model against itself took 38 s with the cores
to themselves (16 items: about 25 s); with other test suites sharing the cores, 16 items took 115 s
(Q2_K against Q4_K_M: 0 of 16 answers alike, accuracy 31 % → 0 %, "worse") and 207 s (against itself:
16 of 16, "same"). Sixteen items tell a broken quantisation from the baseline, not a difference of a few
points of accuracy: the verdict then says ``different`` or ``close`` rather than ``worse``.

An endpoint that fails (an engine that died, a server that gives no log-probabilities) is a result
with ``error`` set, never an exception: a sweep goes on to its next variant. Ctrl-C still stops it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tokometer.engines.handle import EngineHandle
    from tokometer.quality.endpoints import Endpoint
    from tokometer.quality.verdict import Summary

__all__ = ["DEFAULT_CONCURRENCY", "DEFAULT_ITEMS", "DEFAULT_MAX_TOKENS", "quality_against_baseline"]

DEFAULT_ITEMS = 16
"""Evaluation items asked of both engines: the first of the shipped set, every one of its six tasks among them."""
DEFAULT_MAX_TOKENS = 8
"""Tokens per greedy answer: the eval set's answers are a few tokens; the paths are compared over these."""
DEFAULT_CONCURRENCY = 1
"""Requests at a time in the speed pass: one, so that batching in the engine cannot change an answer."""


def _endpoint(label: str, handle: EngineHandle) -> Endpoint:
    """A started engine as a quality endpoint (llama.cpp or not, as its identity says)."""
    from tokometer.quality.endpoints import Endpoint, EndpointSpec

    spec = EndpointSpec(handle.openai_url, url=handle.openai_url)
    return Endpoint(label, spec, handle.openai_url, handle.root_url, handle.model,
                    llamacpp=handle.identity.get("engine") == "llama.cpp", identity=dict(handle.identity))


def _line(summary: Summary) -> str:
    """``agrees with the baseline on 10/24 answers (42 %); accuracy 46 % → 38 % (−8.3 ± 11.2 points): different``."""
    diff = summary.difference
    agreeing = round(summary.exact_match * summary.compared)
    return (f"agrees with the baseline on {agreeing}/{summary.compared} answers ({summary.exact_match:.0%}); "
            f"accuracy {summary.a.accuracy:.0%} → {summary.b.accuracy:.0%} "
            f"({diff.difference * 100:+.1f} ± {diff.half_width * 100:.1f} points): {summary.verdict.kind}")


def _as_json(summary: Summary) -> dict[str, Any]:
    diff = summary.difference
    return {
        "items": summary.items, "compared": summary.compared, "max_tokens": summary.max_tokens,
        "agreement": summary.exact_match, "agreement_interval": [summary.exact_low, summary.exact_high],
        "top1_agreement": summary.top1_agreement, "mean_kl": summary.mean_kl,
        "accuracy": {"baseline": summary.a.accuracy, "variant": summary.b.accuracy,
                     "difference": diff.difference, "interval": [diff.low, diff.high], "p_value": diff.p_value},
        "failed": {"baseline": summary.a.failed, "variant": summary.b.failed},
        "decode_ratio": summary.decode_ratio,
        "verdict": summary.verdict.kind, "headline": summary.verdict.headline, "rule": summary.verdict.rule,
        "seconds": summary.seconds, "line": _line(summary), "error": None,
    }


def quality_against_baseline(baseline: EngineHandle, variant: EngineHandle, *, items: int = DEFAULT_ITEMS,
                             concurrency: int = DEFAULT_CONCURRENCY,
                             max_tokens: int = DEFAULT_MAX_TOKENS, teacher_forcing: bool = False) -> dict[str, Any]:
    """``quality``'s comparison of ``variant`` (B) against ``baseline`` (A), both running, on the first ``items``
    of the shipped eval set; a JSON-able dict (see the module), or ``{"error": ..., "items": ...}`` when it failed.
    ``teacher_forcing``: also score the variant's distributions past each divergence on the baseline's path
    (``quality``'s default; here off, as it costs a request per token after every divergence). Synchronous: call it
    outside an event loop."""
    import asyncio

    from tokometer.quality import QualitySpec, load_evalset, run_quality, summarise
    from tokometer.util.errors import TokometerError

    try:
        questions = load_evalset(None, items)
        spec = QualitySpec(max_tokens=max_tokens, concurrency=concurrency, teacher_forcing=teacher_forcing)
        a, b = _endpoint("A", baseline), _endpoint("B", variant)
        summary = summarise(asyncio.run(run_quality(a, b, questions, spec)))
    except TokometerError as exc:
        return {"items": items, "error": str(exc)}
    except Exception as exc:  # a sweep must go on to its next variant whatever failed here
        return {"items": items, "error": f"the quality check failed: {type(exc).__name__}: {exc}"}
    return _as_json(summary)
