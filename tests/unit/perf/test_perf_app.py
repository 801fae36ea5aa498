"""The estimate application: a spec, one call per question, and a saved run's deployment taken from its engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tokometer.perf.questions as app
from tokometer.bundled import bundled_model_path
from tokometer.load.profiles import LoadStep
from tokometer.perf import HardwareSpec
from tokometer.perf.questions import (
    EstimateSpec,
    judge_run,
    judge_stored_run,
    llamacpp_kv_dtype,
    run_estimate,
    run_target,
)
from tokometer.records import RequestRecord, ServerTiming
from tokometer.runs.stored_spec import StoredSpec
from tokometer.store import EngineIdentity, ResultStore, StoredRun, StoredStep
from tokometer.util.errors import ConfigError

MS = 1_000_000
HW = HardwareSpec(name="box", kind="cpu", memory_gb=16, bandwidth_gbs=100, bf16_tflops=1, source="made up")
HW_TOML = ('[[hardware]]\nname = "box"\nkind = "cpu"\nmemory_gb = 16\nbandwidth_gbs = 100\n'
           'bf16_tflops_dense = 1\nsource = "made up"\n')


def _records(step: int = 0) -> list[RequestRecord]:
    out = []
    for i in range(3):
        sent = i * 500 * MS
        first, last = sent + 100 * MS, sent + 200 * MS
        out.append(RequestRecord(
            index=i, step=step, sent_ns=sent, first_token_ns=first, last_token_ns=last, end_ns=last + MS,
            event_ns=[first + k * 10 * MS for k in range(11)], event_tokens=[1.0] * 11, input_tokens=100,
            output_tokens=11, status=200, finish_reason="length",
            server=ServerTiming(prompt_tokens=100, prompt_ms=80, decode_tokens=10, decode_ms=100)))
    return out


def _run(engine: EngineIdentity | None) -> StoredRun:
    return StoredRun(id=7, status="completed", started_at="t", finished_at="t", target="http://x/v1",
                     api="openai-chat", model="m", label=None, spec=StoredSpec(), engine=engine, host=None,
                     steps=(StoredStep(0, LoadStep("concurrency", 1), "t"),))


def _llamacpp(argv: list[str]) -> EngineIdentity:
    return EngineIdentity.from_json({"engine": "llama.cpp", "model_file": str(bundled_model_path()), "argv": argv})


def test_the_kv_cache_type_of_a_llamacpp_argv() -> None:
    assert llamacpp_kv_dtype(["llama-server", "-m", "x.gguf"]) == "fp16"  # llama.cpp's default, f16
    assert llamacpp_kv_dtype(["llama-server", "--cache-type-k", "Q8_0"]) == "q8_0"
    assert llamacpp_kv_dtype(["llama-server", "-ctk", "q4_0", "-ctv", "q4_0"]) == "q4_0"
    assert llamacpp_kv_dtype(["llama-server", "-ctk"]) == "fp16"  # a flag without its value


def test_an_embedded_engine_run_gives_its_model_file_host_and_cache_type(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []

    def resolve(name: str, hardware_file: Path | None = None) -> HardwareSpec:
        asked.append(name)
        return HW

    monkeypatch.setattr(app, "resolve_hardware", resolve)  # "host" would measure this machine
    result = judge_stored_run(EstimateSpec(), _run(_llamacpp(["-ctk", "q8_0"])), _records())
    d = result.deployment
    assert asked == ["host"] and d.hardware is HW
    assert (d.model.name, d.weight_dtype, d.kv_dtype) == ("Gemma 3 270m", "Q4_K_M", "q8_0")
    assert result.run_id == 7 and [s.load for s in result.steps] == ["c=1"]
    # what is given wins over what the run says
    chosen = judge_stored_run(EstimateSpec(model="gemma-3-270m", kv_dtype="bf16"), _run(_llamacpp([])), _records())
    assert (chosen.deployment.model.name, chosen.deployment.kv_dtype) == ("gemma-3-270m", "bf16")
    assert asked == ["host", "host"]


def test_another_engine_needs_model_and_hardware(tmp_path: Path) -> None:
    hw = tmp_path / "hw.toml"
    hw.write_text(HW_TOML)
    # an engine whose identity names no model file nor hardware (a llama.cpp flag means nothing to it)
    other = _run(EngineIdentity.from_json({"engine": "sglang", "argv": ["-ctk", "q4_0"]}))
    for run in (_run(None), other):
        with pytest.raises(ConfigError, match=r"--model is required for run 7 \(it does not name a model file"):
            judge_stored_run(EstimateSpec(), run, _records())
        with pytest.raises(ConfigError, match=r"--hardware is required for run 7 \(it ran against http://x/v1\)"):
            judge_stored_run(EstimateSpec(model="gemma-3-270m"), run, _records())
        result = judge_stored_run(EstimateSpec(model="gemma-3-270m", hardware="box", hardware_file=hw), run,
                                  _records())
        assert result.deployment.kv_dtype == "bf16" and result.steps[0].bottleneck == "bandwidth"
    with pytest.raises(ConfigError, match="run 7 has no completed measured requests"):
        judge_stored_run(EstimateSpec(model="gemma-3-270m", hardware="box", hardware_file=hw), _run(None),
                         _records(step=1))


def test_a_vllm_run_gives_its_model_formats_parallel_sizes_and_hardware(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run against `tokometer serve --engine vllm` keeps the engine's identity (issue 31): estimate --run
    takes the model, the weight and KV formats, the parallel sizes and the device from it."""
    asked: list[str] = []

    def resolve(name: str, hardware_file: Path | None = None) -> HardwareSpec:
        asked.append(name)
        return HW

    monkeypatch.setattr(app, "resolve_hardware", resolve)
    cpu = {"engine": "vllm", "model": "served", "model_file": "gemma-3-270m", "device": "cpu", "dtype": "bfloat16",
           "argv": ["vllm", "serve", "x", "--dtype", "bfloat16"]}
    d = judge_stored_run(EstimateSpec(), _run(EngineIdentity.from_json(cpu)), _records()).deployment
    assert asked == ["host"] and (d.model.name, d.weight_dtype, d.tp, d.pp) == ("gemma-3-270m", "bf16", 1, 1)
    gpu = {**cpu, "device": "gpu", "gpu": {"name": "box", "count": 2}, "quantization": "fp8",
           "kv_cache_dtype": "fp8", "tensor_parallel_size": 2}
    d = judge_stored_run(EstimateSpec(), _run(EngineIdentity.from_json(gpu)), _records()).deployment
    assert asked == ["host", "box"] and (d.weight_dtype, d.kv_dtype, d.tp) == ("fp8", "fp8", 2)
    given = judge_stored_run(EstimateSpec(dtype="bf16", tp=1), _run(EngineIdentity.from_json(gpu)), _records())
    assert given.deployment.weight_dtype == "bf16"  # what is given wins
    # no --kv-cache-dtype: vLLM's auto, the model's 16 bits even with --quantization fp8 (not fp8 weights' fp8 default)
    auto = {key: value for key, value in gpu.items() if key != "kv_cache_dtype"}
    d = judge_stored_run(EstimateSpec(), _run(EngineIdentity.from_json(auto)), _records()).deployment
    assert (d.weight_dtype, d.kv_dtype) == ("fp8", "bf16")
    d = judge_stored_run(EstimateSpec(), _run(EngineIdentity.from_json({**gpu, "kv_cache_dtype": "auto"})),
                         _records()).deployment
    assert d.kv_dtype == "bf16"


def test_judge_run_reads_the_store(tmp_path: Path) -> None:
    hw = tmp_path / "hw.toml"
    hw.write_text(HW_TOML)
    db = tmp_path / "runs.db"
    store = ResultStore(f"sqlite:///{db}")
    run_id = store.create_run(target="http://x/v1", api="openai-chat", model="m", spec={}, engine=None, host=None)
    store.start_step(run_id, 0, {"concurrency": 1})
    for record in _records():
        store.append(run_id, record)
    store.finish_step(run_id, 0, {}, {"saturated": False}, False)
    store.finish_run(run_id, "completed")
    store.close()
    spec = EstimateSpec(model="gemma-3-270m", hardware="box", hardware_file=hw)
    result = judge_run(spec, run_id, str(db))
    assert result.run_id == run_id and result.steps[0].mbu == pytest.approx(
        (536e6 + 405_372 + 18_432 * 105.5) / 0.010 / 100e9)  # weights, activations, KV: test_perf_efficiency.py
    with pytest.raises(ConfigError, match="no run 99 in"):
        judge_run(spec, 99, str(db))


def test_estimate_and_target_need_a_model(tmp_path: Path) -> None:
    hw = tmp_path / "hw.toml"
    hw.write_text(HW_TOML)
    with pytest.raises(ConfigError, match="--model is required for an estimate"):
        run_estimate(EstimateSpec(hardware="box"))
    with pytest.raises(ConfigError, match="--hardware is required for an estimate"):
        run_estimate(EstimateSpec(model="gemma-3-270m"))
    with pytest.raises(ConfigError, match="--batch takes positive integers"):
        run_estimate(EstimateSpec(model="gemma-3-270m", hardware="box", hardware_file=hw, batches=()))
    result = run_estimate(EstimateSpec(model="gemma-3-270m", hardware="box", hardware_file=hw, batches=(1, 8)))
    assert [row.batch for row in result.rows] == [1, 8] and result.deployment.kv_dtype == "bf16"
    with pytest.raises(ConfigError, match="--model is required with --target"):
        run_target(EstimateSpec(), 100)
    answer = run_target(EstimateSpec(model="gemma-3-270m", hardware="box,", dtype="bf16,Q4_K_M",
                                     hardware_file=hw), 100)
    assert set(answer.per_request_bandwidth_gbs) == {"bf16", "Q4_K_M"}
    assert {o.deployment.hardware.name for o in answer.options} <= {"box"}


def test_a_vllm_run_of_a_modelopt_checkpoint_takes_its_declared_cache(monkeypatch: pytest.MonkeyPatch,
                                                                      tmp_path: Path) -> None:
    """vLLM resolves ``--kv-cache-dtype auto`` to the cache a ModelOpt checkpoint declares: the run is judged so."""
    monkeypatch.setattr(app, "resolve_hardware", lambda name, hardware_file=None: HW)
    config = {"architectures": ["LlamaForCausalLM"], "hidden_size": 2048, "num_attention_heads": 32,
              "num_key_value_heads": 8, "num_hidden_layers": 16, "intermediate_size": 8192, "vocab_size": 128256,
              "max_position_embeddings": 131072, "torch_dtype": "bfloat16"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "hf_quant_config.json").write_text(json.dumps(
        {"quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}}))
    facts = {"engine": "vllm", "model": "served", "model_file": str(tmp_path), "device": "gpu",
             "gpu": {"name": "box", "count": 1}, "argv": ["vllm", "serve", str(tmp_path)]}
    d = judge_stored_run(EstimateSpec(), _run(EngineIdentity.from_json(facts)), _records()).deployment
    assert (d.weight_dtype, d.kv_dtype) == ("fp8", "fp8")
