"""``tokometer quality A B``: the same prompts to two endpoints; agreement, accuracy and speed side by side.

A and B are server URLs or ``engine:PATH.gguf`` / ``engine:bundled``, optionally ``:QTYPE`` to
requantise first (`tokometer.quality.endpoints`). Exit status 0 whatever the verdict; 1 only when a
gate asked for (``--min-agreement``, ``--max-accuracy-drop``) fails; 2 for bad input, one line.
"""

from __future__ import annotations

from pathlib import Path

import click

from tokometer.cli.options import FiniteFloat, api_key_option
from tokometer.cli.say import say
from tokometer.protocols.registry import PROTOCOLS
from tokometer.util.jsontext import dumps
from tokometer.util.limits import MAX_CONCURRENCY, MAX_COUNT

__all__ = ["command"]


@click.command("quality")
@click.argument("endpoint_a", metavar="A")
@click.argument("endpoint_b", metavar="B")
@click.option("--model-a", default=None, help="Model name to ask A for [default: the first one A lists].")
@click.option("--model-b", default=None, help="Model name to ask B for [default: the first one B lists].")
@click.option("--api", type=click.Choice(sorted(name for name, p in PROTOCOLS.items() if p.logprobs)),
              default="openai-completions",
              show_default=True, help="Protocol; completions sends the few-shot prompts as they are (and allows "
                                      "teacher forcing).")
@click.option("--api-key", callback=api_key_option, default=None, envvar="TOKOMETER_API_KEY",
              help="Bearer key for both endpoints.")
@click.option("--limit", type=click.IntRange(1, MAX_COUNT), default=None, help="Use the first N eval items [default: "
                                                                        "all 300].")
@click.option("--max-tokens", type=click.IntRange(1, 4096), default=16, show_default=True,
              help="Tokens per greedy answer (the path agreement and KL are measured on).")
@click.option("--top-logprobs", type=click.IntRange(1, 20), default=10, show_default=True,
              help="Top-k log-probabilities asked per token, for KL and top-1 agreement.")
@click.option("--concurrency", type=click.IntRange(1, MAX_CONCURRENCY), default=1, show_default=True,
              help="Requests at a time in the speed pass (the token-path pass is always one at a time).")
@click.option("--no-teacher-forcing", is_flag=True, help="Compare distributions only up to the first divergence.")
@click.option("--evalset", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="A JSONL eval set of {id, task, prompt, answer} [default: the shipped one].")
@click.option("--parallel", type=click.IntRange(1, MAX_CONCURRENCY), default=2, show_default=True,
              help="Slots of each embedded engine (engine:...).")
@click.option("--min-agreement", type=FiniteFloat(0, 1), default=None,
              help="Exit 1 when the exact-match rate of greedy answers is below this (e.g. 0.9).")
@click.option("--max-accuracy-drop", type=FiniteFloat(0, 100), default=None, metavar="POINTS",
              help="Exit 1 when accuracy A − B is more than this many points.")
@click.option("--format", "fmt", type=click.Choice(["table", "md"]), default="table", show_default=True,
              help="md: markdown for a pull-request comment.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def command(endpoint_a: str, endpoint_b: str, model_a: str | None, model_b: str | None, api: str,
            api_key: str | None, limit: int | None, max_tokens: int, top_logprobs: int, concurrency: int,
            no_teacher_forcing: bool, evalset: Path | None, parallel: int, min_agreement: float | None,
            max_accuracy_drop: float | None, fmt: str, as_json: bool) -> int:
    """Send the same eval prompts to A and B (URLs, or engine:PATH.gguf[:QTYPE], engine:bundled[:QTYPE]) and
    report agreement, accuracy and speed side by side, with a verdict."""
    import asyncio

    from tokometer.quality import QualitySpec, load_evalset, run_quality, summarise
    from tokometer.quality.endpoints import open_endpoints, parse_endpoint
    from tokometer.quality.render import render_markdown, render_text
    from tokometer.quality.verdict import gate_failures

    specs = parse_endpoint(endpoint_a), parse_endpoint(endpoint_b)
    items = load_evalset(evalset, limit)
    spec = QualitySpec(api=api, max_tokens=max_tokens, top_logprobs=top_logprobs, concurrency=concurrency,
                       teacher_forcing=not no_teacher_forcing)

    def progress(line: str) -> None:
        say(line, err=True)

    with open_endpoints(specs, (model_a, model_b), api_key=api_key, parallel=parallel, announce=progress) as (a, b):
        result = asyncio.run(run_quality(a, b, items, spec, say=progress))
    summary = summarise(result)
    if as_json:
        click.echo(dumps(summary.to_json(), indent=2))
    elif fmt == "md":
        say(render_markdown(summary), nl=False)
    else:
        say(render_text(summary), nl=False)
    failed = gate_failures(summary, min_agreement, max_accuracy_drop)
    for line in failed:
        say(f"tokometer quality: gate failed: {line}", err=True)
    return 1 if failed else 0
