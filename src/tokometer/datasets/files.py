"""Prompts from files: JSONL (prompts or chats), ShareGPT-style JSON, one fixed prompt.

JSONL: one JSON value per line, either a string (the prompt) or an object with
``prompt`` / ``text`` (a plain prompt) or ``messages`` (a chat: a list of
``{"role", "content"}``), and optionally ``max_tokens`` / ``output_tokens``.

ShareGPT: a JSON list (or JSONL) of objects with ``conversations``: a list of
``{"from": "human"|"gpt"|"system", "value": ...}``. The prompt is everything up
to the first ``gpt`` turn; with a tokenizer, that turn's length in tokens
becomes the prompt's ``max_tokens`` (as the usual ShareGPT benchmarks do).

Files are untrusted and may be huge: JSONL is read a line at a time (each at most `MAX_LINE_BYTES`), a
ShareGPT JSON list a conversation at a time (`tokometer.util.jsonstream`), at most `MAX_DATASET_BYTES` in
all, and a file past a limit (a FIFO, ``/dev/zero``) is one line naming it, not the machine's memory.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tokometer.prompt import Message, Prompt
from tokometer.tokens.base import Tokenizer
from tokometer.util.errors import DatasetError
from tokometer.util.jsonstream import JsonLimits, JsonStream
from tokometer.util.readlimit import iter_at_most, split_lines

__all__ = ["MAX_DATASET_BYTES", "MAX_LINE_BYTES", "TOO_DEEP", "FixedSource", "JsonlSource", "ShareGPTSource",
           "json_line", "load_source_file", "sharegpt_entries", "sharegpt_messages"]

TOO_DEEP = "JSON nested too deep to read (arrays or objects inside each other by the thousand)"
"""What a dataset line nested past Python's recursion limit is told."""

MAX_DATASET_BYTES = 1 << 30
"""The largest dataset file read (ShareGPT_V3's full split is ~640 MiB)."""
MAX_LINE_BYTES = 16 << 20
"""The longest line of a JSONL dataset, and string of a ShareGPT list (a prompt of a few million tokens)."""
_MAX_ENTRY_MEMORY = 256 << 20
"""The most memory one conversation of a ShareGPT list may take parsed (`tokometer.util.jsonstream.JsonLimits`)."""
_MAX_NESTING = 64
"""The deepest nesting inside a ShareGPT list (a conversation nests 3 deep)."""
_MAX_TURNS = 1_000_000
"""The longest list inside a ShareGPT list (its conversations, one conversation's turns)."""

_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "chatgpt": "assistant",
          "system": "system", "bing": "assistant", "bard": "assistant"}


def _decoded(raw: bytes, path: Path, where: str | None = None) -> str:
    """``raw`` as UTF-8 text; DatasetError for a binary file or other bytes."""
    if b"\x00" in raw[:8192]:
        raise DatasetError(f"dataset {path} is a binary file, not JSON or JSONL text")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{where or f'dataset {path}'} is not UTF-8 text (byte {exc.start})") from exc


def _head(path: Path) -> str:
    """The file's first 4 KiB as text, to tell its kind (a character cut at the end is dropped)."""
    chunks = iter_at_most(path, MAX_DATASET_BYTES, "not read", DatasetError, chunk=4096, what="dataset")
    try:
        return next(chunks, b"").decode("utf-8-sig", "ignore")  # without a byte-order mark at the start
    finally:
        chunks.close()


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of each line, read one at a time (at most `MAX_DATASET_BYTES` in all)."""
    chunks = iter_at_most(path, MAX_DATASET_BYTES, "not read", DatasetError, what="dataset")

    def too_long(number: int) -> DatasetError:
        return DatasetError(f"{path}:{number}: a line longer than {MAX_LINE_BYTES >> 20} MiB")

    for number, raw in split_lines(chunks, MAX_LINE_BYTES, too_long):
        yield number, _decoded(raw, path, f"{path}:{number}")


class _ListSource:
    name: str
    items: list[Prompt]

    def prompts(self) -> Iterator[Prompt]:
        while True:
            yield from self.items

    def __len__(self) -> int:
        return len(self.items)


class FixedSource(_ListSource):
    """The same prompt every time."""

    def __init__(self, text: str) -> None:
        if not text:
            raise DatasetError("the prompt is empty: give some text with --prompt")
        self.name = "fixed prompt"
        self.items = [Prompt.from_text(text)]


def _max_tokens(obj: dict[str, Any], where: str) -> int | None:
    value = obj.get("max_tokens", obj.get("output_tokens"))
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise DatasetError(f"{where}: max_tokens must be a positive integer")
    return value


def _messages(value: Any, where: str) -> tuple[Message, ...]:
    if not isinstance(value, list) or not value:
        raise DatasetError(f"{where}: 'messages' must be a non-empty list")
    out = []
    for item in value:
        if not isinstance(item, dict) or not all(isinstance(item.get(k), str) for k in ("role", "content")):
            raise DatasetError(f"{where}: each message needs a string 'role' and 'content'")
        out.append(Message(item["role"], item["content"]))
    return tuple(out)


def _prompt_from(obj: Any, where: str) -> Prompt:
    if isinstance(obj, str):
        if not obj:
            raise DatasetError(f"{where}: empty prompt")
        return Prompt.from_text(obj)
    if not isinstance(obj, dict):
        raise DatasetError(f"{where}: expected a string or an object with 'prompt' or 'messages'")
    max_tokens = _max_tokens(obj, where)
    if "messages" in obj:
        return Prompt.from_messages(_messages(obj["messages"], where), max_tokens=max_tokens)
    text = obj.get("prompt", obj.get("text"))
    if not isinstance(text, str) or not text:
        raise DatasetError(f"{where}: expected a non-empty 'prompt' (or 'text', or 'messages')")
    return Prompt.from_text(text, max_tokens=max_tokens)


def json_line(line: str, where: str) -> Any:
    """One line of a JSONL file parsed, or a `DatasetError` naming ``where`` (bad JSON, or nested too deep)."""
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise DatasetError(f"{where}: {TOO_DEEP}") from None


def _json_lines(path: Path) -> Iterator[tuple[str, Any]]:
    for number, line in _lines(path):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        yield where, json_line(line, where)


class JsonlSource(_ListSource):
    """Prompts or chats, one JSON value a line."""

    def __init__(self, path: str | Path) -> None:
        p = Path(path)
        self.name = f"jsonl:{p.name}"
        self.items = [_prompt_from(obj, where) for where, obj in _json_lines(p)]
        if not self.items:
            raise DatasetError(f"dataset {p} holds no prompts")


class ShareGPTSource(_ListSource):
    """ShareGPT-style conversations; the first assistant turn sets the output length."""

    def __init__(self, path: str | Path, tokenizer: Tokenizer | None = None, min_turns: int = 2) -> None:
        p = Path(path)
        self.name = f"sharegpt:{p.name}"
        self.items = []
        for where, obj in sharegpt_entries(p):
            prompt = self._convert(obj, where, tokenizer)
            if prompt is not None:
                self.items.append(prompt)
        if not self.items:
            raise DatasetError(f"dataset {p} holds no conversation with a human turn followed by an answer")

    @staticmethod
    def _convert(obj: Any, where: str, tokenizer: Tokenizer | None) -> Prompt | None:
        messages: list[Message] = []
        for message in sharegpt_messages(obj, where):
            if message.role == "assistant":
                if not any(m.role == "user" for m in messages):
                    return None
                max_tokens = max(1, tokenizer.count(message.content)) if tokenizer else None
                return Prompt.from_messages(tuple(messages), max_tokens=max_tokens)
            messages.append(message)
        return None


def sharegpt_entries(path: Path) -> Iterator[tuple[str, Any]]:
    """The conversation objects of a ShareGPT file (a JSON list, or JSONL), each with where it was found, one
    at a time (a JSON list is parsed as it is read, `tokometer.util.jsonstream`)."""
    if _head(path).lstrip().startswith("["):
        limits = JsonLimits(file_bytes=MAX_DATASET_BYTES, tree_bytes=_MAX_ENTRY_MEMORY, token_chars=MAX_LINE_BYTES,
                            line_bytes=MAX_LINE_BYTES, nesting=_MAX_NESTING, entries=_MAX_TURNS, refusal="not read",
                            what="dataset")
        for index, obj in JsonStream(path, limits, DatasetError).items():
            yield f"{path}[{index}]", obj
        return
    yield from _json_lines(path)


def sharegpt_messages(obj: Any, where: str) -> list[Message]:
    """One ShareGPT conversation's turns as chat messages (``human`` -> ``user``, ``gpt`` -> ``assistant``)."""
    turns = obj.get("conversations", obj.get("conversation")) if isinstance(obj, dict) else None
    if not isinstance(turns, list):
        raise DatasetError(f"{where}: expected an object with a 'conversations' list")
    out = []
    for turn in turns:
        if not isinstance(turn, dict) or not isinstance(turn.get("value"), str):
            raise DatasetError(f"{where}: each turn needs 'from' and a string 'value'")
        role = _ROLES.get(str(turn.get("from", "")).lower())
        if role is None:
            raise DatasetError(f"{where}: unknown speaker {turn.get('from')!r}")
        out.append(Message(role, turn["value"]))
    return out


def load_source_file(
    path: str | Path, kind: str = "auto", tokenizer: Tokenizer | None = None
) -> JsonlSource | ShareGPTSource:
    """Open a dataset file; ``kind`` is ``jsonl``, ``sharegpt`` or ``auto`` (by content)."""
    p = Path(path)
    if kind == "auto":
        head = _head(p)
        kind = "sharegpt" if '"conversations"' in head or '"conversation"' in head else "jsonl"
    if kind == "sharegpt":
        return ShareGPTSource(p, tokenizer)
    if kind == "jsonl":
        return JsonlSource(p)
    raise DatasetError(f"unknown dataset kind {kind!r}: use jsonl, sharegpt or auto")
