"""``tokometer estimate``: roofline limits of a deployment, what a target speed takes, and how efficient a run was."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tokometer.cli.options import RUN_ID, FiniteFloat, check_output_path, parse_int_list
from tokometer.perf.roofline import Efficiency
from tokometer.util.jsontext import dumps
from tokometer.util.limits import MAX_CONCURRENCY, MAX_GPUS, MAX_TOKENS, MAX_TOKENS_PER_S

if TYPE_CHECKING:
    from rich.console import Console

    from tokometer.perf.estimate import Estimate
    from tokometer.perf.lengthsfile import RequestLengths
    from tokometer.perf.questions import EstimateSpec
    from tokometer.perf.speculative import Speculation

__all__ = ["command"]

SCHEMA = "tokometer.estimate/1"
TYPICAL = Efficiency()


@click.command("estimate")
@click.option("--model", "-m", default=None, help="Built-in name (e.g. llama-3.1-8b), a dir/file with config.json, "
              "a .gguf file, or a Hub id.")
@click.option("--hardware", "-H", default=None, help="Hardware from the table (e.g. H100-SXM, H100, MI300X), or "
              "'host' for this machine (measured). Comma list with --target.")
@click.option("--dtype", default=None, help="Weight format: bf16, fp16, fp8, int8, nvfp4 (fp4), mxfp4, awq, Q4_K_M, ..."
              " [default: the model's own]. Comma list with --target.")
@click.option("--kv-dtype", default=None, help="KV-cache format: bf16, fp16, fp8, int8, nvfp4 (fp4), q8_0, q4_0 "
              "[default: the one the checkpoint declares; fp8 with fp8 or nvfp4 weights (as NVIDIA's FP8 and FP4 "
              "checkpoints declare); else bf16; for a llama.cpp run, its cache type].")
@click.option("--tp", type=click.IntRange(1, MAX_GPUS), default=1, show_default=True,
              help="Tensor-parallel GPUs (must split the model's attention heads evenly; at most 64).")
@click.option("--pp", type=click.IntRange(1, MAX_GPUS), default=1, show_default=True,
              help="Pipeline-parallel stages (at most the model's layers).")
@click.option("--ep", is_flag=True, help="Expert parallelism (a mixture of experts): whole experts, E / TP on each of "
              "the --tp GPUs, as vLLM's --enable-expert-parallel [default: each expert split over them].")
@click.option("--attention-dp", is_flag=True, help="Attention data parallel (a mixture of experts): each of the --tp "
              "GPUs runs the attention of its own share of the sequences with a whole copy of the non-expert "
              "weights, as SGLang's --enable-dp-attention and TensorRT-LLM's enable_attention_dp.")
@click.option("--batch", "-b", default="1", show_default=True, help="Batch sizes (concurrent sequences), e.g. 1,8,64.")
@click.option("--input-tokens", type=click.IntRange(1, MAX_TOKENS), default=1000, show_default=True,
              help="Prompt length of each sequence.")
@click.option("--output-tokens", type=click.IntRange(1, MAX_TOKENS), default=1000, show_default=True,
              help="Answer length of each sequence.")
@click.option("--lengths", "lengths_path", type=click.Path(path_type=Path), default=None,
              help="A file of requests' lengths, a request a line (CSV input_tokens,output_tokens, or JSONL): the "
                   "estimate (and --target) takes their means for --input-tokens and --output-tokens and, for each "
                   "step's cached tokens, their spread (a long answer stays in the batch for more steps).")
@click.option("--no-chunked-prefill", is_flag=True, help="The batch rows' arriving prompts are prefilled in steps "
              "of their own that stall decoding [default: chunked, in the decode steps, as vLLM V1 and TensorRT-LLM].")
@click.option("--step-tokens", type=click.IntRange(16, MAX_TOKENS), default=None,
              help="Tokens one engine step may hold, decode and prompt together (vLLM's --max-num-batched-tokens, "
                   "TensorRT-LLM's max_num_tokens) [default: 8192].")
@click.option("--swa-full", is_flag=True, help="The engine keeps and reads the whole cache of the model's "
              "sliding-window (or chunked) layers, as llama.cpp's --swa-full (and TensorRT-LLM its chunked "
              "attention) [default: at most the window of each sequence, as vLLM, SGLang and llama.cpp's SWA cache]; "
              "a --run of llama.cpp takes its own.")
@click.option("--swa-pooled", is_flag=True, help="The engine gives the window layers' caches as much memory as the "
              "full layers' but reads only within each window, as TensorRT-LLM pools them (a pool for each window "
              "size, an identical share of the memory each): sequences fit as with --swa-full, a step reads as "
              "without.")
@click.option("--max-batch", type=click.IntRange(1, MAX_CONCURRENCY), default=None,
              help="Sequences the engine runs at once, each rank (vLLM's --max-num-seqs: 1024 on GPUs of 70 GiB or "
                   "more, else 256; TensorRT-LLM's max_batch_size): the batch rows' closed loop, max load and --run "
                   "run no more, the other users wait for a slot [default: 2048, TensorRT-LLM's].")
@click.option("--workload", type=click.Choice(["generate", "embed"]), default="generate", show_default=True,
              help="embed: embedding (or rerank) passes, a prefill only; --batch is the inputs per pass, "
                   "--input-tokens each input's length (--output-tokens is not used).")
@click.option("--gpu-memory-utilization", type=FiniteFloat(0.05, 1.0), default=0.9, show_default=True,
              help="Share of device memory for weights + KV cache (a 2 GiB activation reserve is also kept).")
@click.option("--kv-free-fraction", type=FiniteFloat(0.05, 1.0), default=None,
              help="The KV cache takes this share of the memory the weights and the 2 GiB reserve leave, as "
                   "TensorRT-LLM sizes it (kv_cache_free_gpu_mem_fraction: 0.9 by default, 0.95 in NVIDIA's "
                   "published runs), instead of --gpu-memory-utilization's share of the whole (vLLM's rule).")
@click.option("--bw-efficiency", type=FiniteFloat(0.01, 1.0), default=None,
              help="Expected share of peak bandwidth in decode [default: calibrated for the hardware, else "
                   f"{TYPICAL.decode_bandwidth}].")
@click.option("--prefill-efficiency", type=FiniteFloat(0.01, 1.0), default=None,
              help=f"Expected share of peak FLOP/s in prefill [default: calibrated, else {TYPICAL.prefill_compute}].")
@click.option("--decode-compute-efficiency", type=FiniteFloat(0.01, 1.0), default=None,
              help="Expected share of peak FLOP/s in compute-bound decode [default: calibrated, else "
                   f"{TYPICAL.decode_compute}].")
@click.option("--calibrate", "calibrate_runs", default=None, metavar="RUN,...",
              help="Fit the efficiencies to these saved runs (their MBU/MFU) and store them for the runs' hardware: "
                   "later estimates for it use them.")
@click.option("--no-calibration", is_flag=True, help="Ignore a stored calibration: typical efficiencies.")
@click.option("--explain", is_flag=True, help="Write the arithmetic out in words.")
@click.option("--spec-acceptance", type=FiniteFloat(0.0, 1.0), default=None,
              help="Speculative decoding: each draft token's acceptance rate (0 to 1); the batch rows are shown "
                   "with and without it. Needs --draft-model or --draft-cost.")
@click.option("--spec-tokens", type=click.IntRange(1, 64), default=4, show_default=True,
              help="Speculative decoding: draft tokens proposed per verify step.")
@click.option("--draft-model", default=None, help="Speculative decoding: the draft model (a built-in name, a "
              "config.json dir, ...), run on the same GPUs in the same formats.")
@click.option("--draft-cost", type=FiniteFloat(0.0, 1.0), default=None,
              help="Speculative decoding: each draft step as a fraction of the target's decode step (e.g. 0.05 "
                   "for an EAGLE or MTP head), instead of --draft-model.")
@click.option("--target", type=FiniteFloat(min=0, min_open=True, max=MAX_TOKENS_PER_S), default=None,
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
      tokometer estimate --calibrate 3,5             # fit the efficiencies to runs 3 and 5, for their hardware
    """
    from tokometer.cli.output import make_console
    from tokometer.perf import hardware_table
    from tokometer.perf.catalog import BUILTIN_MODELS
    from tokometer.perf.render import render_hardware, render_models
    from tokometer.util.atomicfile import write_atomic

    console = make_console(beside=(opts["json_path"],))  # stderr when the JSON goes to stdout
    if opts["list_models"] or opts["list_hardware"]:
        if opts["list_models"]:
            render_models(console, list(BUILTIN_MODELS.values()))
        if opts["list_hardware"]:
            render_hardware(console, list(hardware_table(opts["hardware_file"]).values()))
        return 0
    check_output_path(opts["json_path"], "--json", "estimate.json")
    spec = _spec(opts)
    speculative = _speculative_options(opts)
    if opts["workload"] == "embed":
        if opts["calibrate_runs"] is not None or opts["run_id"] is not None or opts["target"] is not None \
                or opts["explain"]:
            raise click.UsageError("--workload embed estimates passes: leave out --calibrate, --run, --target and "
                                   "--explain")
        payload = _embed(console, spec)
    elif opts["calibrate_runs"] is not None:
        payload = _calibrate(console, spec, parse_int_list(opts["calibrate_runs"], "--calibrate"), opts["store"])
    elif opts["run_id"] is not None:
        payload = _run(console, spec, opts["run_id"], opts["store"])
    elif opts["target"] is not None:
        payload = _target(console, spec, opts["target"])
    else:
        payload = _estimate(console, spec, opts["explain"], speculative)
    if opts["json_path"]:
        write_atomic(opts["json_path"], dumps({"schema": SCHEMA, **payload}, indent=2, default=str))
        console.print(f"JSON written to {opts['json_path']}")
    return 0


def _spec(opts: dict[str, Any]) -> EstimateSpec:
    from tokometer.perf.questions import EstimateSpec

    plain = opts["run_id"] is None and opts["target"] is None and opts["calibrate_runs"] is None
    batches = parse_int_list(opts["batch"], "--batch", MAX_CONCURRENCY) if plain else []
    return EstimateSpec(
        model=opts["model"], hardware=opts["hardware"], dtype=opts["dtype"], kv_dtype=opts["kv_dtype"],
        tp=opts["tp"], pp=opts["pp"], expert_parallel=opts["ep"], attention_dp=opts["attention_dp"],
        batches=tuple(batches), lengths=_lengths(opts),
        input_tokens=opts["input_tokens"], chunked_prefill=not opts["no_chunked_prefill"],
        **({"step_tokens": opts["step_tokens"]} if opts["step_tokens"] else {}),
        **({"max_batch": opts["max_batch"]} if opts["max_batch"] else {}), swa_full=opts["swa_full"],
        swa_pooled=_swa_pooled(opts),
        output_tokens=opts["output_tokens"], gpu_memory_utilization=opts["gpu_memory_utilization"],
        kv_free_fraction=_kv_free_fraction(opts),
        efficiency_overrides={name: opts[option] for name, option in (
            ("decode_bandwidth", "bw_efficiency"), ("prefill_compute", "prefill_efficiency"),
            ("decode_compute", "decode_compute_efficiency")) if opts[option] is not None},
        use_calibration=not opts["no_calibration"], hardware_file=opts["hardware_file"], remeasure=opts["remeasure"])


def _lengths(opts: dict[str, Any]) -> RequestLengths | None:
    """--lengths's requests, for a plain estimate or --target, and not beside --input-tokens or --output-tokens
    given on the command line (the file gives both)."""
    path = opts["lengths_path"]
    if path is None:
        return None
    if opts["workload"] == "embed" or any(opts[k] is not None for k in ("calibrate_runs", "run_id")):
        raise click.UsageError("--lengths sets the lengths of an estimate's batch rows, its max load or --target's "
                               "answer: leave out --run, --calibrate and --workload embed")
    source = click.get_current_context().get_parameter_source
    given = [f"--{name.replace('_', '-')}" for name in ("input_tokens", "output_tokens")
             if source(name) is click.core.ParameterSource.COMMANDLINE]
    if given:
        raise click.UsageError(f"--lengths gives the requests' lengths: leave out {' and '.join(given)}")
    from tokometer.perf.lengthsfile import read_lengths

    return read_lengths(path)


def _swa_pooled(opts: dict[str, Any]) -> bool:
    """--swa-pooled, refused beside --swa-full (two plans for the window layers' caches)."""
    if opts["swa_pooled"] and opts["swa_full"]:
        raise click.UsageError("--swa-full and --swa-pooled are two plans for the window layers' caches: give one")
    return bool(opts["swa_pooled"])


def _kv_free_fraction(opts: dict[str, Any]) -> float | None:
    """--kv-free-fraction, refused beside a --gpu-memory-utilization given on the command line (two rules for one
    cache)."""
    fraction: float | None = opts["kv_free_fraction"]
    given = click.get_current_context().get_parameter_source("gpu_memory_utilization")
    if fraction is not None and given is click.core.ParameterSource.COMMANDLINE:
        raise click.UsageError("--kv-free-fraction and --gpu-memory-utilization are two rules for the KV cache's "
                               "memory: give one")
    return fraction


def _calibrate(console: Console, spec: EstimateSpec, run_ids: list[int], store: str | None) -> dict[str, Any]:
    from tokometer.perf.calibrate import calibration_path
    from tokometer.perf.questions import calibrate_runs

    calibration = calibrate_runs(spec, run_ids, store)
    console.print(calibration.describe())
    console.print(f"  samples: {', '.join(f'{k} {v}' for k, v in calibration.samples.items())}; stored in "
                  f"{calibration_path()}: estimates for {calibration.hardware} now expect these "
                  "(--no-calibration: the typical ones)")
    if calibration.skipped:
        console.print(f"  skipped (said nothing about the engine): {'; '.join(calibration.skipped)}")
    return {"calibration": calibration.to_json()}


def _speculative_options(opts: dict[str, Any]) -> Speculation | None:
    """The speculative decoding asked for with --spec-acceptance (a plain estimate only), checked before any
    work; None without it."""
    given = [f"--{name.replace('_', '-')}" for name in ("draft_model", "draft_cost") if opts[name] is not None]
    if opts["spec_acceptance"] is None:
        if given:
            raise click.UsageError(f"{' and '.join(given)}: speculative decoding needs --spec-acceptance too")
        return None
    if opts["workload"] == "embed" or any(opts[k] is not None for k in ("calibrate_runs", "run_id", "target")):
        raise click.UsageError("--spec-acceptance adds speculative decoding to an estimate's batch rows: leave out "
                               "--target, --run, --calibrate and --workload embed")
    from tokometer.perf.loaders import resolve_model
    from tokometer.perf.speculative import Speculation

    draft = resolve_model(opts["draft_model"]) if opts["draft_model"] else None
    return Speculation(opts["spec_acceptance"], opts["spec_tokens"], draft, opts["draft_cost"])


def _estimate(console: Console, spec: EstimateSpec, explained: bool,
              speculative: Speculation | None = None) -> dict[str, Any]:
    from tokometer.perf import explain
    from tokometer.perf.questions import run_estimate
    from tokometer.perf.render import render_estimate

    result = run_estimate(spec)
    render_estimate(console, result)
    spec_payload, spec_text = _speculative(console, result, speculative, explained)
    text = explain(result) if explained else None
    text = "\n\n".join(t for t in (text, spec_text) if t) or None
    if text:
        console.print()
        console.print(text, soft_wrap=True)
    return {"estimate": result.to_json(), **spec_payload, **({"explain": text} if text else {})}


def _speculative(console: Console, result: Estimate, speculation: Speculation | None,
                 explained: bool) -> tuple[dict[str, Any], str | None]:
    """Speculative decoding over ``result``'s rows: rendered, its JSON block and (``--explain``) its words."""
    if speculation is None:
        return {}, None
    from tokometer.perf.speculative import explain_speculative, render_speculative, speculative_estimate

    s = speculative_estimate(result, speculation)
    render_speculative(console, s)
    return {"speculative": s.to_json()}, explain_speculative(s) if explained else None


def _embed(console: Console, spec: EstimateSpec) -> dict[str, Any]:
    from tokometer.perf.embedding import render_embedding_estimate, run_embedding_estimate

    result = run_embedding_estimate(spec)
    render_embedding_estimate(console, result)
    return {"estimate": result.to_json()}


def _target(console: Console, spec: EstimateSpec, target: float) -> dict[str, Any]:
    from tokometer.perf.questions import run_target
    from tokometer.perf.render import render_target

    answer = run_target(spec, target)
    render_target(console, answer)
    return {"target": answer.to_json()}


def _run(console: Console, spec: EstimateSpec, run_id: int, store: str | None) -> dict[str, Any]:
    from tokometer.perf.questions import judge_run
    from tokometer.perf.render import render_run

    result = judge_run(spec, run_id, store)
    render_run(console, result)
    return {"run_efficiency": result.to_json()}
