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

The room an engine reserves grows the same way. An engine that never preempts reserves each request's whole
I + L when it admits it (TensorRT-LLM's default scheduler; `tokometer.perf.maxload`), and a slot holds a request
for its L steps, so the room a slot holds on average over the steps is

    reserved room  = E[L × (I + L)] / E[L] = E[L·I] / E[L] + E[L²] / E[L]
                   = E[I] + cov(I, L) / E[L] + E[L] (1 + cv²)

I + L when every request is alike; for MLPerf's DeepSeek R1 set (cv 1.25) 2.56 × E[L] for the answers where their
mean gives 1 ×: fewer sequences fit than the means say.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["LengthSums", "decode_context", "reserved_room"]


@dataclass
class LengthSums:
    """The sums `decode_context` needs, gathered a request at a time (a file of millions of requests is not held)."""

    requests: int = 0
    inputs: float = 0.0
    outputs: float = 0.0
    inputs_by_outputs: float = 0.0
    outputs_squared: float = 0.0

    def add(self, input_tokens: float, output_tokens: float) -> None:
        """One request of ``input_tokens`` in and ``output_tokens`` out (each at least 0: `ValueError` else)."""
        if input_tokens < 0 or output_tokens < 0:
            raise ValueError("decode_context: a length is negative")
        self.requests += 1
        self.inputs += input_tokens
        self.outputs += output_tokens
        self.inputs_by_outputs += input_tokens * output_tokens
        self.outputs_squared += output_tokens * output_tokens

    @property
    def input_mean(self) -> float:
        return self.inputs / self.requests if self.requests else 0.0

    @property
    def output_mean(self) -> float:
        return self.outputs / self.requests if self.requests else 0.0

    def decode_context(self, output_mean: float | None = None) -> float:
        """E[L·I] / E[L] + E[L²] / (2 E[L]) over the requests added (module docstring); ``output_mean`` as in
        `decode_context`. `ValueError` when none was added or every answer is empty."""
        if not self.requests:
            raise ValueError("decode_context: give one input and one output length for each request (none given)")
        if self.outputs <= 0:
            raise ValueError("decode_context: every answer is empty: no request decodes")
        scale = output_mean / self.output_mean if output_mean else 1.0
        return self.inputs_by_outputs / self.outputs + scale * self.outputs_squared / (2 * self.outputs)

    def reserved_room(self, output_mean: float | None = None) -> float:
        """E[L·I] / E[L] + E[L²] / E[L] over the requests added: the tokens a slot's reservation holds on average
        over the steps (module docstring); ``output_mean`` and `ValueError` as in `decode_context`."""
        context = self.decode_context(output_mean)  # checks there are answers to weigh by
        scale = output_mean / self.output_mean if output_mean else 1.0
        return context + scale * self.outputs_squared / (2 * self.outputs)


def decode_context(inputs: Sequence[float], outputs: Sequence[float], output_mean: float | None = None) -> float:
    """The mean tokens a decoding sequence holds cached over the decode steps of requests of these ``inputs`` and
    ``outputs`` lengths (pairs, one a request; module docstring). ``output_mean``: the answers' mean as run, when it
    differs from the set's (a submission's own answers against the set's reference ones): the answers are taken
    as the set's scaled to it, which keeps their spread (cv) and their weighting of the prompts."""
    return _sums(inputs, outputs).decode_context(output_mean)


def reserved_room(inputs: Sequence[float], outputs: Sequence[float]) -> float:
    """The tokens an engine that never preempts holds reserved a slot, on average over the decode steps, for
    requests of these ``inputs`` and ``outputs`` lengths (module docstring): I + L when they are alike."""
    return _sums(inputs, outputs).reserved_room()


def _sums(inputs: Sequence[float], outputs: Sequence[float]) -> LengthSums:
    if len(inputs) != len(outputs):
        raise ValueError(f"decode_context: give one input and one output length for each request ({len(inputs)} "
                         f"inputs, {len(outputs)} outputs)")
    sums = LengthSums()
    for i, o in zip(inputs, outputs, strict=True):
        sums.add(i, o)
    return sums
