"""``tokometer tune``: a baseline engine setting, then one change at a time, each measured with the same workload.

The variants are planned from ``--set``/``--vary``/``--grid`` or ``--variants FILE`` (`tokometer.tune.variants`),
checked before anything starts; the workload is ``bench``'s (its own options, shared with ``bench``); the sweep
(`tokometer.tune.sweep`) starts each variant's engine, times it, runs the workload, saves the run and stops the
engine, saving the tune after every variant so that ``--resume NAME`` carries a cut tune on.
"""

from __future__ import annotations

import re
import secrets
import shlex
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tokometer.cli import bench
from tokometer.cli.options import FiniteFloat, build_spec, check_output_path
from tokometer.cli.say import say
from tokometer.cli.specoption import SpecOption, flag_words, spec_options, user_fields
from tokometer.tune.quality import DEFAULT_ITEMS
from tokometer.util.errors import ConfigError
from tokometer.util.limits import MAX_SECONDS, MIN_SECONDS
from tokometer.util.shown import quoted

if TYPE_CHECKING:
    from tokometer.store import ResultStore
    from tokometer.tune.launch import LaunchOptions
    from tokometer.tune.outcome import TuneRecord
    from tokometer.tune.sweep import Quality, SweepEnd

__all__ = ["command"]

_WORKLOAD = ("concurrency", "rate", "synchronous", "arrival", "burstiness", "max_concurrency", "requests_",
             "duration", "warmup", "input_tokens", "prefix_tokens", "prefix_groups", "output_tokens", "ignore_eos",
             "temperature", "seed", "dataset", "dataset_kind", "prompt", "timeout", "idle_timeout", "slo_ttft_ms",
             "slo_tpot_ms", "slo_e2e_ms", "repeat", "find_max", "slo", "search", "ramp", "ramp_from", "ramp_time",
             "tokenizer")
"""``bench``'s options that make a tune's workload (the same objects: one default, one check, one help)."""
_OWN_FIELDS = ("url", "model", "seed", "label", "api")
"""`BenchSpec` fields the sweep sets per variant, never part of the saved workload."""
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def _workload_options() -> list[SpecOption]:
    found = {p.name: p for p in bench.command.params if isinstance(p, SpecOption)}
    return [found[name] for name in _WORKLOAD]


def _bench_spec() -> Any:
    return _workload_options()[0].spec


@click.command("tune")
@click.option("--engine", type=click.Choice(["llamacpp", "vllm"]), default="llamacpp", show_default=True,
              help="The engine to tune: the embedded llama.cpp (the bundled model by default) or vLLM.")
@click.option("--model", default=None, help="The model every variant serves unless it sets its own (a setting "
              "'model'): llamacpp a .gguf file (default: the bundled Gemma 3 270M), vllm a checkpoint.")
@click.option("--llama-server", default=None, help="llamacpp: the llama-server binary (default: lookup).")
@click.option("--vllm", "vllm", default=None, metavar="PATH", help="vllm: the vllm command, its venv or its python.")
@click.option("--device", type=click.Choice(["cpu", "gpu"]), default="cpu", show_default=True,
              help="vllm: its CPU build or CUDA.")
@click.option("--ready-timeout", type=FiniteFloat(MIN_SECONDS, MAX_SECONDS), default=None,
              help="Seconds each variant's engine may take to answer (default: 120 llamacpp, 1800 vllm).")
@click.option("--set", "set_", multiple=True, metavar="NAME=VALUE",
              help="A baseline setting, the engine's flag without dashes (repeatable): --set ctx-size=8192.")
@click.option("--vary", multiple=True, metavar="NAME=V1,V2,...",
              help="A setting to try at each value, one at a time against the baseline (repeatable).")
@click.option("--grid", is_flag=True, help="Try every combination of the --vary values instead.")
@click.option("--variants", "variants_file", type=click.Path(path_type=Path), default=None,
              help="A TOML file of [[variant]] tables, each a name and its settings.")
@click.option("--name", default=None, help="The tune's name in the store [default: ENGINE-DATE-TIME].")
@click.option("--resume", default=None, metavar="NAME", help="Carry on the saved tune NAME (its finished variants are "
              "kept; the same plan, seed and order).")
@click.option("--quality-items", type=click.IntRange(0, 1000), default=DEFAULT_ITEMS, show_default=True,
              help="Evaluation prompts for the quality check of a variant that changes the weights (0: none).")
@click.option("--store", default=None, help="Results store: a SQLAlchemy URL or a SQLite file path.")
@click.option("--json", "json_path", type=click.Path(path_type=Path), default=None,
              help="Write the tune as JSON (tokometer.tune/1).")
@click.option("--quiet", "-q", is_flag=True, help="No live progress display.")
@click.option("--dry-run", is_flag=True, help="Print the variants and each engine command line; start nothing.")
def command(**opts: Any) -> int:
    """Tune an engine: a baseline, then one setting changed at a time, each started, measured and saved.

    \b
    Examples:
      tokometer tune --vary parallel=1,2,4                       # the embedded llama.cpp
      tokometer tune --vary quantization=Q8_0,Q2_K -c 1,2 -n 16
      tokometer tune --set ctx-size=8192 --vary parallel=1,2 --vary flash-attn=on,off --grid
      tokometer tune --engine vllm --vary max-num-seqs=4,16 --vary enable-chunked-prefill=on,off
      tokometer tune --variants variants.toml --find-max --slo ttft_p99=2s
      tokometer tune --resume llamacpp-20261203-101500           # carry on a cut tune
    """
    from tokometer.cli.output import check_outputs

    check_output_path(opts["json_path"], "--json", "tune.json")
    check_outputs({"--json": opts["json_path"]})
    planned = _planned(opts)
    if opts["dry_run"]:
        _dry_run(planned, _launch_options(opts))
        return 0
    from tokometer.store import ResultStore, configured_store_url

    store = ResultStore(configured_store_url(opts["store"]))
    try:
        record = _to_run(store, planned, opts)
        return _sweep(record, store, opts)
    finally:
        store.close()


def _planned(opts: dict[str, Any]) -> TuneRecord:
    """The tune the options describe (its variants checked for the engine), not saved yet."""
    from tokometer.store.store import now_iso
    from tokometer.tune.outcome import TuneRecord
    from tokometer.tune.variants import (
        check_variants,
        fingerprint,
        parse_set,
        parse_vary,
        plan_variants,
        read_variants_file,
    )

    engine = opts["engine"]
    if opts["resume"] is not None and opts["name"] is not None:
        raise ConfigError("--resume NAME carries on the tune of that name: leave --name out")
    baseline = parse_set(opts["set_"])
    if opts["model"] is not None:
        baseline.setdefault("model", opts["model"])
    named = read_variants_file(opts["variants_file"]) if opts["variants_file"] is not None else ()
    if opts["resume"] is not None and not (opts["vary"] or named):
        return _placeholder(opts["resume"])  # resumed as saved
    variants = plan_variants(baseline, vary=parse_vary(opts["vary"]), grid=opts["grid"], named=named)
    check_variants(engine, variants)
    workload, seed = _workload(engine)
    name = _tune_name(opts["resume"] or opts["name"] or f"{engine}-{datetime.now(UTC):%Y%m%d-%H%M%S}")
    return TuneRecord(name=name, engine=engine, fingerprint=fingerprint(engine, variants, workload),
                      seed=seed if seed is not None else secrets.randbelow(2**31), workload=workload,
                      variants=variants, started_at=now_iso())


def _placeholder(name: str) -> TuneRecord:
    from tokometer.tune.outcome import TuneRecord

    return TuneRecord(name=_tune_name(name), engine="", fingerprint="", seed=0, workload={}, variants=())


def _tune_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise ConfigError(f"tune name {quoted(name)}: use letters, digits, '.', '_' and '-' (at most 100), "
                          "e.g. parallel-q8")
    return name


def _workload(engine: str) -> tuple[dict[str, Any], int | None]:
    """The bench options given (the embedded engine's lighter defaults for llama.cpp), checked as ``bench`` checks
    them, as the JSON of their `BenchSpec` fields; and ``--seed``."""
    from tokometer.benchmark.embedded import EMBEDDED_PROFILE
    from tokometer.benchmark.spec import BenchSpec, apply_profile

    ctx = click.get_current_context()
    given = user_fields(ctx, _bench_spec())
    values = {o.field: o.field_value(ctx.params[o.name]) for o in spec_options(ctx.command, _bench_spec())
              if o.name is not None and o.field in given}
    values = apply_profile(values, {"llamacpp": EMBEDDED_PROFILE, "vllm": {}}[engine])  # the engine's defaults
    spec = build_spec(BenchSpec, flags=flag_words(ctx.command, _bench_spec()),
                      **{**values, "url": "http://127.0.0.1:0/v1", "api": "openai-chat"})
    dumped = spec.model_dump(mode="json")
    workload = {k: dumped[k] for k in values if k not in _OWN_FIELDS}
    return workload, spec.seed


def _to_run(store: ResultStore, planned: TuneRecord, opts: dict[str, Any]) -> TuneRecord:
    """The new tune (refused when one of its name is saved), or the saved one ``--resume`` names (refused when
    the options plan another tune)."""
    from tokometer.tune.saved import load_tune

    saved = load_tune(store, planned.name)
    if opts["resume"] is None:
        if saved is not None:
            raise ConfigError(f"a tune named {planned.name!r} is saved already: --resume {planned.name} carries it "
                              "on, or give another --name")
        return planned
    if saved is None:
        known = ", ".join(store.tune_names()[:5]) or "none yet"
        raise ConfigError(f"no tune named {planned.name!r} in {store.display_url} to resume (tunes: {known})")
    if planned.variants and planned.fingerprint != saved.fingerprint:
        raise ConfigError(f"tune {saved.name!r} was planned with other variants or another workload: resume it with "
                          f"--resume {saved.name} alone, or start a new tune with another --name")
    return saved


def _launch_options(opts: dict[str, Any], engine: str | None = None) -> LaunchOptions:
    from tokometer.tune.launch import LaunchOptions

    chosen = engine or opts["engine"]
    return LaunchOptions(engine=chosen, ready_timeout_s=opts["ready_timeout"], llama_server=opts["llama_server"],
                         vllm=opts["vllm"], device=opts["device"] if chosen == "vllm" else "cpu")


def _sweep(record: TuneRecord, store: ResultStore, opts: dict[str, Any]) -> int:
    """Run the sweep with a live display, then show the outcomes, write ``--json`` and say how it ended."""
    import functools

    from tokometer.cli.output import make_console
    from tokometer.cli.terminate import EXIT_CODE, Terminate
    from tokometer.tune.launch import start_variant
    from tokometer.tune.progress import TuneProgress
    from tokometer.tune.sweep import bench_workload, run_tune, still_to_run

    console = make_console(beside=(opts["json_path"],))
    todo = still_to_run(record)
    console.print(f"tune {record.name}: {len(record.variants)} variants and the baseline again at the end, "
                  f"{len(todo)} runs to go (seed {record.seed})", highlight=False)
    progress = TuneProgress(console, live=not opts["quiet"] and console.is_terminal, store=store)
    with Terminate() as terminate, progress:
        end = run_tune(record, launch=functools.partial(start_variant, options=_launch_options(opts, record.engine)),
                       run_workload=bench_workload(record, store=store, observer=progress, guard=terminate.guard),
                       store=store, observer=progress, quality=_quality(opts["quality_items"]))
    _show(end, store, console, opts)
    if end.store_error is not None:
        from tokometer.util.errors import StoreError

        raise StoreError(end.store_error)
    if end.interrupted:
        console.print(f"interrupted: what finished is saved; 'tokometer tune --resume {record.name}' carries it on",
                      highlight=False)
        return EXIT_CODE if terminate.received else 130
    return 0


def _quality(items: int) -> Quality | None:
    """`tokometer.tune.quality.quality_against_baseline` on ``items`` evaluation prompts; None for none."""
    if items == 0:
        return None
    import functools

    from tokometer.tune.quality import quality_against_baseline

    return functools.partial(quality_against_baseline, items=items)


def _show(end: SweepEnd, store: ResultStore, console: Any, opts: dict[str, Any]) -> None:
    """Each variant judged against the baseline (`tokometer.tune.answer`), on the console and in ``--json``."""
    from tokometer.tune.answer import judge
    from tokometer.tune.render import answer_json, render_answer
    from tokometer.util.atomicfile import write_atomic
    from tokometer.util.jsontext import dumps

    answer = judge(end.record, store)
    render_answer(console, end.record, answer)
    if opts["json_path"] is not None:
        write_atomic(opts["json_path"], dumps(answer_json(end.record, answer), indent=2) + "\n")
        console.print(f"JSON written to {opts['json_path']}", highlight=False)


def _dry_run(planned: TuneRecord, options: LaunchOptions) -> None:
    """Each variant and the command line its engine would start with (the port is chosen at start)."""
    if not planned.variants:
        raise ConfigError("--dry-run with --resume needs the plan: give the same --vary/--variants options")
    say(f"tune {planned.name}: {len(planned.variants)} variants, engine {planned.engine}, "
        f"fingerprint {planned.fingerprint}")
    for variant in planned.variants:
        settings = " ".join(f"{k}={v}" for k, v in variant.settings.items()) or "(the engine's defaults)"
        say(f"{variant.index}. {variant.name}: {settings}")
        say(f"   {shlex.join(_command_line(variant, options))}")


def _command_line(variant: Any, options: LaunchOptions) -> list[str]:
    """The engine's command line for ``variant``, as far as it is known without starting anything: the port is
    chosen at start (0 here) and a requantised model is made then (its name is shown in angle brackets)."""
    from tokometer.tune.settings import engine_settings

    mapped = engine_settings(options.engine, variant.settings, options.device)
    keywords = dict(mapped.keywords)
    if options.engine == "vllm":
        return _vllm_command_line(keywords, mapped.argv, options)
    from tokometer.engines.binary import find_llama_server
    from tokometer.engines.llamacpp import LlamaCppSettings, checked_model, llamacpp_argv

    quantization = keywords.pop("quantization", None)
    binary = find_llama_server(options.llama_server)
    settings = LlamaCppSettings(host=options.host, port=0, binary=binary, extra_args=mapped.argv, **keywords)
    model, meta = checked_model(settings)
    if quantization is not None:
        model = model.with_name(f"<{model.stem} requantised to {quantization}>.gguf")
    return llamacpp_argv(binary, model, 0, settings, meta)


def _vllm_command_line(keywords: dict[str, Any], argv: tuple[str, ...], options: LaunchOptions) -> list[str]:
    from tokometer.engines.vllm import plan_vllm, plan_vllm_cpu

    model, served = keywords.pop("model", None), None
    if model is None:
        from tokometer.engines.vllm_model import BUNDLED_VLLM_NAME, find_bundled_checkpoint

        found = find_bundled_checkpoint()
        if found is None:
            raise ConfigError("the bundled model is not converted for vLLM yet: run `tokometer serve --engine vllm "
                              "--prepare` first (or --model, a local checkpoint directory)")
        model, served = found, BUNDLED_VLLM_NAME
    if options.device == "gpu":
        from tokometer.engines.gpus import gpu_for_planning

        plan = plan_vllm(str(model), gpu_for_planning(options.gpu_memory_gb), host=options.host, port=0,
                         extra_args=argv, **keywords)
    else:
        plan = plan_vllm_cpu(str(model), served_name=served, host=options.host, port=0, extra_args=argv, **keywords)
    return list(plan.argv)


command.params.extend(_workload_options())
