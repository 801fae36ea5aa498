"""A tenant mix in the spec (`tokometer.benchmark.mixspec`): the load a mix of rates sets, what a mix leaves
out, the volume of its largest tenant, and its requests' own lengths (``min_tokens`` with ``--ignore-eos``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from tokometer.benchmark.spec import BenchSpec
from tokometer.cli.options import build_spec
from tokometer.prompt import Prompt
from tokometer.protocols.common.base import GenerationParams
from tokometer.protocols.registry import create_client
from tokometer.util.errors import ConfigError

URL = "http://127.0.0.1:9/v1"
SHARES = {"tenants": [{"name": "a", "share": 0.5}, {"name": "b", "share": 0.5, "model": "lora-b"}]}
RATES = {"tenants": [{"name": "a", "rate": 1.5}, {"name": "b", "rate": 0.5}]}


def test_a_mix_of_rates_runs_at_their_sum() -> None:
    spec = BenchSpec(url=URL, mix=RATES, requests=10)
    assert spec.rate == [2.0] and spec.mix is not None and spec.mix.weights() == pytest.approx([0.75, 0.25])
    again = BenchSpec.model_validate(spec.model_dump())  # as the store keeps it, and reads it back
    assert again.mix == spec.mix and again.rate == [2.0]


def test_a_mix_may_be_shared_by_worker_processes() -> None:
    spec = BenchSpec(url=URL, mix=SHARES, requests=10, concurrency=[4], workers=2)
    assert spec.workers == 2 and spec.mix is not None


@pytest.mark.parametrize(("values", "said"), [
    ({"mix": RATES, "concurrency": [2]}, "give their own rates, which set the run's (their sum, 2/s)"),
    ({"mix": RATES, "rate": [5.0]}, "give their own rates"),
    ({"mix": SHARES, "dataset": "x.jsonl"}, "--mix gives each tenant its own prompts"),
    ({"mix": SHARES, "prefix_tokens": 8}, "--mix gives each tenant its own prompts"),
    ({"mix": {"tenants": [{"name": "a", "share": 1, "prompt": "hi"}]}, "sessions": 2}, "needs conversations"),
    ({"mix": {"tenants": [{"name": "a", "share": 1, "turns": "3"}]}}, "gives turns or think_time"),
    ({"mix": SHARES, "agents": "example"}, "--mix and --agents: a tenant's source is prompts"),
    ({"mix": SHARES, "api": "openai-embeddings"}, "--mix tenants send generation requests"),
    ({"mix": {"tenants": [{"name": "a", "share": 1, "output_tokens": 16_000_000}]}, "requests": 100_000},
     "--output-tokens 16000000"),
    ({"mix": {"tenants": [{"name": "a", "share": 1, "junk": 1}]}}, "tenant 1 ('a'): junk: unknown key"),
])
def test_what_a_mix_leaves_out_is_one_line(values: dict[str, Any], said: str) -> None:
    flags = {"mix": "--mix", "concurrency": "--concurrency", "rate": "--rate", "dataset": "--dataset",
             "prefix_tokens": "--prefix-tokens", "sessions": "--sessions", "workers": "--workers", "api": "--api",
             "output_tokens": "--output-tokens", "requests": "--requests", "agents": "--agents"}
    with pytest.raises(ConfigError) as raised:
        build_spec(BenchSpec, flags=flags, url=URL, **values)
    assert said in str(raised.value) and "\n" not in str(raised.value), str(raised.value)


@pytest.mark.parametrize("api", ["openai-chat", "openai-completions"])
def test_a_prompts_own_length_sets_min_tokens_too(api: str) -> None:
    """vLLM refuses min_tokens above max_tokens (HTTP 400): a tenant's (or a trace's) own answer length, shorter
    than --output-tokens, must set both."""
    prompt = replace(Prompt.from_text("hello", max_tokens=16), exact_length=True)
    body = create_client(api).build(prompt, GenerationParams(model="m", max_tokens=128, ignore_eos=True)).body
    assert body["max_tokens"] == 16 and body["min_tokens"] == 16 and body["ignore_eos"] is True
