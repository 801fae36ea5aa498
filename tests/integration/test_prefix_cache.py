"""Shared prefixes against prompt caches: the simulator's modelled prefix cache (known truth), and the
embedded llama.cpp engine's real one (its own count of cached prompt tokens says so, and warm TTFTs are
shorter than cold ones)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.conftest import SimServer
from tests.helpers import bench
from tokometer.engines import EngineHandle
from tokometer.perf import Deployment, Efficiency, prefill_s, resolve_hardware, resolve_model


@pytest.mark.engine
def test_llamacpp_reuses_a_shared_prefix(engine_two_slots: EngineHandle) -> None:
    result = bench(engine_two_slots.openai_url, concurrency=[1], requests=8, input_tokens=256, prefix_tokens=224,
                   prefix_groups=2, output_tokens=4)
    s = result.steps[0].summary
    assert s.requests_failed == 0
    assert s.ttft_cold_prefix_ms is not None and s.ttft_warm_prefix_ms is not None
    assert s.ttft_cold_prefix_ms.count == 2 and s.ttft_warm_prefix_ms.count == 6
    # The server says it took most of each warm prompt from its cache (224 of 256 tokens: 6 of 8 requests).
    assert s.prompt_cache_hit_rate is not None and s.prompt_cache_hit_rate > 0.4, s.prompt_cache_hit_rate
    # request by request: the cold ones computed their whole prompt, the warm ones found the prefix cached
    # (timing is pinned against the simulator above; on a busy 2-core host a TTFT ratio is too noisy to test)
    cached = {r.index: r.server.cached_tokens for r in result.steps[0].records if r.server is not None}
    firsts = {r.index for r in result.steps[0].records if r.prefix_first}
    assert all((cached[i] or 0) < 50 for i in firsts), cached
    assert all((cached[i] or 0) >= 200 for i in cached if i not in firsts), cached
    assert s.prefix_cache_speedup is not None


@pytest.mark.timing
def test_the_modelled_engines_prefix_cache_is_the_known_truth(sim_factory: Callable[..., SimServer]) -> None:
    """The simulator's modelled engine caches prompts in blocks of 16 tokens (its tokens are words). 12
    prompts of 256 tokens, each starting with one of 2 shared prefixes of 192 (12 whole blocks): the 10
    warm ones find 192 tokens cached, so its /metrics say 10 × 192 / (12 × 256) = 62.5 % hits, and each
    TTFT is one prefill step: of 256 tokens cold, of the 64 after the prefix warm."""
    scale = 10.0
    sim = sim_factory("--model", "llama-3.1-8b", "--hardware", "H100-SXM", "--dtype", "awq", "--time-scale",
                      str(scale))
    result = bench(sim.openai_url, concurrency=[1], requests=12, input_tokens=256, prefix_tokens=192,
                   prefix_groups=2, output_tokens=4, scrape_interval_s=0.1)
    step = result.steps[0]
    assert step.server is not None
    assert step.server["prefix_cache_hit_rate"] == pytest.approx(10 * 192 / (12 * 256), abs=1e-9)
    # ... and its answers say the same, request by request (usage.prompt_tokens_details.cached_tokens)
    assert step.summary.prompt_cache_hit_rate == pytest.approx(10 * 192 / (12 * 256), abs=1e-9)
    cached = [r.server.cached_tokens for r in step.records if r.server and r.server.cached_tokens is not None]
    assert sorted(cached) == [0, 0] + [192] * 10
    d = Deployment(resolve_model("llama-3.1-8b"), resolve_hardware("H100-SXM"), weight_dtype="awq")
    cold, warm = (1e3 * scale * prefill_s(d, n, 0, Efficiency()) for n in (256, 64))
    s = step.summary
    assert s.ttft_cold_prefix_ms is not None and s.ttft_warm_prefix_ms is not None
    assert s.ttft_cold_prefix_ms.p50 == pytest.approx(cold, rel=0.15)
    assert s.ttft_warm_prefix_ms.p50 == pytest.approx(warm, rel=0.15)
    assert s.prefix_cache_speedup == pytest.approx(cold / warm, rel=0.2)
