"""Roofline estimates: what a model on given hardware can do at best, and how close a measured run came.

    from tokometer.perf import Deployment, decode_step_s, resolve_hardware, resolve_model
    d = Deployment(resolve_model("llama-3.1-8b"), resolve_hardware("H100"), weight_dtype="bf16")
    1 / decode_step_s(d, batch=1, context_tokens=0)     # ≈ 208.6 tok/s: 16.06 GB read per token at 3.35 TB/s

The arithmetic lives in `tokometer.perf.roofline` (formulas in its docstring); models in
`model`/`catalog`/`loaders`, hardware in `hardware`/`host`, quantisation in `quant`, the batch table
in `estimate`, target search in `target`, measured-run efficiency in `efficiency`.
"""

from __future__ import annotations

from tokometer.perf.estimate import BatchEstimate, Estimate, estimate
from tokometer.perf.explain import explain
from tokometer.perf.hardware import hardware_table, resolve_hardware
from tokometer.perf.hardwarespec import HardwareSpec
from tokometer.perf.loaders import resolve_model
from tokometer.perf.model import ModelSpec
from tokometer.perf.roofline import Deployment, Efficiency, decode_step_s, embedding_pass_s, prefill_s

__all__ = [
    "BatchEstimate",
    "Deployment",
    "Efficiency",
    "Estimate",
    "HardwareSpec",
    "ModelSpec",
    "decode_step_s",
    "embedding_pass_s",
    "estimate",
    "explain",
    "hardware_table",
    "prefill_s",
    "resolve_hardware",
    "resolve_model",
]
