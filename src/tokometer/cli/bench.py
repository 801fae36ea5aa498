"""``tokometer bench``: benchmark an endpoint, or the embedded engine when no --url is given."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

import click

from tokometer.benchmark.embedded import EMBEDDED_PROFILE
from tokometer.cli.options import (
    FiniteFloat,
    api_key_option,
    build_spec,
    check_output_path,
    parse_duration,
    parse_float_list,
    parse_headers,
    parse_int_list,
    parse_size,
)
from tokometer.cli.say import say
from tokometer.cli.specoption import SpecOption, flag_words, spec_options, user_fields
from tokometer.cli.terminate import EXIT_CODE, Terminate
from tokometer.datasets.images import ImageFormat
from tokometer.load.profiles import Arrival
from tokometer.load.ramp import RampStrategy
from tokometer.protocols.registry import PROTOCOLS
from tokometer.util.limits import MAX_CONCURRENCY, MAX_GPUS, MAX_THREADS

if TYPE_CHECKING:
    from tokometer.benchmark.spec import BenchSpec
    from tokometer.engines import LlamaCppSettings

__all__ = ["command"]


def _spec() -> type[BenchSpec]:
    from tokometer.benchmark.spec import BenchSpec

    return BenchSpec


def _engine_settings() -> type[LlamaCppSettings]:
    from tokometer.engines import LlamaCppSettings

    return LlamaCppSettings


spec_option = functools.partial(click.option, cls=SpecOption, spec=_spec)
"""An option for a `BenchSpec` field: its default is the field's (`tokometer.cli.specoption`)."""


def _negated(value: bool, flag: str = "") -> bool:
    """A ``--no-X``/``--insecure`` flag against its field, either way: the one is the opposite of the other."""
    return not value


def _seconds(value: float | None) -> str | None:
    """A field's seconds as the duration option's text: ``600.0`` -> ``600s``."""
    return None if value is None else f"{value:g}s"


def _listed(values: list[float]) -> str | None:
    """A list field's default as the option's comma-separated text (None for an empty one)."""
    return ",".join(f"{v:g}" for v in values) or None


_DURATION: dict[str, Any] = {"to_cli": _seconds, "from_cli": parse_duration}
"""A field of seconds as a duration option, both ways (``600.0`` <-> ``600s``)."""
_NEGATION: dict[str, Any] = {"to_cli": _negated, "from_cli": _negated}
"""A boolean field as the flag that turns it off (``--no-check``, ``--insecure``)."""


def _read_mix(path: Path | None, flag: str) -> Any:
    from tokometer.datasets.mix import read_mix

    return None if path is None else read_mix(path)


def _mebibytes(size: int) -> str:
    """A size field's bytes as the size option's text: ``1048576`` -> ``1 MiB``."""
    return f"{size / 2**20:g} MiB"


def _mebibytes_or_sized(size: int | None) -> str | None:
    """A size field whose default (None) is sized by the run: ``--max-response-bytes``."""
    return None if size is None else _mebibytes(size)


@click.command("bench")
@spec_option("--url", field="url", default=None,
             help="Base URL of the server (e.g. http://127.0.0.1:8000/v1). Omit to start the embedded llama.cpp "
                  "engine with the bundled model and benchmark that.")
@spec_option("--api", field="api", type=click.Choice(sorted(PROTOCOLS)), default=None,
             help="Protocol the server speaks [default: ollama for a URL on port 11434, else openai-chat].")
@spec_option("--model", field="model", help="Model name to request (default: the first one the server lists).")
@spec_option("--api-key", callback=api_key_option, envvar="TOKOMETER_API_KEY", field="api_key",
             help="Bearer token (or TOKOMETER_API_KEY).")
@spec_option("--header", "headers", field="headers", multiple=True, default=(),
             from_cli=lambda lines, _: parse_headers(lines),
             help="Extra request header 'Name: value' (repeatable).")
@spec_option("--ca-bundle", type=click.Path(dir_okay=False), field="ca_bundle",
             help="PEM file of CAs to trust for an https:// URL (a private CA or a self-signed server).")
@spec_option("--insecure", is_flag=True, field="tls_verify", **_NEGATION,
             help="Do not check an https:// server's certificate (test servers only).")
@spec_option("--no-check", is_flag=True, field="check", **_NEGATION,
             help="Skip the 1-token check request sent before the run (it finds a wrong --api, URL or key before a "
                  "thousand requests fail).")
@spec_option("--server-metrics", show_default=True, field="server_metrics", metavar="auto|off|URL",
             help="The server's Prometheus /metrics to sample through the run (auto: at the URL's origin).")
@spec_option("--gpu-metrics", show_default=True, field="gpu_metrics", metavar="auto|nvml|off|URL",
             help="GPU telemetry: NVML for a server on this machine, or a DCGM exporter's /metrics URL.")
@spec_option("--scrape-interval", show_default=True, field="scrape_interval_s", **_DURATION,
             help="How often server and GPU metrics are read.")
@spec_option("--gpus", type=click.IntRange(min=1, max=MAX_GPUS), field="gpus",
             help="How many GPUs serve the endpoint: throughput and the Pareto front per GPU [default: the "
                  "vLLM or SGLang command line tokometer started, else unknown].")
@spec_option("--concurrency", "-c", field="concurrency", to_cli=_listed, from_cli=parse_int_list,
             help="Concurrency levels to sweep, e.g. 1,4,16 (closed loop).")
@spec_option("--rate", "-r", field="rate", to_cli=_listed, from_cli=parse_float_list,
             help="Request rates per second to sweep, e.g. 10,20 (open loop).")
@spec_option("--synchronous", is_flag=True, field="synchronous",
             help="One request at a time (instead of --concurrency or --rate).")
@spec_option("--arrival", type=click.Choice(get_args(Arrival)), field="arrival",
             show_default=True, help="Arrival process for --rate.")
@spec_option("--burstiness", type=FiniteFloat(min=0, min_open=True), field="burstiness", show_default=True,
             help="Gamma shape for --arrival gamma (<1 burstier, >1 smoother).")
@spec_option("--max-concurrency", type=int, field="max_concurrency", help="Cap on requests in flight for --rate.")
@spec_option("--probe-rate", type=float, field="probe_rate",
             help="Also send one-token probes at this rate per second (Poisson) beside the load; their TTFT is "
             "reported apart (the step's probe block), not in the step's metrics.")
@spec_option("--ramp", type=click.Choice(get_args(RampStrategy)), field="ramp",
             help="Ramp each step's --concurrency or --rate up from --ramp-from over --ramp-time, then hold it.")
@spec_option("--ramp-from", type=FiniteFloat(min=0), field="ramp_from",
             help="Where a --ramp starts: concurrency slots (at least 1), or requests a second.")
@spec_option("--ramp-time", field="ramp_time_s", **_DURATION, help="How long a --ramp takes, e.g. 30s.")
@spec_option("--time-slice", field="time_slice_s", **_DURATION,
             help="Also summarise each step per slice of this long (requests by send time), e.g. 10s.")
@spec_option("--steady-tolerance", type=FiniteFloat(min=0, min_open=True), field="steady_tolerance",
             show_default=True, help="How close to its target the load must be for the step's steady state.")
@spec_option("--requests", "-n", "requests_", type=int, field="requests",
             help=f"Measured requests per step [default: {{default}}; {EMBEDDED_PROFILE['requests']} for the embedded "
                  "engine].")
@spec_option("--duration", field="duration_s", **_DURATION, help="Stop each step after this long, e.g. 30s, 2m.")
@spec_option("--warmup", type=int, field="warmup", show_default=True,
             help="Requests per step sent first and left out of results.")
@spec_option("--input-tokens", type=int, field="input_tokens",
             help=f"Synthetic prompt length in tokens [default: {{default}}; {EMBEDDED_PROFILE['input_tokens']} for "
                  "the embedded engine].")
@spec_option("--prefix-tokens", type=click.IntRange(min=0), field="prefix_tokens", show_default=True,
             help="Start each synthetic prompt with one of --prefix-groups shared prefixes of this many tokens "
                  "(agents' system prompts); the report gives TTFT with a cold and a warm prefix.")
@spec_option("--prefix-groups", type=click.IntRange(min=1), field="prefix_groups", show_default=True,
             help="How many different shared prefixes (with --prefix-tokens).")
@spec_option("--batch-size", type=click.IntRange(1, 4096), field="batch_size", show_default=True,
             help="Inputs per request, each --input-tokens long (--api openai-embeddings or rerank).")
@spec_option("--output-tokens", type=int, field="output_tokens",
             help=f"max_tokens per request [default: {{default}}; {EMBEDDED_PROFILE['output_tokens']} for the "
                  "embedded engine].")
@spec_option("--images", type=click.IntRange(min=0, max=16), field="images", show_default=True,
             help="Synthetic images sent in every chat request (data URLs; openai-chat, synthetic prompts).")
@spec_option("--image-size", field="image_size", show_default=True, help="Each image's WIDTHxHEIGHT in pixels.")
@spec_option("--image-format", type=click.Choice(get_args(ImageFormat)), field="image_format", show_default=True,
             help="How the images are encoded.")
@spec_option("--tools", type=click.IntRange(min=0, max=128), field="tools", show_default=True,
             help="Tool definitions sent in every chat request (a tool-call workload).")
@spec_option("--tool-choice", field="tool_choice", show_default=True,
             help="With --tools: auto, required, none, or one tool's name (get_weather, search_web, ...).")
@spec_option("--ignore-eos", is_flag=True, field="ignore_eos",
             help="Ask the server to ignore EOS so every answer is --output-tokens long.")
@spec_option("--temperature", type=FiniteFloat(min=0), field="temperature", show_default=True,
             help="Sampling temperature sent with every request (0: greedy, the same answer each time).")
@spec_option("--seed", type=int, field="seed",
             help="Seed for prompts, arrival times and sampling (default: a fresh one per run, recorded with it, so "
                  "that no run is answered from an earlier one's prompt cache; give it to repeat a run exactly).")
@spec_option("--no-usage", is_flag=True, field="include_usage", **_NEGATION,
             help="Do not send stream_options.include_usage.")
@spec_option("--dataset", type=click.Path(path_type=Path), field="dataset",
             help="Prompts from a JSONL or ShareGPT file instead of synthetic ones.")
@spec_option("--dataset-kind", type=click.Choice(["auto", "jsonl", "sharegpt"]), field="dataset_kind",
             show_default=True,
             help="Format of --dataset (auto: from its content).")
@spec_option("--prompt", field="prompt", help="Send this one prompt every time.")
@spec_option("--mix", type=click.Path(path_type=Path), field="mix", from_cli=_read_mix, metavar="FILE",
             help="Tenants sharing the run (TOML [[tenant]] tables: name, share or rate, model or LoRA adapter, "
                  "prompts or a trace, turns, SLO, headers): per-tenant results beside the totals.")
@spec_option("--sessions", type=click.IntRange(min=1), field="sessions",
             help="Multi-turn chat sessions per step instead of single requests: each turn sends the history with "
                  "the model's real answers. -c counts live sessions, -r new sessions a second.")
@spec_option("--turns", field="turns", metavar="K|A-B|exp:K",
             help="Turns per session: fixed, uniform A-B, or exponential with mean K [default: 4; a ShareGPT "
                  "--dataset: each conversation's own human turns].")
@spec_option("--think-time", field="think_time", show_default=True, metavar="T|A-B|exp:T",
             help="The user's think time between an answer and the next turn, e.g. 2s, 1s-3s, exp:2s.")
@spec_option("--trace", type=click.Path(path_type=Path), field="trace",
             help="Replay a request trace (Mooncake JSONL: timestamp ms, input_length, output_length, hash_ids) "
                  "at its own timing, prompts of its exact lengths, shared blocks shared; 'example': a shipped one.")
@spec_option("--agents", field="agents", metavar="FILE|aiperf:FILE|example|synthetic[:k=v,...]",
             help="Agent sessions: an agent trace (JSONL, one session a line: turns, sub-agents, tool latencies; "
                  "docs/reference/agent-trace.md), an AIPerf multi_turn or mooncake_trace file, 'example', or "
                  "synthetic with turns=, fan_out=, fan_every=, "
                  "sub_turns=, tool_latency=, growth=, prefix=, shared=, sessions=, rate=, output=.")
@spec_option("--time-scale", type=FiniteFloat(min=0, min_open=True), field="time_scale", show_default=True,
             help="Stretch the trace's timestamps by this factor (2: half as fast, 0.5: twice as fast).")
@spec_option("--trace-block-tokens", type=click.IntRange(min=1), field="trace_block_tokens", show_default=True,
             help="Tokens per hash_ids block of the trace.")
@spec_option("--tokenizer", field="tokenizer", show_default=True,
             help="auto (the server's /tokenize if it has one), server, none, or anything 'tokometer count "
             "--tokenizer' takes (bundled, a .gguf, tokenizer.json, a model directory or id, tiktoken:ENC).")
@spec_option("--timeout", show_default=True, field="request_timeout_s", **_DURATION,
             help="Limit for a whole request.")
@spec_option("--idle-timeout", show_default=True, field="idle_timeout_s", **_DURATION,
             help="Limit for silence inside a stream.")
@spec_option("--connect-timeout", show_default=True, field="connect_timeout_s", **_DURATION,
             help="Limit for opening a connection (TCP and TLS), e.g. 10s, 500ms.")
@spec_option("--max-event-bytes", field="max_event_bytes", default=None, to_cli=_mebibytes, from_cli=parse_size,
             help="Largest streamed event accepted, e.g. 4MiB (default {default}); a larger one fails the request as "
             "a protocol error.")
@spec_option("--max-response-bytes", field="max_response_bytes", to_cli=_mebibytes_or_sized, from_cli=parse_size,
             help="Read budget of one answer, everything counted (head, chunk framing, "
             "trailers, comments, events), e.g. 64MiB; a larger answer fails the request as a protocol error "
             "[default: 16 MiB + 8 KiB per max_tokens].")
@spec_option("--slo-ttft-ms", type=float, field="slo_ttft_ms", help="TTFT objective for goodput.")
@spec_option("--slo-tpot-ms", type=float, field="slo_tpot_ms", help="TPOT objective for goodput.")
@spec_option("--slo-e2e-ms", type=float, field="slo_e2e_ms", help="End-to-end latency objective for goodput.")
@spec_option("--repeat", type=click.IntRange(1, 100), field="repeat", show_default=True,
             help="Run the whole sweep this many times over; each step is saved as a trial, and 'tokometer "
                  "compare' pools a load's trials and says how much they differ (run-to-run noise).")
@spec_option("--find-max", type=click.Choice(["rate", "concurrency"]), is_flag=False, flag_value="rate",
             field="find_max", help="Search for the highest request rate (or concurrency) that meets --slo: double "
                                 "the load until a probe misses, then bisect (rates to 5%). Each probe is one step "
                                 "of --requests requests (a p99 needs 368 to be bounded); a probe whose queue grew "
                                 "misses whatever --slo says; -r/-c gives the first probe [default: 1].")
@spec_option("--slo", field="slo", metavar="NAME=LIMIT,...",
             help="The objectives of --find-max, e.g. ttft_p99=2s,tpot_p50=50ms,goodput_share=0.9 (percentiles "
                  "of ttft, tpot, itl, e2e; goodput_share: share of requests within every limit; error_rate=1% by "
                  "default).")
@spec_option("--search", type=click.Choice(["bisect", "ramp"]), field="search", show_default=True,
             help="How --find-max searches: steady probes (bisect), or one ramp from --ramp-from to the -r/-c "
                  "value over --ramp-time judged slice by slice, then steady probes to confirm (ramp).")
@spec_option("--workers", "-w", field="workers", also=("ray_actors",), type=click.IntRange(min=1), default=None,
             help="Load-generator processes (use more when the report says the client could not keep up); "
                  "with --ray, Ray actors [default: {default}; with --ray: one actor per node].")
@spec_option("--ray", field="ray", metavar="auto|ADDRESS",
             help="Run each step's load on Ray actors spread over a running cluster's nodes (auto: the cluster "
                  "started on this machine, or RAY_ADDRESS; else the head's HOST:PORT). Needs "
                  "pip install 'tokometer[ray]'.")
@click.option("--json", "json_path", type=click.Path(path_type=Path), default=None, help="Write the result as JSON.")
@click.option("--csv", "csv_path", type=click.Path(path_type=Path), default=None, help="Write one CSV row per step.")
@click.option("--store", default=None, help="Results store: a SQLAlchemy URL or a SQLite file path.")
@click.option("--no-store", is_flag=True, help="Do not save the run.")
@spec_option("--label", field="label", help="A note saved with the run (e.g. 'baseline, Q4_K_M').")
@click.option("--quiet", "-q", is_flag=True, help="No live progress display.")
@click.option("--engine-model", type=click.Path(path_type=Path), default=None,
              help="Embedded engine: a GGUF file instead of the bundled Gemma 3 270M.")
@click.option("--engine-parallel", cls=SpecOption, spec=_engine_settings, field="parallel",
              type=click.IntRange(1, MAX_CONCURRENCY),
              show_default=True, help="Embedded engine: parallel slots.")
@click.option("--engine-threads", type=click.IntRange(1, MAX_THREADS), default=None,
              help="Embedded engine: CPU threads.")
def command(**opts: Any) -> int:
    """Benchmark an inference endpoint: TTFT, TPOT/ITL, decode speed, throughput, errors.

    \b
    Examples:
      tokometer bench                                   # the embedded engine, concurrency 1,2,4
      tokometer bench --url http://127.0.0.1:8000/v1 -c 1,4,16 -n 200 --json out.json
      tokometer bench --url http://127.0.0.1:8000/v1 --rate 10,20 --arrival poisson --duration 60s
      tokometer bench --url http://127.0.0.1:8000/v1 -c 1,8 --repeat 3       # trials, for 'compare'
      tokometer bench --url http://127.0.0.1:8000/v1 --find-max --slo ttft_p99=2s,tpot_p50=50ms
      tokometer bench --url http://127.0.0.1:8000/v1 --sessions 20 -c 4 --turns 2-6 --think-time exp:5s
      tokometer bench --url http://127.0.0.1:8000/v1 --trace example --time-scale 0.5
      tokometer bench --url http://10.0.0.5:8000/v1 -c 256 --ray auto     # load from a Ray cluster's nodes
    """
    embedded = opts["url"] is None
    values = _spec_values(opts, user_fields(click.get_current_context(), _spec))
    check_output_path(opts["json_path"], "--json", "result.json")  # before the run, not after it
    check_output_path(opts["csv_path"], "--csv", "result.csv")
    from tokometer.cli.output import check_outputs

    check_outputs({"--json": opts["json_path"], "--csv": opts["csv_path"]})
    with Terminate() as terminate, ExitStack() as stack:
        engine_identity: dict[str, Any] | None = None
        engine_check: Callable[[], str | None] | None = None
        if embedded:
            from tokometer.benchmark.embedded import engine_check as check_of
            from tokometer.benchmark.embedded import start_embedded
            from tokometer.engines import LlamaCppSettings

            settings = LlamaCppSettings(model_path=opts["engine_model"], parallel=opts["engine_parallel"],
                                        threads=opts["engine_threads"])
            say("Starting the embedded llama.cpp engine...", err=True)
            engine = stack.enter_context(start_embedded(settings, say=lambda m: say(m, err=True)))
            values["url"] = engine.openai_url
            values["model"] = values["model"] or engine.model
            engine_identity = engine.identity
            engine_check = check_of(engine)

        from tokometer.benchmark.spec import BenchSpec, apply_profile

        if embedded:
            values = apply_profile(values, EMBEDDED_PROFILE)
        spec = build_spec(BenchSpec, flags=flag_words(command, _spec), **values)
        return _run(spec, opts, engine_identity, engine_check, terminate)


def _spec_values(opts: dict[str, Any], given: set[str]) -> dict[str, Any]:
    """The spec's values of the options the user gave (``given``: their fields); the spec has the rest. Each
    option says its field and how its text becomes the field's value (`SpecOption`)."""
    _check_url_and_ray(opts)
    values = {option.field: option.field_value(opts[option.name]) for option in spec_options(command, _spec)
              if option.name is not None and option.field in given}
    if "workers" in values:  # --workers: processes, or with --ray the Ray actors (one process drives them)
        count = values["workers"]
        values["workers"], values["ray_actors"] = (count, None) if opts["ray"] is None else (1, count)
    return {**values, **_endpoint(opts)}


def _check_url_and_ray(opts: dict[str, Any]) -> None:
    """Refuse an empty --url or --ray, and a --ray without Ray installed, before anything starts."""
    from tokometer.util.errors import ConfigError

    if opts["url"] is not None and not opts["url"].strip():
        raise ConfigError("--url is empty: give the server's base URL (e.g. http://127.0.0.1:8000/v1), "
                          "or leave --url out to benchmark the embedded engine")

    if opts["ray"] is not None:
        from tokometer.load.cluster import import_ray

        if not opts["ray"].strip():
            raise ConfigError("--ray is empty: give auto, or the Ray head's address HOST:PORT")
        import_ray()  # not installed: say how, before anything starts


def _endpoint(opts: dict[str, Any]) -> dict[str, Any]:
    """The endpoint's fields, passed whether given or not: its URL (the embedded engine's is set once it is up),
    its protocol (by default the one its URL suggests) and the model."""
    from tokometer.protocols.registry import default_api_for_url

    return {
        "url": opts["url"] or "http://127.0.0.1:0/v1",  # the embedded engine's, once it is up
        "api": opts["api"] or (default_api_for_url(opts["url"]) if opts["url"] else "openai-chat"),
        "model": opts["model"],
    }


def _run(spec: BenchSpec, opts: dict[str, Any], engine: dict[str, Any] | None,
         engine_check: Callable[[], str | None] | None, terminate: Terminate) -> int:
    import uvloop

    from tokometer.benchmark.run import BenchResult, run_benchmark
    from tokometer.cli.output import make_console
    from tokometer.report.console import LiveProgress, render_result
    from tokometer.report.csv_out import write_csv
    from tokometer.report.json_out import write_json
    from tokometer.store import ResultStore, configured_store_url

    console = make_console(beside=(opts["json_path"], opts["csv_path"]))  # stderr when one of them is stdout
    store = None if opts["no_store"] else ResultStore(configured_store_url(opts["store"]))
    try:
        progress = LiveProgress(console)
        if opts["quiet"] or not console.is_terminal:
            progress.progress.disable = True
        with progress, asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            result: BenchResult = runner.run(terminate.guard(
                run_benchmark(spec, store=store, observer=progress, engine=engine, engine_check=engine_check)
            ))
    finally:
        if store is not None:
            store.close()
    own = result.warnings
    failure = (own[-1] if own else "the run failed") if result.status == "failed" else None
    # the failure is said once, on stderr below; the JSON keeps it among the run's warnings
    render_result(console, result, own if failure is None else own[:-1])
    if result.steps and (actors := result.steps[-1].health.actors):
        console.print(_ray_line(actors))
    if opts["json_path"]:
        write_json(result, opts["json_path"])
        console.print(f"JSON written to {opts['json_path']}")
    if opts["csv_path"]:
        write_csv(result, opts["csv_path"])
        console.print(f"CSV written to {opts['csv_path']}")
    if result.status == "interrupted":
        return EXIT_CODE if terminate.received else 130
    if failure is not None:  # a Ray actor or the engine died part-way: not bad input (2), a failed run (1)
        from tokometer.util.errors import RunFailed

        raise RunFailed(failure)
    return 1 if result.failed_requests else 0


def _ray_line(actors: list[dict[str, Any]]) -> str:
    """Where a ``--ray`` run's load came from, and how well its actors' clocks were aligned."""
    nodes = len({a["node"] for a in actors})
    accuracy = max(a["clock_accuracy_ms"] for a in actors)
    if all(a["shared_clock"] for a in actors):
        clocks = (f"they share this host's clock, so no offset is applied (measured: up to "
                  f"{max(abs(a['measured_offset_ms']) for a in actors):.3f} ms, ±{accuracy:.3f} ms)")
    else:
        clocks = f"their clocks were put on this host's to within ±{accuracy:.3f} ms"
    return f"Ray: {len(actors)} actor(s) on {nodes} node(s); {clocks}"

