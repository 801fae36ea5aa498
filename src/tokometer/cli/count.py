"""``tokometer count``: tokens of a text, file, stdin, chat or JSONL file with the model's own tokenizer."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tokometer.cli.options import build_spec
from tokometer.util.jsontext import dumps, dumps_readable
from tokometer.util.limits import MAX_TOKENS

if TYPE_CHECKING:
    from rich.console import Console

    from tokometer.tokens.counter import CountResult, CountSpec

__all__ = ["command"]


@click.command("count")
@click.argument("text", required=False)
@click.option("--file", "-f", "file", type=click.Path(path_type=Path), default=None,
              help="Count a text file ('-' for stdin); a .jsonl file counts every record.")
@click.option("--jsonl", is_flag=True, help="The input is JSONL: strings, {\"text\"|\"prompt\"} or {\"messages\"}.")
@click.option("--model", "-m", default=None,
              help="The model: picks its tokenizer, context window and price (gpt-4o, Qwen/Qwen2.5-7B-Instruct, "
                   "PATH.gguf, ollama:NAME...).")
@click.option("--tokenizer", "-t", default=None,
              help="The tokenizer, if not --model's: bundled (default), PATH.gguf, tokenizer.json, a model "
                   "directory or id, tiktoken:ENCODING, PATH.tiktoken, ollama:NAME, or a server URL.")
@click.option("--chat", is_flag=True,
              help="Apply the chat template: the input is JSON messages, or a text sent as one user message.")
@click.option("--show", is_flag=True, help="Show every token: id, vocabulary piece and text.")
@click.option("--context", type=click.IntRange(1, MAX_TOKENS), default=None,
              help="Context window in tokens (default: the model's).")
@click.option("--output-tokens", type=click.IntRange(0, MAX_TOKENS), default=None,
              help="Expected answer length: checked against the context window and priced.")
@click.option("--price", is_flag=True, help="Show the cost with --model's row of the price table.")
@click.option("--prices", type=click.Path(path_type=Path), default=None,
              help="Price table (TOML) read over the shipped one [default: $TOKOMETER_PRICES or the user's].")
@click.option("--list-prices", is_flag=True, help="Print the price table with its source and date, and exit.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (the count is under 'tokens').")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def command(**opts: Any) -> int:
    """Count tokens with the model's own tokenizer (default: the bundled Gemma 3 270M, offline).

    \b
    Examples:
      tokometer count "大模型推理速度是落地的关键指标，token 是计算的基本单位。"
      tokometer count --show "unbelievable"
      tokometer count --chat '[{"role": "user", "content": "Hi"}]'
      tokometer count --model gpt-4o --price --output-tokens 500 -f prompt.txt
      tokometer count -t ./Qwen2.5-7B-Instruct --chat -f chats.jsonl
    """
    from tokometer.cli.output import make_console

    if opts["list_prices"]:
        return _list_prices(opts["prices"], opts["as_json"])
    from tokometer.tokens.counter import CountSpec, run_count
    from tokometer.tokens.report import render_count, to_json

    text = opts["text"]
    if text == "-":
        text, opts["file"] = None, Path("-")
    if text is None and opts["file"] is None and sys.stdin.isatty():
        raise click.UsageError("give the TEXT to count, --file PATH, or pipe text in")
    spec = build_spec(CountSpec, text=text, file=opts["file"], jsonl=opts["jsonl"], chat=opts["chat"],
                      model=opts["model"], tokenizer=opts["tokenizer"], show=opts["show"],
                      context=opts["context"], output_tokens=opts["output_tokens"], price=opts["price"],
                      prices=opts["prices"])
    err = make_console(stderr=True)
    if spec.is_jsonl and not opts["quiet"] and err.is_terminal:
        result = _with_progress(spec, err, run_count)
    else:
        result = run_count(spec)
    if opts["as_json"]:

        click.echo(dumps_readable(to_json(result), indent=1))
    else:
        render_count(make_console(), result)
    return 0


def _with_progress(spec: CountSpec, err: Console, run: Callable[..., CountResult]) -> CountResult:
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    total = spec.file.stat().st_size if spec.file is not None and str(spec.file) != "-" else None
    columns = (TextColumn("counting"), BarColumn(), DownloadColumn(), TextColumn("{task.fields[records]} records"),
               TimeRemainingColumn())
    with Progress(*columns, console=err, transient=True) as progress:
        task = progress.add_task("count", total=total, records=0)

        def update(records: int, done: int) -> None:
            progress.update(task, completed=done, records=f"{records:,}")

        return run(spec, progress=update)


def _list_prices(path: Path | None, as_json: bool) -> int:
    from tokometer.cli.output import make_console
    from tokometer.tokens.pricing import PriceTable
    from tokometer.tokens.report import prices_json, render_prices

    table = PriceTable.load(path)
    if as_json:

        click.echo(dumps(prices_json(table), indent=1))
    else:
        render_prices(make_console(), table)
    return 0
