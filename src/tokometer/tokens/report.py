"""Showing a `CountResult`: as JSON (schema ``tokometer.count/1``) or as a rich console block; and the price
table (``count --list-prices``) as JSON or a table.

Ratios are per token: characters per token (Chinese text is ~1–1.5 with a large vocabulary, far
from "one character, one token"), and whitespace-separated words per token (meaningless for
Chinese, which has no spaces; shown for English-like text).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from tokometer.tokens.counter import CountResult

if TYPE_CHECKING:
    from rich.console import Console

    from tokometer.tokens.pricing import PriceTable

__all__ = ["prices_json", "render_count", "render_prices", "to_json"]

SCHEMA = "tokometer.count/1"


def _ratio(a: int, b: int) -> float | None:
    return round(a / b, 3) if b else None


def _context_json(result: CountResult) -> dict[str, Any] | None:
    if result.context is None:
        return None
    out: dict[str, Any] = {"window": result.context, "source": result.context_source}
    prompt = result.prompt_tokens
    out["left_for_output"] = max(0, result.context - prompt)
    if result.output_tokens is not None:
        out["fits"] = prompt + result.output_tokens <= result.context
    if result.batch is not None:
        out["records_over_window"] = sum(1 for n in result.batch.tokens if n + (result.output_tokens or 0)
                                         > result.context)
    return out


def _cost_json(result: CountResult) -> dict[str, Any] | None:
    cost = result.cost
    if cost is None:
        return None
    price = cost.price
    return {
        "model": price.model, "currency": cost.currency,
        "input_per_million": price.input, "output_per_million": price.output,
        "input_tokens": cost.input_tokens, "output_tokens": cost.output_tokens,
        "input_cost": cost.input_cost, "output_cost": cost.output_cost, "total_cost": cost.total,
        "credits": cost.credits, "platform": price.platform, "table": price.source,
    }


def to_json(result: CountResult) -> dict[str, Any]:
    """The machine-readable form: the count is under ``tokens``."""
    tok = result.tokenizer
    out: dict[str, Any] = {"schema": SCHEMA, "tokenizer": {"name": tok.name, "kind": tok.kind},
                           "source": result.source}
    if result.single is not None:
        single = result.single
        content = single.chat.content if single.chat is not None else single.tokens
        out.update(tokens=single.tokens, characters=single.characters, words=single.words,
                   chars_per_token=_ratio(single.characters, content),
                   words_per_token=_ratio(single.words, content))
        if single.chat is not None:
            chat = single.chat
            out["chat"] = {"messages": chat.messages, "content_tokens": chat.content,
                           "template_tokens": chat.template, "template": chat.template_source}
        if result.ids:
            out["ids"] = result.ids
            out["pieces"] = result.pieces
    elif result.batch is not None:
        batch = result.batch
        ordered = sorted(batch.tokens)
        out.update(tokens=batch.total, records=batch.records, characters=batch.characters,
                   chars_per_token=_ratio(batch.characters, batch.content_tokens),
                   per_record={"min": ordered[0], "p50": ordered[len(ordered) // 2],
                               "p95": ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))],
                               "max": ordered[-1], "mean": round(batch.total / batch.records, 2)},
                   seconds=round(batch.seconds, 3))
        if batch.chat:
            out["chat"] = {"content_tokens": batch.content_tokens, "template_tokens": batch.template_tokens}
    out["context"] = _context_json(result)
    out["cost"] = _cost_json(result)
    out["notes"] = result.notes
    return out


def _money(value: float, currency: str) -> str:
    """``$1,234.50``, ``$0.0025``, ``$0.0000005``: cents above one unit, three significant digits below."""
    symbol = "$" if currency == "USD" else f"{currency} "
    if value >= 1:
        return f"{symbol}{value:,.2f}"
    if value <= 0:
        return f"{symbol}0"
    digits = max(2, 2 - math.floor(math.log10(value)))
    return f"{symbol}{value:.{digits}f}".rstrip("0").rstrip(".")


def _rows(result: CountResult) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = [("tokenizer", result.tokenizer.name)]
    single, batch = result.single, result.batch
    if single is not None:
        rows.append(("tokens", f"{single.tokens:,}"))
        content = single.chat.content if single.chat is not None else single.tokens
        of = " of content" if single.chat is not None else ""
        chars = f"{single.characters:,}"
        if content:
            chars += f" ({single.characters / content:.2f} per token{of})"
        rows.append(("characters", chars))
        if single.words and content and not single.spaceless:
            rows.append(("words", f"{single.words:,} ({single.words / content:.2f} per token{of})"))
        if single.chat is not None:
            chat = single.chat
            rows.append(("chat", f"{chat.messages} message{'s' if chat.messages != 1 else ''}: "
                                 f"{chat.content:,} content + {chat.template:,} template = {chat.total:,} tokens"))
            rows.append(("template", chat.template_source))
    elif batch is not None:
        ordered = sorted(batch.tokens)
        rows.append(("records", f"{batch.records:,}  ({batch.bytes / 1e6:,.1f} MB in {batch.seconds:.2f} s)"))
        rows.append(("tokens", f"{batch.total:,}"))
        rows.append(("per record", f"mean {batch.total / batch.records:,.1f}, p50 {ordered[len(ordered) // 2]:,}, "
                                   f"max {ordered[-1]:,}"))
        if batch.content_tokens:
            rows.append(("characters", f"{batch.characters:,} ({batch.characters / batch.content_tokens:.2f} "
                                       "per token)"))
        if batch.chat:
            rows.append(("chat", f"{batch.content_tokens:,} content + {batch.template_tokens:,} template tokens"))
    context = _context_json(result)
    if context is not None:
        line = f"{context['window']:,} tokens ({context['source']})"
        if batch is None:
            line += f": {context['left_for_output']:,} left for output"
        else:
            extra = f" with {result.output_tokens:,} output tokens each" if result.output_tokens else ""
            line += f": {context['records_over_window']:,} record(s) over it{extra}"
        rows.append(("context", line))
        if batch is None and result.output_tokens is not None:
            total = result.prompt_tokens + result.output_tokens
            verdict = "fits" if context["fits"] else "does NOT fit"
            sign = "<=" if context["fits"] else ">"
            rows.append(("output", f"{result.output_tokens:,} tokens: {verdict} ({result.prompt_tokens:,} + "
                                   f"{result.output_tokens:,} = {total:,} {sign} {context['window']:,})"))
    if result.cost is not None:
        rows.extend(_cost_rows(result))
    return rows


def _cost_rows(result: CountResult) -> list[tuple[str, str]]:
    cost = result.cost
    assert cost is not None
    price, cur = cost.price, cost.currency
    rows = []
    if price.input is not None:
        rate = f"{_money(price.input, cur)} / 1M in"
        if price.output is not None:
            rate += f", {_money(price.output, cur)} / 1M out"
        rows.append(("price", f"{price.model}: {rate} ({price.source})"))
    if cost.input_cost is not None:
        line = f"{_money(cost.input_cost, cur)} for {cost.input_tokens:,} input tokens"
        if cost.output_cost is not None:
            line += (f" + {_money(cost.output_cost, cur)} for {cost.output_tokens:,} output"
                     f" = {_money(cost.total or 0, cur)}")
        rows.append(("cost", line))
    if cost.credits is not None:
        rows.append(("credits", f"{cost.credits:,.2f} on {price.platform}"))
    return rows


def _visible(text: str) -> str:
    """``text`` with control characters escaped (a newline piece shows as ``\\n``)."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def render_count(console: Console, result: CountResult) -> None:
    """Print the result as docs/commands/count.md shows it."""
    from rich.table import Table

    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    for label, value in _rows(result):
        grid.add_row(label, value)
    console.print(grid)
    if result.ids:
        table = Table(title="tokens" + (" of the rendered chat" if result.rendered is not None else ""),
                      title_justify="left", show_edge=False, pad_edge=False)
        table.add_column("#", justify="right")
        table.add_column("id", justify="right")
        table.add_column("piece")
        table.add_column("text")
        tok = result.tokenizer
        for index, (token_id, piece) in enumerate(zip(result.ids, result.pieces, strict=True)):
            table.add_row(str(index), str(token_id), _visible(piece), repr(tok.decode([token_id])))
        console.print(table)
    for note in result.notes:
        console.print(f"note: {note}")


def prices_json(table: PriceTable) -> dict[str, Any]:
    """The price table with its source, the files read and the user's own file, as JSON."""
    from tokometer.tokens.pricing import user_price_file

    rows = [table.require(name) for name in table.names()]
    return {"meta": table.meta, "files": table.files, "user_file": str(user_price_file()),
            "models": {r.model: {"input": r.input, "output": r.output, "context": r.context,
                                 "tokenizer": r.tokenizer, "platform": r.platform,
                                 "input_credits": r.input_credits, "output_credits": r.output_credits} for r in rows}}


def render_prices(console: Console, table: PriceTable) -> None:
    """The price table as a console table, with its source, date and the files read."""
    from rich.table import Table

    from tokometer.tokens.pricing import user_price_file

    out = Table(show_edge=False, pad_edge=False)
    for column in ("model", "input /1M", "output /1M", "context", "tokenizer"):
        out.add_column(column, justify="right" if "/1M" in column or column == "context" else "left")
    for r in (table.require(name) for name in table.names()):
        credits = f"{r.input_credits:g} cr" if r.input_credits is not None else ""
        out.add_row(r.model, f"{r.input:g}" if r.input is not None else credits,
                    f"{r.output:g}" if r.output is not None else "",
                    f"{r.context:,}" if r.context else "", r.tokenizer or "")
    console.print(out)
    meta = table.meta
    console.print(f"{meta.get('currency', 'USD')} per million tokens; source: {meta.get('source', '?')}; "
                  f"as of {meta.get('date', '?')}. {str(meta.get('note', '')).capitalize()}.")
    console.print(f"Tables read: {', '.join(table.files)}. Your own (read over these): {user_price_file()}")
