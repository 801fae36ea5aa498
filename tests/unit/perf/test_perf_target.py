"""``estimate --target`` on today's hardware and formats (`tokometer.perf.target`): what reaches a speed per
request and in aggregate, a plain "no single GPU can" where none can, and the published per-user speeds of
specialised silicon beside it as context."""

from __future__ import annotations

import pytest

from tokometer.perf import hardware_table
from tokometer.perf.loaders import resolve_model
from tokometer.perf.published import published_per_user
from tokometer.perf.roofline import Efficiency, decode_step_s
from tokometer.perf.target import TARGET_DTYPES, TargetAnswer, reach_target
from tokometer.util.errors import ConfigError


@pytest.fixture(scope="module")
def seventy() -> TargetAnswer:
    return reach_target(resolve_model("llama-3.3-70b"), 14_000, list(hardware_table().values()))


def test_the_formats_of_today_are_searched(seventy: TargetAnswer) -> None:
    assert {"nvfp4", "mxfp4", "fp8", "bf16"} <= set(TARGET_DTYPES)
    options = seventy.options
    b200_fp4 = [o for o in options if o.deployment.hardware.name == "B200" and o.deployment.weight_dtype == "nvfp4"]
    assert b200_fp4 and b200_fp4[0].deployment.compute_dtype == "fp4" and b200_fp4[0].reached
    names = {o.deployment.hardware.name for o in options}
    assert {"B300", "GB200", "GB300", "MI325X", "MI355X"} <= names
    shown = {(o.deployment.hardware.name, o.deployment.weight_dtype): o.to_json()["dequantised_to"] for o in options}
    assert shown[("B200", "nvfp4")] is None and shown[("MI355X", "mxfp4")] is None  # their fp4 units take them
    assert shown[("MI355X", "nvfp4")] == shown[("H100-SXM", "nvfp4")] == shown[("A100-80GB-SXM", "fp8")] == "bf16"
    assert shown[("H100-SXM", "fp8")] is None and shown[("H100-SXM", "awq")] is None  # int4 weight-only: bf16 anyway


def test_no_single_gpu_reaches_14000_per_request_on_a_70b(seventy: TargetAnswer) -> None:
    a = seventy
    one = a.best_single_gpu
    assert one is not None and one.deployment.gpus == 1 and not one.reached
    # its speed is one decode step at batch 1 with 1,500 tokens cached, at the expected efficiencies
    assert one.batch1_tok_s == pytest.approx(1 / decode_step_s(one.deployment, 1, 1500, Efficiency()))
    best = a.best_per_request
    assert best is not None and not best.reached and best.deployment.gpus == 8
    lines = " ".join(a.per_request_lines())
    assert "No single-GPU configuration reaches 14,000 tok/s per request" in lines
    assert "bound by one GPU's bandwidth at batch 1" in lines
    assert a.tokens_per_step_needed == pytest.approx(14_000 / best.batch1_tok_s)
    assert "tokens per verify step" in lines
    # in aggregate one GB300 does: NVFP4 weights come with an FP8 cache (as NVIDIA's FP4 checkpoints declare)
    first = next(o for o in a.options if o.reached)
    aggregate = " ".join(a.aggregate_lines())
    assert first.deployment.gpus == 1 and first.deployment.kv_dtype == "fp8"
    assert f"1 × {first.deployment.hardware.name} in nvfp4 reach it at batch {first.batch:,}" in aggregate
    assert "no single GPU does" not in aggregate
    data = a.to_json()
    assert data["per_request"]["single_gpu_reached"] is False
    assert data["per_request"]["fastest_single_gpu"]["gpus"] == 1


def test_a_target_one_gpu_serves_per_request_is_said_so() -> None:
    a = reach_target(resolve_model("llama-3.2-1b"), 300, [hardware_table()["H100-SXM"]])
    assert a.best_single_gpu is not None and a.best_single_gpu.reached
    assert any(line.startswith("One GPU is enough per request") for line in a.per_request_lines())
    assert "1 × H100-SXM" in a.aggregate_lines()[0] and "no single GPU" not in a.aggregate_lines()[0]


def test_the_specialised_silicon_is_context_with_its_sources(seventy: TargetAnswer) -> None:
    figures = published_per_user()
    assert {f.provider for f in figures} == {"Cerebras", "SambaNova", "Groq"}
    assert all(f.source and f.per_user_tok_s > 0 for f in figures)
    groq = {(f.model, f.speculative): f.per_user_tok_s for f in figures if f.provider == "Groq"}
    assert groq[("llama-3.1-70b", True)] == 1665 and groq[("llama-3.1-70b", False)] == 250
    data = seventy.to_json()
    assert len(data["specialised_per_user"]) == len(figures)
    text = "\n".join(seventy.context_lines())
    assert "not modelled here" in text and "1,665 tok/s (8-bit, with speculative decoding)" in text


def test_with_a_16_bit_cache_no_single_gpu_reaches_14000_in_aggregate_on_a_70b() -> None:
    a = reach_target(resolve_model("llama-3.3-70b"), 14_000, list(hardware_table().values()), kv_dtype="bf16")
    first = next(o for o in a.options if o.reached)
    assert first.deployment.gpus > 1
    assert "no single GPU does, at any batch that fits" in " ".join(a.aggregate_lines())


def test_an_nvfp4_cache_is_searched_on_the_hardware_that_holds_one() -> None:
    table = hardware_table()
    model = resolve_model("llama-3.3-70b")
    a = reach_target(model, 14_000, [table["H100-SXM"], table["MI355X"], table["B200"]], kv_dtype="nvfp4")
    assert a.options and {o.deployment.hardware.name for o in a.options} == {"B200"}
    assert a.best_per_request is not None and a.best_per_request.deployment.hardware.name == "B200"
    with pytest.raises(ConfigError, match=r"--kv-dtype nvfp4: an NVFP4 KV cache needs .*; none of the hardware "
                                          r"asked holds it"):
        reach_target(model, 14_000, [table["H100-SXM"]], kv_dtype="nvfp4")


def test_several_devices_without_a_link_figure_are_not_searched_in_aggregate() -> None:
    """Eight Apple M3 Max in tensor parallel, their communication uncounted (no link figure), had been listed as
    nearly reaching 14,000 tok/s: one device alone is searched where the link is unknown."""
    table = hardware_table()
    a = reach_target(resolve_model("llama-3.1-8b"), 14_000, [table["Apple-M3-Max"], table["H100-SXM"]])
    assert {o.deployment.gpus for o in a.options if o.deployment.hardware.name == "Apple-M3-Max"} == {1}
    assert max(o.deployment.gpus for o in a.options if o.deployment.hardware.name == "H100-SXM") > 1
