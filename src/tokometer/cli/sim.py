"""``tokometer sim``: a simulated inference server with scripted timing and faults."""

from __future__ import annotations

import contextlib
from typing import Any

import click

from tokometer.cli.options import LOG_LEVELS, PORT, FiniteFloat, build_spec
from tokometer.inbound.request_limits import DEFAULT_LIMITS
from tokometer.util.limits import MAX_ADAPTERS, MAX_SECONDS

__all__ = ["command"]


def _lora(opts: dict[str, Any]) -> dict[str, Any] | None:
    """The ``lora`` setting of ``--lora``, ``--max-loras`` and ``--lora-switch-ms``; None without ``--lora``."""
    from tokometer.sim.adapters import parse_lora_names
    from tokometer.util.errors import ConfigError

    if opts["lora"] is None:
        if opts["max_loras"] != 1 or opts["lora_switch_ms"]:
            raise ConfigError("--max-loras and --lora-switch-ms shape the adapters of --lora: give --lora NAME,... too")
        return None
    return {"names": parse_lora_names(opts["lora"]), "max_loras": opts["max_loras"],
            "switch_ms": opts["lora_switch_ms"]}


@click.command("sim")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on (0.0.0.0 or :: for every interface).")
@click.option("--port", type=PORT, default=8000, show_default=True, help="Port to listen on; 0 picks a free one "
              "(printed).")
@click.option("--model", default="sim-model", show_default=True, help="Model name the server reports.")
@click.option("--lora", default=None, metavar="NAME,...",
              help="LoRA adapters served beside --model (as vLLM's --lora-modules): a request may name the model or "
              "one of them; any other name gets vLLM's 404.")
@click.option("--max-loras", type=click.IntRange(1, MAX_ADAPTERS), default=1, show_default=True,
              help="With --lora: adapters loaded at once (vLLM's --max-loras).")
@click.option("--lora-switch-ms", type=FiniteFloat(0, MAX_SECONDS * 1000), default=0.0, show_default=True,
              help="With --lora: time to load an adapter that is not loaded (added to the request's TTFT, or to the "
              "modelled engine's step).")
@click.option("--ttft-ms", type=float, default=100.0, show_default=True, help="Time to the first token.")
@click.option("--itl-ms", type=float, default=5.0, show_default=True, help="Time between tokens.")
@click.option("--tokens-per-event", type=int, default=1, show_default=True, help="Tokens sent in each event.")
@click.option("--spec-tokens", type=int, default=0, show_default=True,
              help="Speculative decoding: tokens a draft proposes per step; each step then emits 1 + the accepted "
              "ones.")
@click.option("--spec-acceptance", type=float, default=0.7, show_default=True,
              help="Speculative decoding: chance each drafted token is accepted (the first rejection ends the run).")
@click.option("--spec-draft-cost", type=float, default=0.0, show_default=True,
              help="Speculative decoding: one drafted token's cost as a fraction of a step's time.")
@click.option("--spec-meta", is_flag=True,
              help="Speculative decoding: end each OpenAI answer with its verify steps and accepted and drafted "
              "tokens in a meta_info, as SGLang reports them per request.")
@click.option("--output-tokens", type=int, default=None,
              help="Natural answer length (EOS after this many); default: until max_tokens.")
@click.option("--default-max-tokens", type=int, default=128, show_default=True,
              help="Answer length when a request gives no max_tokens.")
@click.option("--empty-first-event", is_flag=True, help="Send an empty role-only event first, as vLLM does.")
@click.option("--max-context", type=int, default=32768, show_default=True,
              help="Context window: longer requests get HTTP 400 (context length).")
@click.option("--api-key", default=None, help="Require this bearer token (HTTP 401 otherwise).")
@click.option("--max-body-bytes", type=click.IntRange(min=1024), default=DEFAULT_LIMITS.max_body_bytes,
              show_default=True, help="Larger request bodies get HTTP 413 (the gateway's limit).")
@click.option("--reject-stream-options", is_flag=True, help="Answer 400 to stream_options, like some servers.")
@click.option("--fault", "faults", multiple=True,
              help="Fault and its rate per request, e.g. http_500=0.1 (repeatable). Faults: http_400, http_401, "
              "http_403, http_400_context_length, http_429, http_500, http_503, reset, malformed, error_event, "
              "stall, slow_first_byte.")
@click.option("--fault-schedule", default=None, help="Faults in request order, cycled, e.g. none,http_500,reset.")
@click.option("--fault-after-tokens", type=int, default=3, show_default=True,
              help="Mid-stream faults strike after this many tokens.")
@click.option("--stall-s", type=float, default=3600.0, show_default=True, help="How long a 'stall' lasts.")
@click.option("--slow-first-byte-ms", type=float, default=2000.0, show_default=True,
              help="How long a 'slow_first_byte' fault delays the response head.")
@click.option("--retry-after", type=click.IntRange(0, 86_400), default=None, metavar="S",
              help="The Retry-After header (seconds) that http_429 and http_503 faults send; default: none.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for fault dice.")
@click.option("--precise", is_flag=True, help="Pace events to microseconds by yielding the loop (uses more CPU).")
@click.option("--hardware", default=None,
              help="Model a deployment: hardware from 'tokometer estimate' (e.g. H100-SXM); --model then names "
              "the model (e.g. llama-3.1-8b) and a continuous-batching engine sets the timing.")
@click.option("--dtype", default="bf16", show_default=True, help="Modelled weight format (bf16, fp8, int4-awq, ...).")
@click.option("--kv-dtype", default=None, help="Modelled KV-cache format [default: fp8 with fp8 or nvfp4 weights, "
              "or the one the checkpoint declares; else bf16].")
@click.option("--tp", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Modelled tensor-parallel GPUs.")
@click.option("--max-num-seqs", type=int, default=256, show_default=True, help="Modelled engine: sequences per batch.")
@click.option("--max-batched-tokens", type=int, default=8192, show_default=True,
              help="Modelled engine: tokens per step (chunked prefill budget).")
@click.option("--no-prefix-caching", is_flag=True,
              help="Modelled engine: no prefix cache (vLLM's automatic prefix caching is on by default).")
@click.option("--gpu-memory-utilization", type=float, default=0.9, show_default=True,
              help="Modelled engine: share of GPU memory for weights and KV cache.")
@click.option("--time-scale", type=float, default=1.0, show_default=True,
              help="Modelled engine: stretch every time by this factor (to play a fast GPU faithfully).")
@click.option("--jitter", type=float, default=0.0, show_default=True,
              help="Modelled engine: relative standard deviation of step times.")
@click.option("--trace-bodies", is_flag=True, help="Keep each request's body in /sim/trace.")
@click.option("--max-output-tokens", type=int, default=None,
              help="The server's own cap on an answer (finish_reason length), whatever max_tokens asks.")
@click.option("--metrics-names", type=click.Choice(["vllm", "vllm-v0", "sglang", "llamacpp", "tgi"]),
              default="vllm", show_default=True,
              help="Whose Prometheus names GET /metrics speaks: vLLM (V1), vLLM V0, SGLang, llama.cpp or TGI.")
@click.option("--metrics-buckets", default=None, metavar="S,S,...",
              help="Upper bounds (seconds) of every latency histogram's buckets in /metrics instead of the "
                   "simulator's own, e.g. 0.3,1,10.")
@click.option("--buffer-stream", is_flag=True,
              help="Hold every event and send the whole answer at its end, as a buffering proxy does.")
@click.option("--truncate-context", is_flag=True,
              help="Cut a prompt beyond --max-context silently (usage reports the cut count) instead of HTTP 400.")
@click.option("--load-slowdown", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="Scripted timing: TTFT and ITL grow by this factor per other request in flight.")
@click.option("--prefix-cache-speedup", type=click.FloatRange(min=1), default=1.0, show_default=True,
              help="Scripted timing: a repeated request gets its first token this many times sooner.")
@click.option("--reasoning-tokens", type=click.IntRange(min=0), default=0, show_default=True,
              help="Reasoning mode: the first N tokens of every answer are reasoning.")
@click.option("--reasoning-format", type=click.Choice(["reasoning_content", "reasoning", "think"]),
              default="reasoning_content", show_default=True,
              help="How reasoning is sent: the chat delta's reasoning_content (DeepSeek, SGLang, llama.cpp) or "
              "reasoning (vLLM >= 0.11) field, or inline between <think> tags.")
@click.option("--log-level", type=click.Choice(LOG_LEVELS, case_sensitive=False), default="warning",
              show_default=True, help="Server log verbosity (uvicorn's levels).")
def command(**opts: Any) -> None:
    """Run a simulated server speaking OpenAI chat/completions, Ollama, TGI and llama.cpp protocols.

    \b
    Scripted (default): every request gets its first token after --ttft-ms, then one event every
    --itl-ms x --tokens-per-event.
    Modelled (--hardware): a continuous-batching engine plays --model on --hardware; each step
    takes as long as the roofline at typical efficiency says (tokometer estimate).
    GET /sim/trace shows what was sent and when; GET /metrics speaks vLLM's metric names
    (or another engine's: --metrics-names).
    """
    from tokometer.sim import SimConfig, bind_socket, serve
    from tokometer.sim.config import parse_fault_rates
    from tokometer.util.errors import ConfigError

    try:
        faults = parse_fault_rates(list(opts["faults"]))
    except ValueError as exc:
        raise ConfigError(f"--fault: {exc}") from None
    schedule = [f.strip() for f in opts["fault_schedule"].split(",")] if opts["fault_schedule"] else []
    buckets = None
    if opts["metrics_buckets"] is not None:
        try:
            buckets = tuple(float(b) for b in opts["metrics_buckets"].split(","))
        except ValueError:
            raise ConfigError(f"--metrics-buckets: not a list of seconds: {opts['metrics_buckets']!r} "
                              "(e.g. 0.3,1,10)") from None
    config = build_spec(
        SimConfig,
        model=opts["model"], lora=_lora(opts), ttft_ms=opts["ttft_ms"], itl_ms=opts["itl_ms"],
        tokens_per_event=opts["tokens_per_event"], output_tokens=opts["output_tokens"],
        spec_tokens=opts["spec_tokens"], spec_acceptance=opts["spec_acceptance"],
        spec_draft_cost=opts["spec_draft_cost"], spec_meta=opts["spec_meta"],
        default_max_tokens=opts["default_max_tokens"], empty_first_event=opts["empty_first_event"],
        max_context=opts["max_context"], api_key=opts["api_key"], max_body_bytes=opts["max_body_bytes"],
        reject_stream_options=opts["reject_stream_options"], faults=faults, fault_schedule=schedule,
        fault_after_tokens=opts["fault_after_tokens"], stall_s=opts["stall_s"],
        slow_first_byte_ms=opts["slow_first_byte_ms"], retry_after_s=opts["retry_after"], seed=opts["seed"],
        precise=opts["precise"],
        hardware=opts["hardware"], dtype=opts["dtype"], kv_dtype=opts["kv_dtype"], tp=opts["tp"],
        max_num_seqs=opts["max_num_seqs"], max_batched_tokens=opts["max_batched_tokens"],
        prefix_caching=not opts["no_prefix_caching"],
        gpu_memory_utilization=opts["gpu_memory_utilization"], time_scale=opts["time_scale"], jitter=opts["jitter"],
        trace_bodies=opts["trace_bodies"], max_output_tokens=opts["max_output_tokens"],
        metrics_names=opts["metrics_names"], metrics_buckets=buckets, buffer_stream=opts["buffer_stream"],
        truncate_context=opts["truncate_context"], load_slowdown=opts["load_slowdown"],
        prefix_cache_speedup=opts["prefix_cache_speedup"],
        reasoning_tokens=opts["reasoning_tokens"], reasoning_format=opts["reasoning_format"],
    )
    if config.modelled:
        from tokometer.sim.steptime import step_time_for

        step_time_for(config)  # a bad model, hardware or a deployment that does not fit: one line, before listening
    try:
        sock = bind_socket(opts["host"], opts["port"])
    except OSError as exc:
        raise ConfigError(f"cannot listen on {opts['host']}:{opts['port']}: {exc.strerror or exc}; "
                          "pick another --port (0 picks a free one)") from None
    with contextlib.suppress(KeyboardInterrupt):
        serve(config, sock, log_level=opts["log_level"])
