"""`finish_step`: a step's records made into its summary, the one recipe every kind of run follows.

A live run (`tokometer.benchmark.run`), an aborted run's recovery (`tokometer.store.orphans`) and an imported
run (`tokometer.imports.save`) all summarise a step here: `tokometer.metrics.summarize` of its records against
the run's SLO, then what the run can give of the rest:

- steady state and time slices (`tokometer.metrics.window.step_windows`), when the step's load is known:
  a live step's, a recovered step's as saved; an imported run passes none (docs/status.md: "an imported run's
  steps get no steady state or slices");
- output throughput per GPU, when the number of GPUs is known (`tokometer.gpu_count.gpu_count`);
- per-tenant blocks, when the records carry tenants (``bench --mix``, `tokometer.metrics.tenants`), against
  the SLOs of the ``mix`` saved with the run (without it: in the order met, with no SLOs);
Only a live run's records still hold the text received (the store keeps none), so the text check is a step
of its own, `check_step_text`, which the live run takes after the server's window of the step has closed
(the closing reading follows the summary, as the server's counters of the last answers may land a moment after
them, and comes before the check, whose tokenizer may take a while over every answer).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tokometer.metrics import SLO, StepSummary, summarize
from tokometer.metrics.tenants import mix_slos, tenant_summaries
from tokometer.metrics.textcheck import check_text
from tokometer.metrics.window import StepLoad, step_windows
from tokometer.records import RequestRecord
from tokometer.runs.stored_spec import DEFAULT_STEADY_TOLERANCE

__all__ = ["check_step_text", "finish_step"]


def finish_step(records: Sequence[RequestRecord], *, slo: SLO | None = None, load: StepLoad | None = None,
                steady_tolerance: float = DEFAULT_STEADY_TOLERANCE, time_slice_s: float | None = None,
                gpus: int | None = None, mix: Mapping[str, Any] | None = None) -> StepSummary:
    """The summary of a step's ``records``; see the module docstring.

    ``load``: the step's load, for its steady state (held within ``steady_tolerance``) and time slices (of
    ``time_slice_s``, when given); None: neither. ``gpus``: how many GPUs served it, for the throughput per GPU."""
    summary = summarize(records, slo)
    if load is not None:
        summary.steady_state, summary.time_slices = step_windows(records, load, steady_tolerance, time_slice_s, slo)
    if gpus:
        summary.output_throughput_per_gpu_tok_s = summary.output_throughput_tok_s / gpus
    slos = mix_slos(mix)
    summary.tenants = tenant_summaries(records, list(slos), slos, summary.duration_s)
    return summary


def check_step_text(summary: StepSummary, records: Sequence[RequestRecord],
                    count: Callable[[str], int] | None) -> None:
    """Check a live step's text received against the server's counts, by the local tokenizer ``count`` when there
    is one (each text is best counted once: pass a cached one); the result goes in ``summary.text_check``."""
    summary.text_check = check_text(records, count)
