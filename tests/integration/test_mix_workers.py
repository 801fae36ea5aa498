"""A tenant mix (``bench --mix``) shared by ``--workers`` processes, against the simulator serving LoRA adapters
(its trace is the truth: which adapter each request asked for). The processes deal the step's requests out, and
each request still goes to the tenant one process sends it to (the same seeded draw, request by request); the
per-tenant blocks count what the simulator served for each."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest

from tests.conftest import SimServer
from tests.helpers import bench

MIX = {"tenants": [
    {"name": "base", "share": 0.5, "input_tokens": 16, "output_tokens": 4, "slo_ttft_ms": 2000},
    {"name": "a", "share": 0.3, "model": "adapter-a", "input_tokens": 24, "output_tokens": 6},
    {"name": "b", "share": 0.2, "model": "adapter-b", "input_tokens": 16, "output_tokens": 3}]}
MODELS = {"base": None, "a": "adapter-a", "b": "adapter-b"}


@pytest.mark.parametrize("load", [{"concurrency": [3]}, {"rate": [40.0]}])
def test_workers_keep_each_requests_tenant_and_the_tenants_counts(sim_factory: Callable[..., SimServer],
                                                                  load: dict[str, object]) -> None:
    sim = sim_factory("--ttft-ms", "5", "--itl-ms", "1", "--lora", "adapter-a,adapter-b")
    alone = bench(sim.openai_url, mix=MIX, requests=30, seed=5, **load)
    served_before = len(sim.trace())
    shared = bench(sim.openai_url, mix=MIX, requests=30, seed=5, workers=2, **load)
    one = {r.index: r.tenant for r in alone.steps[0].records}
    two = {r.index: r.tenant for r in shared.steps[0].records}
    assert sorted(two) == list(range(30)) and two == one  # request g goes to the same tenant
    records = shared.steps[0].records
    assert all(r.ok for r in records)
    served = Counter(t["adapter"] for t in sim.trace()[served_before:])
    assert served == Counter(MODELS[r.tenant or ""] for r in records)
    block = shared.steps[0].summary.tenants
    assert block is not None
    counts = Counter(r.tenant for r in records)
    assert {t["name"]: t["requests"] for t in block["tenants"]} == {n: counts[n] for n in MODELS}
    base = next(t for t in block["tenants"] if t["name"] == "base")
    assert base["slo_met"] == counts["base"] and base["slo_attainment"] == 1.0
    assert sum(t["output_tokens_total"] for t in block["tenants"]) == shared.steps[0].summary.output_tokens_total
