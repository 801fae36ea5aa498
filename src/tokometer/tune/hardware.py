"""`allowed_for`: beside a variant's measured speed, what the hardware allows for it, as ``estimate --run`` says.

A variant's run is judged exactly as ``tokometer estimate --run N`` judges a saved run
(`tokometer.perf.questions.judge_stored_run`): the deployment comes from the run's engine identity (the
embedded llama.cpp's GGUF file on this host with its cache type; a vLLM's model, formats and parallel
sizes), and each step's measured decode batch, context, TPOT, MBU and likely bottleneck from its records.
To that this adds, per step, the roofline's decode step at that batch and context
(`tokometer.perf.roofline.decode_step_s`, the one ``estimate`` uses):

    bound_tok_s            per-request decode tok/s at 100 % of the memory bandwidth and FLOP/s
    expected_tok_s         ... at the efficiencies a well-tuned engine reaches (calibrated or typical)
    aggregate_bound_tok_s  bound_tok_s × the decode batch: all requests together
    measured_tok_s         1 / the step's median TPOT

so that a variant's 95 tok/s reads as "of 310 the memory allows (MBU 31 %)". Where the run does not say
what ran on what (a URL's server with no identity, a model file gone, a hardware name not in the table),
the answer is ``{"reason": ...}`` with estimate's own one-line message, never an exception.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tokometer.perf.efficiency import RunEfficiency, StepEfficiency
    from tokometer.perf.questions import EstimateSpec
    from tokometer.perf.roofline import Efficiency
    from tokometer.records import RequestRecord
    from tokometer.store.runs import StoredRun

__all__ = ["allowed_for"]


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def _speed(tok_s: float | None) -> str:
    """``2.1``, ``54``, ``1,234``: a tenth where it is the only precision there is."""
    if tok_s is None:
        return "n/a"
    return f"{tok_s:.1f}" if tok_s < 10 else f"{tok_s:,.0f}"


def _step(judged: RunEfficiency, step: StepEfficiency, efficiency: Efficiency) -> dict[str, Any]:
    """One step's figures: measured, bound and expected decode speed at its batch and context, MBU, bottleneck."""
    from tokometer.perf.roofline import decode_step_s

    d = judged.deployment
    batch = max(1, round(step.decode_batch))
    context = round(step.decode_batch * step.context_tokens)
    bound = 1 / decode_step_s(d, batch, context)
    expected = 1 / decode_step_s(d, batch, context, efficiency)
    measured = 1 / step.tpot_s if step.tpot_s else None
    line = (f"{step.load}: {_speed(measured)} tok/s per request of {_speed(bound)} the hardware allows "
            f"(expected {_speed(expected)}; MBU {_pct(step.mbu)}), held back by {step.bottleneck}")
    return {"step": step.step, "load": step.load, "decode_batch": step.decode_batch,
            "context_tokens": step.context_tokens, "measured_tok_s": measured, "bound_tok_s": bound,
            "expected_tok_s": expected, "aggregate_bound_tok_s": bound * step.decode_batch, "mbu": step.mbu,
            "decode_mfu": step.decode_mfu, "prefill_mfu": step.prefill_mfu, "bottleneck": step.bottleneck,
            "line": line}


def allowed_for(run: StoredRun, records: Sequence[RequestRecord] | None = None,
                spec: EstimateSpec | None = None) -> dict[str, Any]:
    """What ``estimate --run`` says the hardware allows for ``run`` (with its ``records``, from
    ``ResultStore.load_records``): the deployment judged against and one entry per step (see the module), with a
    one-line summary; ``{"reason": ...}`` where it cannot say. ``spec``: what ``estimate`` would be given beside
    ``--run`` (``--model``, ``--hardware``, ``--hardware-file``); by default all is taken from the run."""
    from tokometer.perf.questions import EstimateSpec, judge_stored_run, resolve_efficiency
    from tokometer.util.errors import TokometerError

    if records is None:
        return {"reason": f"run {run.id}: the bound needs the run's requests (give its records)"}
    asked = spec or EstimateSpec()
    try:
        judged = judge_stored_run(asked, run, list(records))
        efficiency, source = resolve_efficiency(asked, judged.deployment.hardware.name)
        steps = [_step(judged, step, efficiency) for step in judged.steps]
    except TokometerError as exc:
        return {"reason": str(exc)}
    except (OSError, ValueError) as exc:  # a model file that cannot be read, a malformed table row
        return {"reason": f"run {run.id}: {type(exc).__name__}: {exc}"}
    d = judged.deployment
    return {"model": d.model.name, "hardware": d.hardware.name, "hardware_source": d.hardware.source,
            "bandwidth_gbs": d.hardware.bandwidth_gbs, "weight_dtype": d.weight_dtype, "kv_dtype": d.kv_dtype,
            "weight_bytes": d.weight_bytes, "efficiency_source": source, "steps": steps,
            "line": "; ".join(step["line"] for step in steps)}
