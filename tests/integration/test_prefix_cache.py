"""Shared prefixes against real prompt caches: the embedded llama.cpp engine reuses a cached prefix (its
own count of cached prompt tokens says so, and warm TTFTs are shorter than cold ones)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import require_llama_server
from tests.helpers import bench
from tokometer.engines import EngineHandle, LlamaCppSettings, start_llamacpp


@pytest.fixture(scope="module")
def engine() -> Iterator[EngineHandle]:
    require_llama_server()
    with start_llamacpp(LlamaCppSettings(parallel=2)) as handle:
        yield handle


@pytest.mark.engine
def test_llamacpp_reuses_a_shared_prefix(engine: EngineHandle) -> None:
    result = bench(engine.openai_url, concurrency=[1], requests=8, input_tokens=256, prefix_tokens=224,
                   prefix_groups=2, output_tokens=4)
    s = result.steps[0].summary
    assert s.requests_failed == 0
    assert s.ttft_cold_prefix_ms is not None and s.ttft_warm_prefix_ms is not None
    assert s.ttft_cold_prefix_ms.count == 2 and s.ttft_warm_prefix_ms.count == 6
    # The server says it took most of each warm prompt from its cache (224 of 256 tokens: 6 of 8 requests).
    assert s.prompt_cache_hit_rate is not None and s.prompt_cache_hit_rate > 0.4, s.prompt_cache_hit_rate
    assert s.prefix_cache_speedup is not None and s.prefix_cache_speedup > 1.5, s.prefix_cache_speedup
