"""`finish_step`: a step's records made into its summary, the one recipe every kind of run follows.

A live run (`tokometer.benchmark.run`), an aborted run's recovery (`tokometer.store.orphans`) and an imported
run (`tokometer.imports.save`) all summarise a step here: `tokometer.metrics.summarize` of its records against
the run's SLO, then what the run can give of the rest:

- steady state and time slices (`tokometer.metrics.window.step_windows`), when the step's load is known:
  a live step's, a recovered step's as saved; an imported run passes none (docs/status.md: "an imported run's
  steps get no steady state or slices");
- output throughput per GPU, when the number of GPUs is known (`tokometer.gpu_count.gpu_count`);
- the text check (`tokometer.metrics.textcheck.check_text`), when the records still hold the text received:
  a live run's do; the store keeps no text, so a recovered step has none.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tokometer.metrics import SLO, StepSummary, summarize
from tokometer.metrics.textcheck import check_text
from tokometer.metrics.window import StepLoad, step_windows
from tokometer.records import RequestRecord
from tokometer.runs.stored_spec import DEFAULT_STEADY_TOLERANCE

__all__ = ["finish_step"]


def finish_step(records: Sequence[RequestRecord], *, slo: SLO | None = None, load: StepLoad | None = None,
                steady_tolerance: float = DEFAULT_STEADY_TOLERANCE, time_slice_s: float | None = None,
                gpus: int | None = None, text_check: bool = False,
                count: Callable[[str], int] | None = None) -> StepSummary:
    """The summary of a step's ``records``; see the module docstring.

    ``load``: the step's load, for its steady state (held within ``steady_tolerance``) and time slices (of
    ``time_slice_s``, when given); None: neither. ``gpus``: how many GPUs served it, for the throughput per GPU.
    ``text_check``: check the text received against the server's counts, by the local tokenizer ``count``
    when there is one (each text is best counted once: pass a cached one)."""
    summary = summarize(records, slo)
    if load is not None:
        summary.steady_state, summary.time_slices = step_windows(records, load, steady_tolerance, time_slice_s, slo)
    if gpus:
        summary.output_throughput_per_gpu_tok_s = summary.output_throughput_tok_s / gpus
    if text_check:
        summary.text_check = check_text(records, count)
    return summary
