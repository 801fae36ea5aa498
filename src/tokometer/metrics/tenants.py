"""Per-tenant results of a step of a tenant mix (``bench --mix``): each tenant's requests summarised apart,
against its own SLO, beside the step's totals.

A tenant's block (`tenant_block`) holds its requests (measured, completed, failed), the share of the step's
requests it sent, its TTFT, TPOT, ITL and E2E distributions (as the step's, `tokometer.metrics.summarize` of
its records), its output tokens a second and requests a second over the *step's* duration (so the tenants'
add up to the step's), and, when its SLO sets a limit, its goodput (requests meeting every limit a second,
over the step's duration) and SLO attainment (those requests over its measured requests: a failed request
misses). `tenant_summaries` also gives the mix's totals: goodput summed over the tenants, each against its
own SLO, and attainment over all their requests.

The tenants' SLOs are read from the mix as saved with the run (`mix_slos`), the live spec's and a stored one's
alike: the limits are ``slo_ttft_ms``, ``slo_tpot_ms`` and ``slo_e2e_ms``, as ``bench --slo-*-ms`` spells them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from tokometer.metrics.summary import SLO, summarize
from tokometer.records import RequestRecord

__all__ = ["TENANT_DISTRIBUTIONS", "mix_slos", "tenant_block", "tenant_summaries"]

TENANT_DISTRIBUTIONS: Final = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")
"""The latency distributions each tenant's block carries (registry names)."""


def _limit(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
    return float(value) if ok else None


def mix_slos(mix: Mapping[str, Any] | None) -> dict[str, SLO]:
    """Each tenant's SLO by name, from a mix as saved (``{"tenants": [{"name", "slo_ttft_ms", ...}]}``); empty
    for no mix. A malformed entry (a store edited by hand) has no limits."""
    tenants = mix.get("tenants") if isinstance(mix, Mapping) else None
    out: dict[str, SLO] = {}
    for tenant in tenants if isinstance(tenants, list) else ():
        if isinstance(tenant, Mapping) and isinstance(tenant.get("name"), str):
            out[tenant["name"]] = SLO(_limit(tenant.get("slo_ttft_ms")), _limit(tenant.get("slo_tpot_ms")),
                                      _limit(tenant.get("slo_e2e_ms")))
    return out


def _slo_json(slo: SLO) -> dict[str, float]:
    return {k: v for k, v in (("ttft_ms", slo.ttft_ms), ("tpot_ms", slo.tpot_ms), ("e2e_ms", slo.e2e_ms))
            if v is not None}


def tenant_block(name: str, records: Sequence[RequestRecord], slo: SLO, step_duration_s: float,
                 step_measured: int) -> dict[str, Any]:
    """One tenant's block (see the module docstring) from its ``records`` of a step that lasted
    ``step_duration_s`` and measured ``step_measured`` requests in all."""
    summary = summarize(records, None)
    window = [r for r in records if not r.warmup and r.sent_ns]
    measured = len(window)
    met = sum(1 for r in window if r.ok and slo.met(r)) if not slo.empty else None
    per_s = (lambda x: x / step_duration_s) if step_duration_s > 0 else (lambda x: 0.0)
    return {
        "name": name,
        "requests": measured,
        "completed": summary.requests_completed,
        "failed": summary.requests_failed,
        "share": measured / step_measured if step_measured else None,
        **{key: summary.distributions[key].to_json() for key in TENANT_DISTRIBUTIONS if key in summary.distributions},
        "output_tokens_total": summary.output_tokens_total,
        "output_throughput_tok_s": per_s(summary.output_tokens_total),
        "request_throughput_rps": per_s(summary.requests_completed),
        "slo": _slo_json(slo),
        "slo_met": met,
        "goodput_rps": per_s(met) if met is not None else None,
        "slo_attainment": met / measured if met is not None and measured else None,
        "errors": summary.errors,
    }


def tenant_summaries(records: Sequence[RequestRecord], names: Sequence[str], slos: Mapping[str, SLO],
                     step_duration_s: float) -> dict[str, Any] | None:
    """The step's per-tenant blocks, in the mix's order (``names``), and the mix's totals; None when no record
    carries a tenant."""
    if not any(r.tenant is not None for r in records):
        return None
    by_tenant: dict[str, list[RequestRecord]] = {name: [] for name in names}
    for r in records:
        if r.tenant is not None:
            by_tenant.setdefault(r.tenant, []).append(r)
    measured = sum(1 for r in records if not r.warmup and r.sent_ns)
    blocks = [tenant_block(name, rs, slos.get(name, SLO()), step_duration_s, measured)
              for name, rs in by_tenant.items()]
    judged = [b for b in blocks if b["slo_met"] is not None]
    met = sum(b["slo_met"] for b in judged)
    asked = sum(b["requests"] for b in judged)
    return {"tenants": blocks,
            "goodput_rps": (met / step_duration_s if step_duration_s > 0 else 0.0) if judged else None,
            "slo_attainment": met / asked if judged and asked else None}
