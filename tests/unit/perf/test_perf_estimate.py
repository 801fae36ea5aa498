"""The batch table, its explanation in words, and the "what would it take" search."""

from __future__ import annotations

import pytest

from tokometer.perf import Deployment, Efficiency, estimate, explain, hardware_table, resolve_hardware, resolve_model
from tokometer.perf.target import reach_target


def _llama() -> Deployment:
    return Deployment(resolve_model("llama-3.1-8b"), resolve_hardware("H100-SXM"))


ACTIVATIONS = 4_456_450.4375  # B a token's matmuls read and write (worked in tests/unit/perf/test_perf_roofline.py)


def test_batch_table() -> None:
    e = estimate(_llama(), [1, 8, 64, 256], 1000, 1000)
    assert e.kv_capacity_tokens == 450_911 and e.max_sequences == 225  # 450,911 // 2,000
    one, eight, _, big = e.rows
    # mid-answer each cache holds 1,000 + 500 tokens: step = (16.06e9 + 4.46e6 + 1,500 × 131,072) / 3.35e12 = 4.854 ms
    assert _llama().model.activation_elements_per_token * 2 == pytest.approx(ACTIVATIONS)
    assert one.context_tokens == 1500
    assert one.step_bound_s == pytest.approx((16.06e9 + ACTIVATIONS + 1500 * 131_072) / 3350e9)
    assert one.per_request_bound_tok_s == pytest.approx(206.01, abs=0.01)
    # expected: at 82.5 % of the bandwidth, plus the fixed 70 µs of each of the 32 layers
    assert one.step_expected_s == pytest.approx(one.step_bound_s / 0.825 + 32 * 70e-6)
    assert eight.decode_only_bound_tok_s == pytest.approx(8 / ((16.06e9 + 8 * ACTIVATIONS + 12_000 * 131_072) / 3350e9))
    # with prompts arriving (closed loop) the aggregate is below decode only, and B × O / the user cycle
    loop = eight.closed_bound
    assert eight.aggregate_bound_tok_s == pytest.approx(8 * 1000 / (loop.ttft_s + 999 * loop.itl_s))
    assert eight.aggregate_bound_tok_s < eight.decode_only_bound_tok_s
    assert one.fits and not big.fits  # 256 × 2,000 tokens > 450,911
    assert big.kv_bytes_end == 256 * 2000 * 131_072
    assert {row.limiter for row in e.rows} == {"bandwidth"}
    assert e.compute_bound_batch is None and e.compute_bound_batch_short == 347
    data = e.to_json()
    assert data["weight_bytes"] == pytest.approx(16.06e9) and data["kv_bytes_per_token"] == 131_072
    assert data["batches"][0]["per_request_tok_s"]["bound"] == pytest.approx(206.01, abs=0.01)  # one user: 1 / step
    assert data["batches"][0]["decode_only"]["per_request_tok_s"]["bound"] == pytest.approx(206.01, abs=0.01)
    assert data["hardware"]["source"] == "NVIDIA H100 datasheet"


def test_compute_bound_rows_and_overridden_efficiency() -> None:
    eff = Efficiency(decode_bandwidth=0.8, prefill_compute=0.5, decode_compute=0.4)
    e = estimate(_llama(), [512], 10, 10, eff)
    row = e.rows[0]
    assert row.limiter == "compute"
    # the matmuls, 2 × 7,504,663,424 × 512 FLOPs at 40 % of 989 TFLOP/s, then the attention, which reads its
    # 512 × 15 cached tokens × 131,072 B at 80 % of 3.35 TB/s (its 524,288 FLOPs a pair are far fewer), and
    # the fixed 70 µs of each of the 32 layers (the matmuls' bytes, 16.06e9 + 512 × 4.46e6, take 6.8 ms: fewer)
    assert (16.06e9 + 512 * ACTIVATIONS) / (0.8 * 3350e9) < 2 * 7_504_663_424 * 512 / (0.4 * 989e12)
    assert row.step_expected_s == pytest.approx(2 * 7_504_663_424 * 512 / (0.4 * 989e12)
                                                + 7680 * 131_072 / (0.8 * 3350e9) + 32 * 70e-6)


def test_explain_writes_the_arithmetic() -> None:
    text = explain(estimate(_llama(), [1], 1000, 1000))
    assert "Weights: 8.03 B params × 2 B (bf16) = 16.06 GB = 14.96 GiB." in text
    assert "2 (K and V) × 32 layers × 8 KV heads × 128 head dim × 2 B = 131,072 B = 128.0 KiB" in text
    assert "= 55.04 GiB per GPU; / 128.0 KiB = 450,911 tokens" in text
    assert "1 × 2,228,225 activations × 2 B = 4.5 MB" in text
    assert "(16.06 GB + 4.5 MB + 196.6 MB) / 3,350 GB/s = 4.854 ms" in text
    assert "Step bound 4.854 ms → 206.0 tok/s per request" in text
    assert "Turning point: with short contexts decode turns compute bound at batch 347" in text
    tp = explain(estimate(Deployment(resolve_model("llama-3.1-70b"), resolve_hardware("H100"), tp=4, pp=2), [1],
                          100, 100))
    assert "all-reduce" in tp and "Communication, counted in every step" in tp
    assert "per-token latency is not reduced" in tp
    no_link = explain(estimate(Deployment(resolve_model("llama-3.1-8b"), resolve_hardware("Apple-M3-Ultra"), tp=2),
                               [1], 100, 100))
    assert "communication is NOT counted: Apple-M3-Ultra has no link figure" in no_link


def test_what_it_takes_to_see_14000_tokens_per_second() -> None:
    answer = reach_target(resolve_model("llama-3.1-8b"), 14_000, list(hardware_table().values()),
                          input_tokens=1000, output_tokens=1000)
    # per request: (16.06e9 + 1,500 × 131,072) B × 14,000 / 0.825 = 275.9 TB/s: no listed hardware has it
    assert answer.per_request_bandwidth_gbs["bf16"] == pytest.approx(
        (16.06e9 + 1500 * 131_072) * 14_000 / 0.825 / 1e9)
    assert answer.best_per_request is not None and not answer.best_per_request.reached
    # the fastest single stream is on one of the GPUs that read their memory fastest (8 TB/s: B300, GB200, MI355X, ...)
    fastest = max(h.bandwidth_gbs for h in hardware_table().values())
    assert answer.best_per_request.deployment.hardware.bandwidth_gbs == fastest
    first = answer.options[0]
    assert first.reached and first.deployment.gpus == 1 and first.aggregate_tok_s >= 14_000
    # the smallest batch: one fewer does not reach it
    b200 = [o for o in answer.options if o.deployment.hardware.name == "B200" and o.deployment.weight_dtype == "bf16"]
    assert b200 and b200[0].reached and b200[0].batch <= b200[0].max_sequences
    d = b200[0].deployment
    less = estimate(d, [b200[0].batch - 1], 1000, 1000).rows[0]
    assert less.aggregate_expected_tok_s < 14_000
    # one H100 cannot: each sequence's KV read alone caps the aggregate at 3.35e12 × 0.825 / 196.6 MB ≈ 14,060
    # tok/s, and the weights, the prompts' prefill and the per-layer cost come on top
    h100 = [o for o in answer.options
            if o.deployment.hardware.name == "H100-SXM" and o.deployment.weight_dtype == "bf16"]
    assert h100[0].reached and h100[0].deployment.tp == 2
    assert answer.to_json()["per_request"]["reached"] is False


def test_a_request_past_the_models_context_is_said_so() -> None:
    """llama-3.1-8b's context is 131,072 tokens: a 200,000 → 200,000 request passes it (a server refuses it), a
    100,000 → 31,072 one just fits."""
    assert estimate(_llama(), [1], 200_000, 200_000).past_context == 400_000
    assert estimate(_llama(), [1], 100_000, 31_072).past_context is None
    assert estimate(_llama(), [1], 100_000, 31_073).to_json()["past_model_context"] == 131_073
