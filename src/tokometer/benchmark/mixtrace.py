"""The one step of a tenant mix with traces (``bench --mix`` where some tenant gives ``trace``): the tenants'
requests merged on one timeline.

A traced tenant's requests come at its trace's own times (from the trace's first request, stretched by
``--time-scale``), every trace starting with the step; a tenant with a ``rate`` sends its own arrivals
(``--arrival``, seeded by its tenant seed) over the same span, the longest trace's, so that it runs beside the
traces for as long as they last. (A share of a trace's traffic means nothing: `tokometer.datasets.mix` refuses
shares beside a trace.) The merged timeline is in time order, a tie kept in the tenants' order; each request
goes to its own tenant, so the per-tenant blocks count each tenant's trace exactly.
"""

from __future__ import annotations

from typing import Any

from tokometer.datasets.mix import TenantMix, tenant_seed
from tokometer.datasets.trace import read_trace, trace_offsets
from tokometer.load.profiles import LoadStep, schedule_offsets

__all__ = ["mix_step", "mix_timeline"]


def mix_timeline(mix: TenantMix, spec: Any) -> tuple[tuple[int, ...], list[int]]:
    """Each request's due time (ns from the step's start) and its tenant's index, in time order, for the mix of
    ``spec`` (a `BenchSpec`: its seed, ``time_scale``, ``arrival`` and ``burstiness``)."""
    own: list[tuple[int, ...] | None] = [
        trace_offsets(read_trace(t.trace), spec.time_scale) if t.trace is not None else None for t in mix.tenants]
    span_s = max((times[-1] for times in own if times), default=0) / 1e9
    merged: list[tuple[int, int]] = []
    for k, (tenant, times) in enumerate(zip(mix.tenants, own, strict=True)):
        if times is None:
            assert tenant.rate is not None  # the mix's own check: beside a trace, every tenant gives a rate
            n = max(1, round(tenant.rate * span_s))
            times = tuple(schedule_offsets(n, tenant.rate, spec.arrival, spec.burstiness,
                                           tenant_seed(spec.seed_value, k)))
        merged.extend((t, k) for t in times)
    merged.sort()
    return tuple(t for t, _ in merged), [k for _, k in merged]


def mix_step(spec: Any) -> LoadStep:
    """The traced mix's one step: its merged timeline, as a trace step."""
    offsets, _ = mix_timeline(spec.mix, spec)
    return LoadStep("trace", offsets=offsets, trace="mix", max_concurrency=spec.max_concurrency)
