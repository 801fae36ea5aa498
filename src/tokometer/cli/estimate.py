"""``tokometer estimate``: roofline limits of a deployment, what a target speed takes, and how efficient a run was."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tokometer.cli.options import RUN_ID, FiniteFloat, check_output_path, parse_int_list

if TYPE_CHECKING:
    from tokometer.perf import Deployment, Efficiency, HardwareSpec

__all__ = ["command"]

SCHEMA = "tokometer.estimate/1"


@click.command("estimate")
@click.option("--model", "-m", default=None, help="Built-in name (e.g. llama-3.1-8b), a dir/file with config.json, "
              "a .gguf file, or a Hub id.")
@click.option("--hardware", "-H", default=None, help="Hardware from the table (e.g. H100-SXM, H100, MI300X), or "
              "'host' for this machine (measured). Comma list with --target.")
@click.option("--dtype", default=None, help="Weight format: bf16, fp16, fp8, int8, awq, gptq, Q4_K_M, Q8_0, ... "
              "[default: the model's own]. Comma list with --target.")
@click.option("--kv-dtype", default=None, help="KV-cache format: bf16, fp16, fp8, int8, q8_0, q4_0 [default: bf16; "
              "for a llama.cpp run, its cache type].")
@click.option("--tp", type=click.IntRange(min=1), default=1, show_default=True,
              help="Tensor-parallel GPUs (must split the model's attention heads evenly; at most 64).")
@click.option("--pp", type=click.IntRange(min=1), default=1, show_default=True,
              help="Pipeline-parallel stages (at most the model's layers).")
@click.option("--batch", "-b", default="1", show_default=True, help="Batch sizes (concurrent sequences), e.g. 1,8,64.")
@click.option("--input-tokens", type=click.IntRange(min=1), default=1000, show_default=True,
              help="Prompt length of each sequence.")
@click.option("--output-tokens", type=click.IntRange(min=1), default=1000, show_default=True,
              help="Answer length of each sequence.")
@click.option("--gpu-memory-utilization", type=FiniteFloat(0.05, 1.0), default=0.9, show_default=True,
              help="Share of device memory for weights + KV cache (a 2 GiB activation reserve is also kept).")
@click.option("--bw-efficiency", type=FiniteFloat(0.01, 1.0), default=0.6, show_default=True,
              help="Expected share of peak bandwidth in decode.")
@click.option("--prefill-efficiency", type=FiniteFloat(0.01, 1.0), default=0.55, show_default=True,
              help="Expected share of peak FLOP/s in prefill.")
@click.option("--decode-compute-efficiency", type=FiniteFloat(0.01, 1.0), default=0.5, show_default=True,
              help="Expected share of peak FLOP/s in compute-bound decode.")
@click.option("--explain", is_flag=True, help="Write the arithmetic out in words.")
@click.option("--target", type=FiniteFloat(min=0, min_open=True), default=None,
              help="Tokens/s to reach: which hardware, format and batch do.")
@click.option("--run", "run_id", type=RUN_ID, default=None, help="Efficiency (MBU/MFU, bottleneck) of a saved run.")
@click.option("--store", default=None, help="Results store for --run: a SQLAlchemy URL or a SQLite file path.")
@click.option("--hardware-file", type=click.Path(path_type=Path), default=None,
              help="TOML file with [[hardware]] rows [default: <user config dir>/tokometer/hardware.toml].")
@click.option("--remeasure", is_flag=True, help="Measure this host's bandwidth and matmul speed again.")
@click.option("--list-models", is_flag=True, help="Show the built-in models.")
@click.option("--list-hardware", is_flag=True, help="Show the hardware table with its sources.")
@click.option("--json", "json_path", type=click.Path(path_type=Path), default=None, help="Write the result as JSON.")
def command(**opts: Any) -> int:
    """Roofline limits of a model on hardware, what a target speed takes, or how efficient a measured run was.

    \b
    Examples:
      tokometer estimate --model llama-3.1-8b --hardware H100-SXM --dtype bf16 --batch 1,8,64
      tokometer estimate --model llama-3.1-8b --hardware H100 --explain
      tokometer estimate --model llama-3.1-8b --target 14000
      tokometer estimate --run 3                     # a run of the embedded engine: its GGUF on this host
    """
    from tokometer.cli.output import make_console
    from tokometer.perf import Efficiency, hardware_table
    from tokometer.perf.catalog import BUILTIN_MODELS
    from tokometer.perf.render import render_hardware, render_models

    console = make_console()
    if opts["list_models"] or opts["list_hardware"]:
        if opts["list_models"]:
            render_models(console, list(BUILTIN_MODELS.values()))
        if opts["list_hardware"]:
            render_hardware(console, list(hardware_table(opts["hardware_file"]).values()))
        return 0
    check_output_path(opts["json_path"], "--json", "estimate.json")
    eff = Efficiency(opts["bw_efficiency"], opts["prefill_efficiency"], opts["decode_compute_efficiency"])
    if opts["run_id"] is not None:
        payload = _run(console, opts, eff)
    elif opts["target"] is not None:
        payload = _target(console, opts, eff)
    else:
        payload = _estimate(console, opts, eff)
    if opts["json_path"]:
        opts["json_path"].write_text(json.dumps({"schema": SCHEMA, **payload}, indent=2, default=str), "utf-8")
        console.print(f"JSON written to {opts['json_path']}")
    return 0


def _hardware(name: str, opts: dict[str, Any]) -> HardwareSpec:
    from tokometer.perf import resolve_hardware

    if name.strip().lower() == "host" and opts["remeasure"]:
        from tokometer.perf.host import host_hardware

        return host_hardware(remeasure=True)
    return resolve_hardware(name, opts["hardware_file"])


def _require(value: str | None, option: str, why: str) -> str:
    from tokometer.errors import ConfigError

    if not value:
        raise ConfigError(f"{option} is required {why} (see --list-models / --list-hardware)")
    return value


def _deployment(opts: dict[str, Any], model_name: str, hardware_name: str, kv_default: str = "bf16") -> Deployment:
    from tokometer.perf import Deployment, resolve_model

    model = resolve_model(model_name)
    return Deployment(model, _hardware(hardware_name, opts), opts["dtype"] or model.native_dtype,
                      opts["kv_dtype"] or kv_default, tp=opts["tp"], pp=opts["pp"])


def _estimate(console: Any, opts: dict[str, Any], eff: Efficiency) -> dict[str, Any]:
    from tokometer.errors import ConfigError
    from tokometer.perf import estimate, explain
    from tokometer.perf.render import render_estimate

    model = _require(opts["model"], "--model", "for an estimate")
    hardware = _require(opts["hardware"], "--hardware", "for an estimate (a table name, or 'host')")
    batches = parse_int_list(opts["batch"], "--batch")
    if not batches or min(batches) < 1:
        raise ConfigError("--batch takes positive integers, e.g. 1,8,64")
    d = _deployment(opts, model, hardware)
    result = estimate(d, batches, opts["input_tokens"], opts["output_tokens"], eff, opts["gpu_memory_utilization"])
    render_estimate(console, result)
    text = explain(result) if opts["explain"] else None
    if text:
        console.print()
        console.print(text, soft_wrap=True)
    return {"estimate": result.to_json(), **({"explain": text} if text else {})}


def _target(console: Any, opts: dict[str, Any], eff: Efficiency) -> dict[str, Any]:
    from tokometer.perf import hardware_table, resolve_model
    from tokometer.perf.render import render_target
    from tokometer.perf.target import reach_target

    model = resolve_model(_require(opts["model"], "--model", "with --target"))
    if opts["hardware"]:
        hardware = [_hardware(name, opts) for name in opts["hardware"].split(",") if name.strip()]
    else:
        hardware = list(hardware_table(opts["hardware_file"]).values())
    dtypes = [t for t in opts["dtype"].split(",") if t.strip()] if opts["dtype"] else None
    answer = reach_target(model, opts["target"], hardware, dtypes, opts["kv_dtype"] or "bf16",
                          opts["input_tokens"], opts["output_tokens"], eff, opts["gpu_memory_utilization"])
    render_target(console, answer)
    return {"target": answer.to_json()}


def _kv_type_of_llamacpp(engine: dict[str, Any]) -> str:
    argv = list(engine.get("argv") or [])
    for flag in ("--cache-type-k", "-ctk"):
        if flag in argv and argv.index(flag) + 1 < len(argv):
            return str(argv[argv.index(flag) + 1]).lower()
    return "fp16"  # llama.cpp's default cache type is f16


def _run(console: Any, opts: dict[str, Any], eff: Efficiency) -> dict[str, Any]:
    from tokometer.cli.bench import _store_url
    from tokometer.errors import ConfigError
    from tokometer.perf.efficiency import run_efficiency
    from tokometer.perf.render import render_run
    from tokometer.store import ResultStore

    store = ResultStore(_store_url(opts["store"]), read_only=True)
    try:
        run = store.get_run(opts["run_id"])
        if run is None:
            raise ConfigError(f"no run {opts['run_id']} in {store.display_url}: see 'tokometer runs' for the ids")
        records = store.load_records(opts["run_id"])
    finally:
        store.close()
    engine = run.get("engine") or {}
    llamacpp = engine.get("engine") == "llama.cpp"
    model = opts["model"] or (engine.get("model_file") if llamacpp else None)
    model = _require(model, "--model", f"for run {run['id']} (it does not name a model file the estimate can read)")
    hardware = opts["hardware"] or ("host" if llamacpp else None)
    hardware = _require(hardware, "--hardware", f"for run {run['id']} (it ran against {run.get('target')})")
    d = _deployment(opts, model, hardware, _kv_type_of_llamacpp(engine) if llamacpp else "bf16")
    result = run_efficiency(run, records, d, eff)
    if not result.steps:
        raise ConfigError(f"run {run['id']} has no completed measured requests to judge")
    render_run(console, result)
    return {"run_efficiency": result.to_json()}
