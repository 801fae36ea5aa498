"""The ``estimate`` application: an `EstimateSpec` and one call per question.

- `run_estimate`: the limits of one deployment at each batch size;
- `run_target`: which hardware, weight format, GPUs and batch reach a speed;
- `judge_run` (a saved run by id) and `judge_stored_run` (a `StoredRun` and its records): how close a
  measured run came to the roofline. What is not given is taken from the run: a run of the embedded
  llama.cpp engine names its GGUF file (the model), ran on this host (the hardware) and its cache type is
  in the engine's argv (the KV format).

The command line only parses options into the spec and renders what these return (`tokometer.perf.render`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokometer.perf.closedloop import STEP_TOKENS
from tokometer.perf.efficiency import RunEfficiency, run_efficiency
from tokometer.perf.estimate import Estimate, estimate
from tokometer.perf.hardware import hardware_table, resolve_hardware
from tokometer.perf.hardwarespec import HardwareSpec
from tokometer.perf.lengthsfile import RequestLengths
from tokometer.perf.loaders import resolve_model
from tokometer.perf.maxload import MAX_BATCH
from tokometer.perf.measuredloop import loops_beside
from tokometer.perf.quant import normalize_dtype
from tokometer.perf.roofline import Deployment, Efficiency, kv_format_problem
from tokometer.perf.target import TargetAnswer, reach_target
from tokometer.perf.trackrecord import track_record
from tokometer.util.errors import ConfigError

if TYPE_CHECKING:  # the store is imported where a run is read, not by every estimate
    from tokometer.perf.calibrate import Calibration
    from tokometer.records import RequestRecord
    from tokometer.store.runs import StoredRun

__all__ = ["DEFAULT_KV_DTYPE", "EstimateSpec", "calibrate_runs", "judge_run", "judge_stored_run",
           "llamacpp_kv_dtype", "resolve_efficiency", "run_estimate", "run_target"]

DEFAULT_KV_DTYPE = "bf16"
"""The KV format of weights other than fp8 and nvfp4 (`default_kv_dtype`)."""
LLAMACPP_KV_DTYPE = "fp16"
"""llama.cpp's default cache type (f16), when its argv sets none."""


@dataclass(frozen=True)
class EstimateSpec:
    """What ``tokometer estimate`` was asked; None leaves a choice to the question (and to a saved run).

    ``hardware`` and ``dtype`` are one name each, or comma lists for `run_target`.
    """

    model: str | None = None
    hardware: str | None = None
    dtype: str | None = None
    kv_dtype: str | None = None
    tp: int = 1
    pp: int = 1
    expert_parallel: bool = False
    attention_dp: bool = False
    batches: Sequence[int] = (1,)
    input_tokens: int = 1000
    output_tokens: int = 1000
    lengths: RequestLengths | None = None
    """The requests' lengths from a file (``--lengths``): their means stand for ``input_tokens`` and
    ``output_tokens``, their spread sets each step's cached tokens (`tokometer.perf.lengths`)."""
    chunked_prefill: bool = True
    """The closed loop's prompts ride in decode steps (``--no-chunked-prefill``: steps of their own)."""
    step_tokens: int = STEP_TOKENS
    """Tokens one engine step may hold (``--step-tokens``; vLLM's max_num_batched_tokens)."""
    max_batch: int = MAX_BATCH
    """Sequences one engine rank schedules at once (``--max-batch``; vLLM's max_num_seqs)."""
    swa_full: bool = False
    """The engine keeps the whole cache of a model's window layers (``--swa-full``, as llama.cpp's):
    `Deployment.full_window_cache`."""
    swa_pooled: bool = False
    """The engine plans the window layers' caches at the full layers' size and reads within (``--swa-pooled``, as
    TensorRT-LLM): `Deployment.window_memory_whole`."""
    gpu_memory_utilization: float = 0.9
    kv_free_fraction: float | None = None
    """The KV cache's share of the memory left after the weights and the reserve (``--kv-free-fraction``,
    TensorRT-LLM's ``kv_cache_free_gpu_mem_fraction``), instead of ``gpu_memory_utilization``'s share of the
    whole: each deployment turns it into its equivalent (`Deployment.kv_memory_share`)."""
    efficiency: Efficiency | None = None
    """None: the hardware's stored calibration (`tokometer.perf.calibrate`) if it has one, else typical."""
    efficiency_overrides: Mapping[str, float] = field(default_factory=dict)
    """Efficiencies given on the command line (``decode_bandwidth``, ...): they win over both."""
    use_calibration: bool = True
    hardware_file: Path | None = None
    remeasure: bool = False
    """Measure this host again when the hardware is ``host``."""


def _require(value: str | None, option: str, why: str) -> str:
    if not value:
        raise ConfigError(f"{option} is required {why} (see --list-models / --list-hardware)")
    return value


def _hardware(name: str, spec: EstimateSpec) -> HardwareSpec:
    if name.strip().lower() == "host" and spec.remeasure:
        from tokometer.perf.host import host_hardware

        return host_hardware(remeasure=True)
    return resolve_hardware(name, spec.hardware_file)


def _deployment(spec: EstimateSpec, model_name: str, hardware_name: str, kv_default: str | None = None) -> Deployment:
    """``spec``'s deployment; the KV format: ``spec``'s, else ``kv_default``, else the one the checkpoint declares
    when it runs in its own weights, else the weights' default (`ModelSpec.default_kv`)."""
    model = resolve_model(model_name)
    weights = spec.dtype or model.native_dtype
    hardware = _hardware(hardware_name, spec)
    kv = spec.kv_dtype or kv_default or model.default_kv(weights)
    problem = None if spec.kv_dtype or kv_default else kv_format_problem(kv, hardware)
    if problem:
        raise ConfigError(f"{model.name}'s checkpoint declares a KV cache in {kv}, the default while it runs in its "
                          f"own weights: {problem}; give --kv-dtype fp8")
    return Deployment(model, hardware, weights, kv, tp=spec.tp, pp=spec.pp,
                      expert_parallel=spec.expert_parallel, attention_dp=spec.attention_dp,
                      full_window_cache=spec.swa_full, window_memory_whole=spec.swa_pooled)


def resolve_efficiency(spec: EstimateSpec, hardware: str) -> tuple[Efficiency, str]:
    """The efficiencies to expect on ``hardware`` and where they come from (for the output): ``spec``'s own,
    else the hardware's stored calibration, else typical; efficiencies given on the command line win."""
    from tokometer.perf.calibrate import load_calibration

    base, source = Efficiency(), "typical"
    if spec.efficiency is not None:
        base, source = spec.efficiency, "given"
    elif spec.use_calibration and (stored := load_calibration(hardware)) is not None:
        base, source = stored.efficiency, stored.describe()
    if spec.efficiency_overrides:
        base = replace(base, **dict(spec.efficiency_overrides))
        source = f"{source}, with {', '.join(sorted(spec.efficiency_overrides))} given"
    return base, source


def _names(value: str | None) -> list[str]:
    return [name for name in (value or "").split(",") if name.strip()]


def estimate_inputs(spec: EstimateSpec) -> tuple[Deployment, list[int], Efficiency, str]:
    """What every estimate of ``spec`` needs (model and hardware required): its deployment, batch sizes, and
    the efficiencies with where they come from."""
    model = _require(spec.model, "--model", "for an estimate")
    hardware = _require(spec.hardware, "--hardware", "for an estimate (a table name, or 'host')")
    batches = list(spec.batches)
    if not batches or min(batches) < 1:
        raise ConfigError("--batch takes positive integers, e.g. 1,8,64")
    d = _deployment(spec, model, hardware)
    efficiency, source = resolve_efficiency(spec, d.hardware.name)
    return d, batches, efficiency, source


def run_estimate(spec: EstimateSpec) -> Estimate:
    """The limits of ``spec``'s deployment (model and hardware required) at each of its batch sizes."""
    d, batches, efficiency, source = estimate_inputs(spec)
    lengths = spec.lengths
    i, o = (lengths.input_tokens, lengths.output_tokens) if lengths else (spec.input_tokens, spec.output_tokens)
    return replace(estimate(d, batches, i, o, efficiency,
                            d.kv_memory_share(spec.gpu_memory_utilization, spec.kv_free_fraction),
                            chunked_prefill=spec.chunked_prefill,
                            step_tokens=spec.step_tokens, max_batch=spec.max_batch, lengths=lengths),
                   efficiency_source=source,
                   kv_free_fraction=spec.kv_free_fraction, track_record=track_record(d, source))


def run_target(spec: EstimateSpec, target: float) -> TargetAnswer:
    """What reaches ``target`` tok/s: ``spec``'s hardware (default: the whole table) × its weight formats (default:
    the usual ones) × GPUs × batch."""
    model = resolve_model(_require(spec.model, "--model", "with --target"))
    if spec.hardware:
        hardware = [_hardware(name, spec) for name in _names(spec.hardware)]
    else:
        hardware = list(hardware_table(spec.hardware_file).values())
    dtypes = _names(spec.dtype) if spec.dtype else None
    # one calibration applies only when the question is about one hardware
    efficiency, _ = resolve_efficiency(spec, hardware[0].name) if len(hardware) == 1 else \
        (replace(spec.efficiency or Efficiency(), **dict(spec.efficiency_overrides)), "")
    return reach_target(model, target, hardware, dtypes, spec.kv_dtype, spec.input_tokens,
                        spec.output_tokens, efficiency, spec.gpu_memory_utilization,
                        kv_free_fraction=spec.kv_free_fraction, lengths=spec.lengths)


def llamacpp_kv_dtype(argv: Sequence[str]) -> str:
    """The KV-cache format of a llama.cpp server started with ``argv`` (its K cache type; f16 by default)."""
    args = list(argv)
    for flag in ("--cache-type-k", "-ctk"):
        if flag in args and args.index(flag) + 1 < len(args):
            return str(args[args.index(flag) + 1]).lower()
    return LLAMACPP_KV_DTYPE


def _run_deployment(spec: EstimateSpec, run: StoredRun) -> Deployment:
    """``spec``'s deployment, with what it leaves open taken from ``run``'s engine where that says it: the
    embedded llama.cpp's GGUF on this host; a vLLM's model, weight and KV formats and parallel sizes
    (`tokometer.engines.identity`), on this host's CPU or its GPU."""
    engine = run.engine
    facts = engine.facts if engine is not None else {}
    model = spec.model or (engine.model_file if engine else None)
    model = _require(model, "--model", f"for run {run.id} (it does not name a model file the estimate can read)")
    hardware = spec.hardware or _engine_hardware(facts)
    hardware = _require(hardware, "--hardware", f"for run {run.id} (it ran against {run.target})")
    if engine is not None and engine.is_llamacpp:  # its --swa-full keeps the window layers' whole cache
        whole = replace(spec, swa_full=spec.swa_full or "--swa-full" in engine.argv)
        return _deployment(whole, model, hardware, llamacpp_kv_dtype(engine.argv))
    kv = facts.get("kv_cache_dtype")
    known = replace(spec, dtype=spec.dtype or _vllm_dtype(facts),
                    tp=spec.tp if spec.tp != 1 else int(facts.get("tensor_parallel_size") or 1),
                    pp=spec.pp if spec.pp != 1 else int(facts.get("pipeline_parallel_size") or 1))
    if facts.get("engine") == "vllm" and kv in (None, "auto"):
        kv = _vllm_auto_kv(known, model)
    return _deployment(known, model, hardware, None if kv in (None, "auto") else str(kv))


def _vllm_auto_kv(spec: EstimateSpec, model_name: str) -> str:
    """The cache vLLM's ``--kv-cache-dtype auto`` (its default) gives: the one a ModelOpt checkpoint declares when
    it runs in its own weights (``vllm/utils/torch_utils.py``, ``resolve_kv_cache_dtype_string``), else the model's
    16-bit dtype, whatever the weights' format (``--quantization fp8`` keeps a bf16 cache)."""
    model = resolve_model(model_name)
    weights = spec.dtype or model.native_dtype
    return model.native_kv_dtype if model.native_kv_dtype and model.is_native(weights) else DEFAULT_KV_DTYPE


def _engine_hardware(facts: Mapping[str, Any]) -> str | None:
    """The hardware a run's engine ran on, where its identity says: ``host`` for the embedded llama.cpp and a
    CPU vLLM; a GPU's name for a GPU vLLM; None: not said."""
    if facts.get("engine") == "llama.cpp" or facts.get("device") == "cpu":
        return "host"
    gpu = facts.get("gpu")
    name = gpu.get("name") if isinstance(gpu, Mapping) else None
    return str(name) if name else None


def _vllm_dtype(facts: Mapping[str, Any]) -> str | None:
    """The weights' format a vLLM's identity gives (``--quantization``, else ``--dtype`` but ``auto``)."""
    for name in ("quantization", "dtype"):
        value = facts.get(name)
        if value and value != "auto":
            return normalize_dtype(str(value))
    return None


def judge_stored_run(spec: EstimateSpec, run: StoredRun, records: list[RequestRecord]) -> RunEfficiency:
    """How close each step of ``run`` came to the roofline of its deployment, and what held it back."""
    d = _run_deployment(spec, run)
    efficiency, _ = resolve_efficiency(spec, d.hardware.name)
    result = run_efficiency(run, records, d, efficiency)
    if not result.steps:
        raise ConfigError(f"run {run.id} has no completed measured requests to judge")
    loops = loops_beside(run, records, d, efficiency, chunked=spec.chunked_prefill, step_tokens=spec.step_tokens,
                         max_batch=spec.max_batch)
    return replace(result, closed_loop=tuple(loops))


def calibrate_runs(spec: EstimateSpec, run_ids: Sequence[int], store: str | None = None) -> Calibration:
    """Fit efficiencies to runs ``run_ids`` (`tokometer.perf.calibrate.fit`), judged against the typical ones, and
    store them for their hardware."""
    from tokometer.perf.calibrate import fit, save_calibration

    typical = replace(spec, efficiency=Efficiency(), efficiency_overrides={}, use_calibration=False)
    calibration = fit([judge_run(typical, run_id, store) for run_id in run_ids])
    save_calibration(calibration)
    return calibration


def judge_run(spec: EstimateSpec, run_id: int, store: str | None = None) -> RunEfficiency:
    """`judge_stored_run` for run ``run_id`` of the store at ``store`` (a URL or a SQLite file; default: the
    configured store), opened read-only."""
    from tokometer.store import ResultStore, configured_store_url

    results = ResultStore(configured_store_url(store), read_only=True)
    try:
        run = results.run(run_id)
        if run is None:
            raise ConfigError(f"no run {run_id} in {results.display_url}: see 'tokometer runs' for the ids")
        records = results.load_records(run_id)
    finally:
        results.close()
    return judge_stored_run(spec, run, records)
