"""``tokometer count`` as a library call: `CountSpec` in, `CountResult` out.

The model (``--model``) names the price row, the context window and, unless ``--tokenizer``
overrides it, the tokenizer: a price-table row may say which tokenizer a hosted model uses,
an OpenAI name picks its tiktoken encoding, anything else is loaded as it is named.
The context window is, in order: ``--context``, the price row's, the tokenizer source's.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tokometer.tokens.base import BaseTokenizer
from tokometer.tokens.chat import Messages, looks_like_json, parse_messages
from tokometer.tokens.counting import BatchCount, TextCount, count_jsonl, count_text, read_text
from tokometer.tokens.pricing import Cost, ModelPrice, PriceTable
from tokometer.util.errors import ConfigError, TokometerError

__all__ = ["CountResult", "CountSpec", "run_count"]


class CountSpec(BaseModel):
    """What to count and how: the input (one of text, file, stdin), the model, what to show."""

    model_config = ConfigDict(extra="forbid")

    text: str | None = None
    file: Path | None = None  # "-" reads stdin
    jsonl: bool = False  # the input is JSONL (also implied by a .jsonl file)
    chat: bool = False
    model: str | None = None
    tokenizer: str | None = None
    show: bool = False
    context: int | None = Field(None, ge=1)
    output_tokens: int | None = Field(None, ge=0)
    price: bool = False
    prices: Path | None = None

    @model_validator(mode="after")
    def _one_input(self) -> CountSpec:
        if self.text is not None and self.file is not None:
            raise ValueError("give the text or --file, not both")
        if self.price and not self.model:
            raise ValueError("--price needs --model NAME: the price table is by model")
        return self

    @property
    def is_jsonl(self) -> bool:
        return self.jsonl or (self.file is not None and self.file.suffix.lower() == ".jsonl")


@dataclass
class CountResult:
    """One text/chat (``single``) or a file of records (``batch``), with context and cost."""

    tokenizer: BaseTokenizer
    single: TextCount | None = None
    batch: BatchCount | None = None
    source: str = "text"
    context: int | None = None
    context_source: str = ""
    output_tokens: int | None = None
    cost: Cost | None = None
    ids: list[int] = field(default_factory=list)
    pieces: list[str] = field(default_factory=list)
    rendered: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def prompt_tokens(self) -> int:
        if self.single is not None:
            return self.single.tokens
        return max(self.batch.tokens) if self.batch else 0


def _stdin() -> BinaryIO:
    return sys.stdin.buffer


def _read(spec: CountSpec) -> tuple[str, str]:
    """(text, where it came from)."""
    if spec.text is not None:
        return spec.text, "text"
    if spec.file is not None and str(spec.file) != "-":
        return read_text(spec.file), str(spec.file)
    return read_text(_stdin()), "stdin"


def _context(spec: CountSpec, tok: BaseTokenizer, row: ModelPrice | None) -> tuple[int | None, str]:
    if spec.context is not None:
        return spec.context, "--context"
    if row is not None and row.context:
        return row.context, f"price table ({row.model})"
    return tok.context_length, tok.context_source


def resolve_tokenizer(spec: CountSpec, table: PriceTable | None) -> tuple[BaseTokenizer, ModelPrice | None]:
    """The tokenizer the spec names, and the model's price row if it has one."""
    from tokometer.tokens.loader import load_tokenizer

    row = table.get(spec.model) if table is not None and spec.model else None
    name = spec.tokenizer or (row.tokenizer if row is not None and row.tokenizer else None) or spec.model
    return load_tokenizer(name), row


def run_count(spec: CountSpec, *, progress: Callable[[int, int], None] | None = None) -> CountResult:
    """Count what ``spec`` says; ``progress(records, bytes)`` is called between JSONL batches."""
    notes: list[str] = []
    table = None
    if spec.model or spec.prices or spec.price:
        try:
            table = PriceTable.load(spec.prices)
        except ConfigError as exc:
            if spec.price or spec.prices:
                raise
            notes.append(f"price table not used: {exc}")  # a broken user table must not stop a count
    tok, row = resolve_tokenizer(spec, table)
    if spec.price and table is not None and spec.model:
        row = table.require(spec.model)
    result = CountResult(tokenizer=tok, output_tokens=spec.output_tokens, notes=notes)
    result.context, result.context_source = _context(spec, tok, row)
    if spec.is_jsonl:
        if spec.show:
            raise ConfigError("--show is for one text or chat, not a JSONL file of many")
        source: Path | BinaryIO = spec.file if spec.file is not None and str(spec.file) != "-" else _stdin()
        result.source = str(spec.file) if isinstance(source, Path) else "stdin"
        result.batch = count_jsonl(source, tok, chat=spec.chat, progress=progress)
        input_tokens = result.batch.total
        output_tokens = (spec.output_tokens or 0) * result.batch.records
    else:
        text, result.source = _read(spec)
        messages: Messages | None = None
        if spec.chat:
            messages = (parse_messages(text, result.source) if looks_like_json(text)
                        else [{"role": "user", "content": text}])
        result.single = count_text(tok, text, messages)
        if spec.show:
            _show(result, tok, text, messages)
        input_tokens = result.single.tokens
        output_tokens = spec.output_tokens or 0
    if spec.price and row is not None:
        result.cost = (table or PriceTable()).cost(row, input_tokens, output_tokens)
        if row.tokenizer and spec.tokenizer and spec.tokenizer != row.tokenizer:
            result.notes.append(f"counted with {tok.name}, priced as {row.model} (which uses {row.tokenizer})")
    return result


def _show(result: CountResult, tok: BaseTokenizer, text: str, messages: Messages | None) -> None:
    if messages is not None:
        try:
            text = tok.render_chat(messages)
        except TokometerError as exc:  # no renderable template (tiktoken): show the contents
            result.notes.append(f"pieces shown for the message contents only: {exc}")
            text = "\n".join(str(m.get("content") or "") for m in messages)
        else:
            result.rendered = text
    result.ids = tok.encode(text)
    result.pieces = tok.pieces(result.ids)
