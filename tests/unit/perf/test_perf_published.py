"""The estimate at maximum load against published serving figures (`tokometer.perf.published`): 40 figures
of TensorRT-LLM's perf overview (Llama 3.1 8B and Llama 3.3 70B in FP8 on H100 and H200, ten prompt/answer
shapes each; source and commit in src/tokometer/perf/data/published-serving.csv)."""

from __future__ import annotations

import statistics

import pytest

from tokometer.perf import Efficiency
from tokometer.perf.published import compare_published, published_figures
from tokometer.perf.quant import default_kv_dtype


def test_every_published_figure_has_its_source() -> None:
    figures = published_figures()
    assert len(figures) == 40
    assert all("perf-overview.md at commit 00f37686" in f.source and f.output_tok_s > 0 for f in figures)


def test_the_estimate_at_max_load_is_within_thirty_percent_of_every_published_figure() -> None:
    checked = compare_published()
    errors = {f"{c.figure.model} {c.figure.hardware} {c.figure.input_tokens}/{c.figure.output_tokens}": c.error
              for c in checked}
    worst = max(errors.items(), key=lambda kv: abs(kv[1]))
    assert abs(worst[1]) <= 0.30, worst
    assert statistics.median(abs(e) for e in errors.values()) <= 0.12
    # Not one-sided: the model neither always flatters nor always undersells.
    assert sum(e > 0 for e in errors.values()) >= 10 and sum(e < 0 for e in errors.values()) >= 10


def test_prompt_heavy_shapes_are_bound_by_prefill_and_long_answers_by_bandwidth() -> None:
    by_shape = {(c.figure.model, c.figure.hardware, c.figure.input_tokens, c.figure.output_tokens): c
                for c in compare_published()}
    assert by_shape[("llama-3.1-8b", "H200-SXM", 2048, 128)].bound == "prefill"
    assert by_shape[("llama-3.1-8b", "H200-SXM", 128, 2048)].bound == "bandwidth"
    assert by_shape[("llama-3.1-8b", "H200-SXM", 128, 128)].bound == "compute"


def test_the_efficiencies_matter_as_stated() -> None:
    slower = compare_published(Efficiency(decode_bandwidth=0.3))
    base = compare_published()
    ratios = [s.expected_tok_s / b.expected_tok_s for s, b in zip(slower, base, strict=True)]
    assert all(r <= 1.0001 for r in ratios)  # half the bandwidth efficiency never speeds anything up
    assert min(ratios) < 0.6  # and halves the bandwidth-bound shapes nearly
    assert default_kv_dtype("fp8") == "fp8" and default_kv_dtype("bf16") == "bf16"
    assert default_kv_dtype("FP8") == "fp8" and default_kv_dtype("awq") == "bf16"


@pytest.mark.parametrize("kv", ["bf16", "fp8"])
def test_a_bigger_kv_format_fits_fewer_sequences(kv: str) -> None:
    figure = published_figures()[1]  # 8B on H200, 128 -> 2048
    from dataclasses import replace

    checked = compare_published(figures=[replace(figure, kv_dtype=kv)])[0]
    assert checked.batch == (876 if kv == "fp8" else 438)
