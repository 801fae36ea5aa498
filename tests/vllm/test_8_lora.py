"""A tenant mix (``bench --mix``) against the real vLLM serving a LoRA made here: the bundled model's adapter
written with PEFT (`tokometer.engines.vllm_lora`), vLLM started with ``--enable-lora --lora-modules``. Two
tenants, the base model and the adapter, and a third asking for an adapter vLLM does not serve (its 404).

The vLLM is the one ``test_8b_speculative.py`` uses too (`tests.vllm.conftest.lora_ngram_vllm`: one start for
both), which also drafts with n-gram prompt lookup; that changes no answer's length or text here (greedy
drafting keeps what the target would have said) and none of the counts held against vLLM's usage."""

from __future__ import annotations

import os
from collections import Counter

import pytest

from tests.helpers import bench
from tests.vllm.conftest import LORA_ADAPTER, LoraNgramVllm, VllmServer

ADAPTER = LORA_ADAPTER
MIX = {"tenants": [
    {"name": "base", "share": 0.45, "input_tokens": 32, "output_tokens": 8, "slo_ttft_ms": 60_000},
    {"name": "lora", "share": 0.45, "model": ADAPTER, "input_tokens": 48, "output_tokens": 6, "slo_ttft_ms": 60_000},
    {"name": "unknown", "share": 0.10, "model": "no-such-adapter", "input_tokens": 16, "output_tokens": 4}]}


@pytest.fixture(scope="module")
def lora_vllm(lora_ngram_vllm: LoraNgramVllm) -> VllmServer:
    """A vLLM of its own, serving the bundled model and its LoRA (made once, cached)."""
    if lora_ngram_vllm.lora_missing is not None:  # PEFT could not be installed (no package index here)
        if os.environ.get("TOKOMETER_REQUIRE_VLLM") == "1":
            pytest.fail(lora_ngram_vllm.lora_missing)
        pytest.skip(lora_ngram_vllm.lora_missing)
    return lora_ngram_vllm.server


def test_vllm_serves_the_adapter_made_here(lora_vllm: VllmServer) -> None:
    listed = {m["id"] for m in lora_vllm.call("/v1/models")["data"]}
    assert {lora_vllm.model, ADAPTER} <= listed
    body = {"messages": [{"role": "user", "content": "Name three colours."}], "max_tokens": 8, "temperature": 0}
    base = lora_vllm.call("/v1/chat/completions", {**body, "model": lora_vllm.model})
    adapted = lora_vllm.call("/v1/chat/completions", {**body, "model": ADAPTER})
    assert adapted["model"] == ADAPTER
    # the adapter's random weights change the greedy answer: vLLM applied it
    assert adapted["choices"][0]["message"]["content"] != base["choices"][0]["message"]["content"]


def test_a_mix_of_the_base_model_and_the_adapter(lora_vllm: VllmServer) -> None:
    result = bench(lora_vllm.openai_url, api_key=lora_vllm.api_key, mix=MIX, concurrency=[2], requests=14, seed=5,
                   ignore_eos=True)
    records = result.steps[0].records
    counts = Counter(r.tenant for r in records)
    assert counts["base"] and counts["lora"] and sum(counts.values()) == 14
    block = result.steps[0].summary.tenants
    assert block is not None
    by_name = {t["name"]: t for t in block["tenants"]}
    for name, length, prompt in (("base", 8, 32), ("lora", 6, 48)):
        mine = [r for r in records if r.tenant == name]
        # vLLM's own usage: each tenant's prompt and answer lengths, the adapter's included
        assert all(r.ok and r.output_tokens == length and r.output_tokens_source == "usage" for r in mine), name
        assert all(r.input_tokens is not None and r.input_tokens >= prompt for r in mine), name
        assert by_name[name]["requests"] == by_name[name]["completed"] == len(mine)
        assert by_name[name]["output_tokens_total"] == length * len(mine)
        assert by_name[name]["ttft_ms"]["count"] == len(mine) and by_name[name]["slo_attainment"] is not None
    unknown = [r for r in records if r.tenant == "unknown"]
    assert all(r.error == "http_404" and "does not exist" in r.error_detail for r in unknown)
    assert by_name["unknown"]["failed"] == len(unknown)
