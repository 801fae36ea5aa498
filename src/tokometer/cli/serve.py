"""``tokometer serve``: start an engine with sane settings, wait until it answers, keep it up until Ctrl-C.

Engines: the embedded llama.cpp server with the bundled model (default), vLLM (flags worked out
from the GPU's memory, ``--dry-run`` prints them with the reasoning), and Ollama (the model is
pulled if missing). Whatever this command started is stopped when it exits, however it exits.
"""

from __future__ import annotations

import shlex
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import click

from tokometer.cli.options import PORT, FiniteFloat
from tokometer.cli.say import say
from tokometer.util.jsontext import dumps
from tokometer.util.limits import MAX_CONCURRENCY, MAX_MEMORY_GIB, MAX_SECONDS, MAX_THREADS, MAX_TOKENS, MIN_SECONDS
from tokometer.util.units import GIB

if TYPE_CHECKING:
    from tokometer.engines.handle import EngineHandle

__all__ = ["command"]

_DEFAULT_PORTS = {"llamacpp": 8080, "vllm": 8000, "ollama": 11434}
_SHOWN = ("engine", "engine_version", "device", "model", "model_file", "model_sha256", "quantization", "ctx_size",
          "ctx_per_slot", "parallel", "threads", "max_model_len", "binary", "binary_source", "chat_template")


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # SIGTERM stops the engine the same way Ctrl-C does


def _say(message: str) -> None:
    say(f"tokometer serve: {message}", err=True)


def _rebuild() -> None:
    """``--rebuild``: build tokometer's cached llama-server afresh (with its smoke run and fallbacks)."""
    from tokometer.engines.build import build_llama_server
    from tokometer.engines.buildprogress import progress_for_stderr

    progress = progress_for_stderr()
    try:
        build_llama_server(progress=progress, force=True)
    finally:
        progress.close()


def _prepare(engine: str, opts: dict[str, Any]) -> None:
    """``--prepare``: set the engine up (build, venv, model) and exit."""
    from tokometer.util.errors import ConfigError

    if engine == "vllm":
        _prepare_vllm()
    elif engine == "llamacpp":
        from tokometer.engines.binary import find_llama_server
        from tokometer.engines.quantize import find_llama_quantize
        from tokometer.util.errors import EngineError

        if opts["rebuild"]:
            _rebuild()
        try:
            server = find_llama_server(opts["llama_server"])
        except EngineError:
            if opts["llama_server"]:
                raise
            _rebuild()  # not built yet: build it now (the same build, checked by a smoke run)
            server = find_llama_server()
        _say(f"llama-server: {server}")
        _say(f"llama-quantize: {find_llama_quantize(build=True)}")
    else:
        raise ConfigError("--prepare sets up llamacpp or vllm; Ollama is installed from ollama.com")


def _start_llamacpp(opts: dict[str, Any], port: int) -> EngineHandle | None:
    from tokometer.engines import LlamaCppSettings, find_llama_server, start_llamacpp
    from tokometer.engines.llamacpp import llamacpp_argv

    if opts["rebuild"]:
        _rebuild()

    given = {"parallel": opts["parallel"], "ready_timeout_s": opts["ready_timeout"]}  # None: the settings' default
    settings = LlamaCppSettings(
        model_path=Path(opts["model"]) if opts["model"] else None, host=opts["host"], port=port,
        ctx_size=opts["ctx_size"], threads=opts["threads"], binary=opts["llama_server"],
        extra_args=tuple(opts["engine_args"]), **{k: v for k, v in given.items() if v is not None})
    if opts["dry_run"]:
        from tokometer.engines.llamacpp import checked_model

        model, meta = checked_model(settings)  # what a real start would refuse is refused here too
        click.echo(shlex.join(llamacpp_argv(find_llama_server(settings.binary), model, port, settings, meta)))
        return None
    _say(f"starting llama-server on {settings.host}:{port or '(a free port)'} …")
    return _timed(lambda: start_llamacpp(settings), "llamacpp", opts)


def _vllm_device(opts: dict[str, Any]) -> str:
    """``gpu`` or ``cpu``: as given by --device, else a GPU when one is found (or --gpu-memory-gb is given)."""
    if opts["device"] != "auto":
        return str(opts["device"])
    if opts["gpu_memory_gb"] is not None:
        return "gpu"
    from tokometer.engines.gpus import detect_gpus

    return "gpu" if detect_gpus() else "cpu"


def _prepare_vllm() -> None:
    """``--engine vllm --prepare``: vLLM's venv (its CPU build) and the bundled model converted for it, once."""
    from tokometer.engines.vllm_model import bundled_checkpoint

    _say(f"vLLM's CPU build and the bundled model are ready: {bundled_checkpoint(_say)}")


def _start_vllm(opts: dict[str, Any], port: int) -> EngineHandle | None:
    from tokometer.engines.vllm import find_vllm, plan_vllm, plan_vllm_cpu, start_vllm
    from tokometer.util.errors import ConfigError

    device = _vllm_device(opts)
    if device == "gpu":
        from tokometer.engines.gpus import gpu_for_planning

        if not opts["model"]:
            raise ConfigError("--engine vllm on a GPU needs --model (a Hugging Face id, a local dir, or e.g. "
                              "llama-3.1-8b)")
        plan = plan_vllm(opts["model"], gpu_for_planning(opts["gpu_memory_gb"]),
                         gpu_memory_utilization=opts["gpu_memory_utilization"],
                         tensor_parallel_size=opts["tensor_parallel_size"], max_model_len=opts["max_model_len"],
                         quantization=opts["quantization"], kv_cache_dtype=opts["kv_cache_dtype"],
                         host=opts["host"], port=port, extra_args=tuple(opts["engine_args"]))
    else:
        model, served = opts["model"], opts["served_model_name"]
        if not model:
            from tokometer.engines.vllm_model import BUNDLED_VLLM_NAME, bundled_checkpoint, find_bundled_checkpoint

            found = find_bundled_checkpoint()
            if found is None and opts["dry_run"]:
                raise ConfigError("the bundled model is not converted for vLLM yet: run `tokometer serve --engine "
                                  "vllm --prepare` first (or pass --model, a local checkpoint directory)")
            model, served = str(found or bundled_checkpoint(_say)), served or BUNDLED_VLLM_NAME
        plan = plan_vllm_cpu(model, kv_cache_gib=opts["kv_cache_gb"], max_model_len=opts["max_model_len"],
                             served_name=served, host=opts["host"], port=port, extra_args=tuple(opts["engine_args"]))
    install = None if opts["dry_run"] and not opts["vllm"] else find_vllm(opts["vllm"])
    if install is not None:
        plan.argv[0] = str(install.binary)
    say(plan.explain())
    if opts["dry_run"]:
        if not plan.fits:
            sys.exit(1)
        return None
    if device == "gpu":
        _say("starting vLLM (loading weights and capturing CUDA graphs takes minutes) …")
    else:
        _say("starting vLLM on the CPU (loading and warming up takes a few minutes on a small machine) …")
    return _timed(lambda: start_vllm(plan, ready_timeout_s=opts["ready_timeout"] or 1800.0, install=install), "vllm",
                  opts)


def _start_ollama(opts: dict[str, Any], port: int | None) -> EngineHandle | None:
    from tokometer.engines.ollama import default_ollama_url, start_ollama
    from tokometer.util.errors import ConfigError

    if not opts["model"]:
        raise ConfigError("--engine ollama needs --model (an Ollama model name, e.g. llama3.2:1b)")
    url = f"http://{opts['host']}:{port}" if port is not None else default_ollama_url()
    if opts["dry_run"]:
        say(f"would check Ollama at {url}, `POST {url}/api/pull` {opts['model']!r} if missing, then send "
            "one 1-token request")
        return None
    return _timed(lambda: start_ollama(opts["model"], url, pull=not opts["no_pull"], progress=_say,
                                       ready_timeout_s=opts["ready_timeout"] or 300.0), "ollama", opts)


def _timed(start: Callable[[], EngineHandle], engine: str, opts: dict[str, Any]) -> EngineHandle:
    """Start the engine, its start-up timed (cold, and warm by ``--warm-start``'s rule): `tokometer.engines.startup`."""
    from tokometer.engines.startup import timed_start

    return timed_start(start, engine, opts["warm_start"], progress=_say)[0]


def _show(handle: EngineHandle, as_json: bool) -> None:
    from tokometer.engines.startup import startup_of

    startup = startup_of(handle.identity)
    if as_json:
        click.echo(dumps({"url": handle.root_url, "openai_url": handle.openai_url, "model": handle.model,
                          "startup": startup.to_json() if startup is not None else None,
                          "identity": handle.identity}))
        return
    from rich.table import Table
    from rich.text import Text

    from tokometer.cli.output import make_console

    table = Table(show_header=False, box=None, pad_edge=False)
    for key in _SHOWN:
        if handle.identity.get(key) is not None:
            table.add_row(key, str(handle.identity[key]))
    host = handle.identity.get("host", {})
    if host:
        table.add_row("host", f"{host.get('cpu_model')}, {host.get('physical_cores')} cores, "
                              f"{host.get('ram_bytes', 0) / GIB:.1f} GiB RAM")
    console = make_console()
    console.print(Text.assemble(("ready", "bold green"), f" at {handle.root_url}  (OpenAI API: {handle.openai_url}, "
                                "model ", (handle.model, "bold"), ")"))
    console.print(table)
    if startup is not None:
        console.print(startup.describe())
    console.print("Ctrl-C stops it.")


@click.command("serve", context_settings={"ignore_unknown_options": True})
@click.option("--engine", type=click.Choice(["llamacpp", "vllm", "ollama"]), default="llamacpp", show_default=True,
              help="The engine to start: llama.cpp (CPU, built by tokometer), vLLM (NVIDIA GPU, or its CPU build) or "
              "Ollama.")
@click.option("--model", default=None,
              help="llamacpp: a .gguf file (default: the bundled Gemma 3 270M Q4_K_M); vllm: HF id, local dir or "
              "a built-in name (llama-3.1-8b, qwen2.5-7b, mistral-7b, …; on CPU default: the bundled model, "
              "converted to bf16); ollama: a model name.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address the engine listens on (0.0.0.0 or :: for every interface).")
@click.option("--port", type=PORT, default=None,
              help="Default 8080 (llamacpp), 8000 (vllm), 11434 (ollama); 0 = free.")
@click.option("--parallel", type=click.IntRange(1, MAX_CONCURRENCY), default=None,
              help="llamacpp: slots batched together (default: LlamaCppSettings.parallel, 4).")
@click.option("--ctx-size", type=click.IntRange(1, MAX_TOKENS), default=None,
              help="llamacpp: total context, split between the slots (default 4096 × --parallel).")
@click.option("--threads", type=click.IntRange(1, MAX_THREADS), default=None,
              help="llamacpp: CPU threads (default: physical cores).")
@click.option("--llama-server", default=None, help="llamacpp: the llama-server binary (default: lookup).")
@click.option("--rebuild", is_flag=True,
              help="llamacpp: first build tokometer's own llama-server afresh for this CPU (minutes; checked by a "
              "smoke run, with safer instruction sets if it dies).")
@click.option("--prepare", is_flag=True,
              help="Set the engine up and exit: llamacpp builds llama-server if missing (with --rebuild: afresh) and "
              "llama-quantize; vllm makes its own venv with vLLM's CPU build and converts the bundled model (once).")
@click.option("--vllm", "vllm", default=None, metavar="PATH",
              help="vllm: the vllm command, its venv directory or its python (default: $TOKOMETER_VLLM, then the "
              "venv --prepare made, then PATH).")
@click.option("--device", type=click.Choice(["auto", "gpu", "cpu"]), default="auto", show_default=True,
              help="vllm: GPU (CUDA) or CPU (vLLM's CPU build); auto: a GPU when one is found.")
@click.option("--kv-cache-gb", type=FiniteFloat(min=0, min_open=True, max=MAX_MEMORY_GIB), default=4.0,
              show_default=True,
              help="vllm on CPU: host memory for the KV cache, GiB (VLLM_CPU_KVCACHE_SPACE).")
@click.option("--served-model-name", default=None,
              help="vllm: the model name clients send (default: the model path; gemma-3-270m-bf16 for the bundled "
              "model).")
@click.option("--gpu-memory-gb", type=FiniteFloat(min=0, min_open=True, max=MAX_MEMORY_GIB), default=None,
              help="vllm: GPU memory in GiB (default: detected).")
@click.option("--gpu-memory-utilization", type=FiniteFloat(0.05, 0.99), default=0.90, show_default=True,
              help="vllm: share of each GPU's memory vLLM may take (weights, KV cache, activations).")
@click.option("--tensor-parallel-size", type=click.IntRange(1, 64), default=1, show_default=True,
              help="vllm: GPUs one model is split over; must divide the model's attention heads.")
@click.option("--max-model-len", type=click.IntRange(1, MAX_TOKENS), default=None,
              help="vllm: longest sequence in tokens (default: computed from the memory left for the KV cache).")
@click.option("--quantization", type=click.Choice(["fp8", "awq", "gptq"]), default=None,
              help="vllm: weight quantisation (awq, gptq: a checkpoint quantised that way).")
@click.option("--kv-cache-dtype", default="auto", show_default=True,
              type=click.Choice(["auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2", "nvfp4"]),
              help="vllm: KV-cache format: auto (the checkpoint's declared one, else the model's dtype), a 16-bit "
              "one, fp8 (half the memory) or nvfp4 (Blackwell).")
@click.option("--no-pull", is_flag=True, help="ollama: fail instead of pulling a missing model.")
@click.option("--ready-timeout", type=FiniteFloat(MIN_SECONDS, MAX_SECONDS), default=None,
              help="Seconds to wait for the first answer (default: 120 llamacpp, 1800 vllm, 300 ollama).")
@click.option("--warm-start/--no-warm-start", default=None,
              help="Time a second start too: stop the engine once it answers and start it again, with the caches "
              "the first start filled (default: on for llamacpp, about a second; off for vllm, minutes).")
@click.option("--dry-run", is_flag=True, help="Print the command (and for vllm the reasoning); start nothing.")
@click.option("--json", "as_json", is_flag=True, help="When ready, print one JSON line (URL, model, identity).")
@click.argument("engine_args", nargs=-1, type=click.UNPROCESSED)
def command(**opts: Any) -> None:
    """Start an inference engine and block until Ctrl-C, once it answers a real request.

    Arguments after the options (use -- first) go to the engine unchanged, e.g.
    ``tokometer serve -- --flash-attn on``.
    """
    from tokometer.util.errors import EngineError

    engine: str = opts["engine"]
    if opts["rebuild"] and engine != "llamacpp":
        from tokometer.util.errors import ConfigError

        raise ConfigError(f"--rebuild rebuilds tokometer's llama.cpp server; it does not apply to --engine {engine}")
    if opts["prepare"]:
        _prepare(engine, opts)
        return
    port = opts["port"] if opts["port"] is not None else _DEFAULT_PORTS[engine]
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        if engine == "llamacpp":
            handle = _start_llamacpp(opts, port)
        elif engine == "vllm":
            handle = _start_vllm(opts, port)
        else:
            handle = _start_ollama(opts, opts["port"])
        if handle is None:
            return
        from tokometer.engines.identity import published

        with handle, published(handle.root_url, handle.identity):  # a later bench --url keeps it (estimate --run)
            _show(handle, opts["as_json"])
            code = handle.wait()
            handle.check("while serving")  # raises, naming a signal in words (SIGILL: how to rebuild)
            raise EngineError(f"{engine} exited with status {code} while serving; its log ends: "
                              f"{' | '.join(handle.log_tail(6).splitlines())}")
    finally:
        signal.signal(signal.SIGTERM, previous)
