"""A step's share of prompts prefilled over many steps (`tokometer.perf.maxload`): a fraction of a prompt counts
that fraction of the whole prompt's attention, not the attention of a prompt as short as the fraction's tokens.
Numbers worked by hand."""

from __future__ import annotations

import pytest

from tokometer.perf import Deployment, resolve_hardware, resolve_model
from tokometer.perf.roofline import prefill_flops_split


def test_a_quarter_of_a_prompt_is_a_quarter_of_its_pairs() -> None:
    m = resolve_model("llama-3.1-8b")  # 32 layers, no windows
    whole = m.attended_pairs(1, 2000)
    assert whole == pytest.approx(32 * 2000 * 2001 / 2)  # the i-th token attends to i keys
    # 500 tokens a step of prompts 2,000 long: a quarter of one prompt's pairs, 4 × a 500-token prompt's
    assert m.attended_pairs(0.25, 500) == pytest.approx(whole / 4)
    assert m.attended_pairs(0.25, 500) == pytest.approx(4 * m.attended_pairs(1, 500), rel=2e-3)
    _, attention = prefill_flops_split(m, 500, 0, 0.25)
    assert attention == pytest.approx(m.attention_flops_per_layer_pair * whole / 4)
    # and the head runs for the last token of each prompt: a quarter of one
    matmul, _ = prefill_flops_split(m, 500, 0, 0.25)
    body = m.matmul_params - m.lm_head_params
    assert matmul == pytest.approx(2 * body * 500 + 2 * m.lm_head_params * 0.25)


def test_long_prompts_at_maximum_load_cost_their_whole_attention() -> None:
    from tokometer.perf.maxload import max_load
    from tokometer.perf.roofline import Efficiency, mixed_step_s
    d = Deployment(resolve_model("llama-3.3-70b"), resolve_hardware("B200"), "nvfp4", "fp8")
    load = max_load(d, 32_768, 1024, Efficiency())
    assert load is not None
    b = load.batch
    prompts = b / 1024  # a prompt ends (and one starts) every 1024 / B steps
    context = round(b * (32_768 + 512))
    step = mixed_step_s(d, b, context, prompts * 32_768, 0, Efficiency(), sequences=prompts)
    assert 1 / load.per_request_tok_s == pytest.approx(step)
    # the same tokens counted as one short prompt a step would miss most of the attention
    short = mixed_step_s(d, b, context, prompts * 32_768, 0, Efficiency(), sequences=1)
    assert prompts < 0.1 and step > 1.1 * short
