"""Efficiency of a measured run on synthetic timestamps: decode batch, MBU, MFU and the bottleneck rule."""

from __future__ import annotations

import pytest

from tokometer.load.profiles import LoadStep
from tokometer.load.selfcheck import ClientHealth
from tokometer.perf import Deployment, HardwareSpec, resolve_model
from tokometer.perf.efficiency import decode_batch, run_efficiency
from tokometer.records import RequestRecord, ServerTiming
from tokometer.runs.stored_spec import StoredSpec
from tokometer.store import StoredRun, StoredStep

MS = 1_000_000
HW = HardwareSpec(name="test", kind="cpu", memory_gb=16, bandwidth_gbs=100, bf16_tflops=1, source="made up")
# the built-in Gemma 3 270M in bf16: 0.268e9 × 2 B = 536 MB of weights; KV 2 × 18 × 1 × 256 × 2 = 18,432 B per token
D = Deployment(resolve_model("gemma-3-270m"), HW)


def _record(step: int, index: int, sent: int, ttft: int, tpot: int, *, tokens: int = 11, prompt_ms: float = 80,
            server_tpot: float | None = None, server: bool = True) -> RequestRecord:
    first = sent + ttft * MS
    last = first + (tokens - 1) * tpot * MS
    timing = ServerTiming(prompt_tokens=100, prompt_ms=prompt_ms, decode_tokens=tokens - 1,
                          decode_ms=(server_tpot or tpot) * (tokens - 1)) if server else None
    return RequestRecord(index=index, step=step, sent_ns=sent, first_token_ns=first, last_token_ns=last,
                         end_ns=last + MS, event_ns=[first + i * tpot * MS for i in range(tokens)],
                         event_tokens=[1.0] * tokens, input_tokens=100, output_tokens=tokens, status=200,
                         finish_reason="length", server=timing)


def _run(steps: list[tuple[ClientHealth | None, list[RequestRecord]]]) -> tuple[StoredRun, list[RequestRecord]]:
    run = StoredRun(id=7, status="completed", started_at="t", finished_at="t", target="http://x/v1",
                    api="openai-chat", model="m", label=None, spec=StoredSpec(), engine=None, host=None,
                    steps=tuple(StoredStep(i, LoadStep("concurrency", 1), "t", health=health)
                                for i, (health, _) in enumerate(steps)))
    return run, [r for _, records in steps for r in records]


def _saturated(verdict: str) -> ClientHealth:
    return ClientHealth(loop_lag_p99_ms=50, loop_lag_max_ms=60, cpu_fraction=0.5, client_lag_p99_ms=None,
                        saturated=True, verdict=verdict)


def test_decode_batch_is_the_overlap_while_decoding() -> None:
    sequential = [_record(0, 0, 0, 100, 10), _record(0, 1, 300 * MS, 100, 10)]
    assert decode_batch(sequential) == 1.0
    # decoding [500, 700] and [510, 710] ms: (10 × 1 + 190 × 2 + 10 × 1) / 210 = 1.905
    together = [_record(0, 0, 0, 500, 20), _record(0, 1, 10 * MS, 500, 20)]
    assert decode_batch(together) == pytest.approx(400 / 210)


# The activations gemma-3-270m's matmuls read and write a token, per layer: QKV in (640) and out (1,024 + 2 × 256),
# the output projection in (1,024) and out (640), the MLP in and out (2 × 640) and its width (268e6 − 167,772,160)
# / 18 − 1,638,400 attention parameters, over 640 = 6,140.33: 11,260.33 × 18 = 202,686 elements × 2 B.
ACTIVATIONS = 405_372


def test_mbu_mfu_and_bandwidth_verdict() -> None:
    run, records = _run([(None, [_record(0, 0, 0, 100, 10), _record(0, 1, 300 * MS, 100, 10)])])
    step = run_efficiency(run, records, D).steps[0]
    # context mid-answer: 100 + 11 / 2 = 105.5 tokens; read per step = 536e6 + 405,372 + 18,432 × 105.5
    # = 538,349,948 B
    assert D.model.activation_elements_per_token * 2 == pytest.approx(ACTIVATIONS)
    assert step.context_tokens == 105.5
    assert step.bytes_per_step == pytest.approx(536e6 + ACTIVATIONS + 18_432 * 105.5)
    # MBU = 538,349,948 B / 10 ms / 100 GB/s = 53.8 %
    assert step.mbu == pytest.approx((536e6 + ACTIVATIONS + 18_432 * 105.5) / 0.010 / 100e9)
    # decode MFU = (2 × 268e6 + 73,728 × 105.5) / 10 ms / 1 TFLOP/s = 5.4 %  (tied embeddings: all params multiply)
    assert step.decode_mfu == pytest.approx((2 * 268e6 + 73_728 * 105.5) / 0.010 / 1e12)
    # prefill: 2 × (268e6 − 167,772,160) × 100 + 2 × 167,772,160 (LM head once) + 73,728 × 5,050 FLOPs in 80 ms
    flops = 2 * (268e6 - 262_144 * 640) * 100 + 2 * 262_144 * 640 + 73_728 * 5050
    assert step.prefill_mfu == pytest.approx(flops / 0.080 / 1e12)
    assert step.prefill_source == "server prompt time" and step.wait_s == pytest.approx(0.020)
    assert (step.bottleneck, step.decode_batch) == ("bandwidth", 1.0)
    assert "54% of peak bandwidth" in step.why


def test_the_bottleneck_rule() -> None:
    queued = [_record(0, 0, 0, 500, 20), _record(0, 1, 10 * MS, 500, 20)]
    saturated = [_record(1, 0, 0, 100, 10)]
    slow_network = [_record(2, 0, 0, 100, 10, server_tpot=5)]
    no_server = [_record(3, 0, 0, 100, 40, server=False)]
    run, records = _run([(None, queued), (_saturated("loop lag 50 ms"), saturated),
                         (None, slow_network), (None, no_server)])
    steps = run_efficiency(run, records, D).steps
    assert [s.bottleneck for s in steps] == ["queueing", "client", "network", "engine overhead"]
    assert "TTFT 500 ms is 6.2× the server's prefill time (80 ms) and 71% of E2E" in steps[0].why
    assert "loop lag 50 ms" in steps[1].why
    assert "5.00 ms per token but tokens arrived every 10.00 ms" in steps[2].why
    assert steps[3].prefill_source.startswith("TTFT") and steps[3].mbu == pytest.approx(
        (536e6 + ACTIVATIONS + 18_432 * 105.5) / 0.040 / 100e9)
    assert run_efficiency(run, records, D).to_json()["steps"][0]["bottleneck"] == "queueing"


def test_the_servers_measured_batch_replaces_the_inferred_one() -> None:
    from tokometer.perf.efficiency import measured_batch

    assert measured_batch({"gauges": {"requests_running": {"mean": 3.5, "max": 4.0}}}) == 3.5
    assert measured_batch({"gauges": {}}) is None and measured_batch(None) is None
    assert measured_batch({"gauges": {"requests_running": {"mean": 0.0, "max": 0.0}}}) is None


def test_above_100_percent_is_not_an_efficiency_but_a_wrong_peak() -> None:
    # 0.1 TFLOP/s and 10 GB/s: the same records as above give MBU 53.8 % × 10 = 538 %, prefill MFU 20.75 GFLOP in
    # 80 ms / 0.1 TFLOP/s = 259 %, decode MFU 5.4 % × 10 = 54 %
    low = Deployment(resolve_model("gemma-3-270m"),
                     HardwareSpec(name="slow", kind="cpu", memory_gb=16, bandwidth_gbs=10, bf16_tflops=0.1,
                                  source="made up"))
    run, records = _run([(None, [_record(0, 0, 0, 100, 10), _record(0, 1, 300 * MS, 100, 10)])])
    result = run_efficiency(run, records, low)
    step = result.steps[0]
    assert step.mbu is None and step.prefill_mfu is None  # left out: not efficiencies
    assert step.decode_mfu == pytest.approx((2 * 268e6 + 73_728 * 105.5) / 0.010 / 0.1e12)  # 54 %: kept
    assert set(step.over_peak) == {"mbu", "prefill_mfu"}
    assert step.over_peak["mbu"].ratio == pytest.approx((536e6 + ACTIVATIONS + 18_432 * 105.5) / 0.010 / 10e9)
    flops = 2 * (268e6 - 262_144 * 640) * 100 + 2 * 262_144 * 640 + 73_728 * 5050
    assert step.over_peak["prefill_mfu"].ratio == pytest.approx(flops / 0.080 / 0.1e12)
    message = step.over_peak["prefill_mfu"].message
    assert message.startswith("prefill MFU 259% — above 100 %: the slow peak used (bf16, datasheet 100 GFLOP/s) is "
                              "too low for this run, or the engine did less work than counted (prefix-cache hits")
    assert "MBU 538% — above 100 %: the slow peak used (bandwidth, datasheet 10 GB/s)" in step.over_peak["mbu"].message
    assert step.bottleneck == "bandwidth" and "above the peak bandwidth used (538%: that peak is too low)" in step.why
    data = result.to_json()
    assert data["steps"][0]["mbu"] is None and data["steps"][0]["over_peak"]["mbu"]["ratio"] > 1
    assert data["peak"] == {"dtype": "bf16", "flops": 0.1e12, "basis": "datasheet", "detail": "made up"}
