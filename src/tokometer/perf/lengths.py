"""What a full engine's decoding sequences hold cached when requests differ in length: the steps' mean context.

At maximum load an engine keeps B sequences decoding and replaces each finished one at once. When every request
has the same lengths (I tokens in, L out) a sequence holds I + L / 2 tokens on average over its decode steps, and
so does the batch (`tokometer.perf.maxload`). When they differ, a request with a long answer stays in the batch for
more steps: a decode step sees the requests in proportion to their answer lengths, not one each (the inspection
paradox of renewal processes). A request of I in and L out holds I + j tokens at its j-th step, so over the
steps of all of them the mean context is

    decode context = E[L × (I + L / 2)] / E[L] = E[L·I] / E[L] + E[L²] / (2 E[L])
                   = E[I] + cov(I, L) / E[L] + E[L] (1 + cv²) / 2         (cv: L's coefficient of variation)

which is I + L / 2 when every request is alike and up to twice that for answers as spread as reasoning traces
(MLPerf's DeepSeek R1 set: cv 1.25, 5,826 tokens against 2,826). The steps' prompt tokens and completions do not
change: B / E[L] requests finish a step on average (each slot a renewal process of mean E[L] steps), each bringing
a prompt of E[I] tokens. Only the cached tokens a step attends to, and reads, grow.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["decode_context"]


def decode_context(inputs: Sequence[float], outputs: Sequence[float], output_mean: float | None = None) -> float:
    """The mean tokens a decoding sequence holds cached over the decode steps of requests of these ``inputs`` and
    ``outputs`` lengths (pairs, one a request; module docstring). ``output_mean``: the answers' mean as run, when it
    differs from the set's (a submission's own answers against the set's reference ones): the answers are taken
    as the set's scaled to it, which keeps their spread (cv) and their weighting of the prompts."""
    if len(inputs) != len(outputs) or not outputs:
        raise ValueError("decode_context: give one input and one output length for each request (none given)")
    if any(length < 0 for length in (*inputs, *outputs)):
        raise ValueError("decode_context: a length is negative")
    total = float(sum(outputs))
    if total <= 0:
        raise ValueError("decode_context: every answer is empty: no request decodes")
    scale = output_mean / (total / len(outputs)) if output_mean else 1.0
    weighted_inputs = sum(i * o for i, o in zip(inputs, outputs, strict=True)) / total
    return weighted_inputs + scale * sum(o * o for o in outputs) / (2 * total)
