"""What ``tokometer count`` counts: one text or chat, or every record of a JSONL file in batches.

Input is text: a file or stdin that holds NUL bytes or is not UTF-8 is refused ("binary input"),
never guessed at, as soon as a NUL is read. A text or chat is read whole, at most `MAX_TEXT_BYTES`; a JSONL
file a line at a time (each at most `MAX_RECORD_BYTES`, all at most `MAX_JSONL_BYTES`): an endless input
(``/dev/zero``, a FIFO whose writer never stops) ends in a one-line error, never in the machine's memory.
A JSONL record is a JSON string, an object with ``text``/``prompt``/``content``, or an object with
``messages``; blank lines are skipped; a bad line is an error naming its number.

Many records are counted in batches through the tokenizer's batch encoder (Rust threads for
`tokenizers`/tiktoken); parsing a batch's JSON costs a few percent of encoding it.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Final

import orjson

from tokometer.tokens.base import BaseTokenizer
from tokometer.tokens.chat import ChatCount, Messages, count_chat, message_text, parse_messages
from tokometer.util.errors import DatasetError
from tokometer.util.readlimit import iter_at_most, split_lines

__all__ = ["MAX_JSONL_BYTES", "MAX_RECORD_BYTES", "MAX_TEXT_BYTES", "BatchCount", "TextCount", "count_jsonl",
           "count_text", "decode_input", "read_text"]

MAX_TEXT_BYTES: Final = 256 << 20
"""A text or chat counted whole (a file, or stdin): 256 MiB, some 60 M tokens held at once with their ids."""
MAX_RECORD_BYTES: Final = 16 << 20
"""One line of a JSONL file: 16 MiB."""
MAX_JSONL_BYTES: Final = 64 << 30
"""A JSONL file, read a batch of records at a time: 64 GiB."""
_CHUNK = 1 << 20

Progress = Callable[[int, int], None]  # (records done, bytes done)


def _binary(where: str) -> DatasetError:
    return DatasetError(f"{where} is binary (it holds NUL bytes): tokometer counts text; "
                        "give a UTF-8 text file, a JSON chat or a JSONL file")


def decode_input(data: bytes, where: str) -> str:
    """``data`` as UTF-8 text; binary data (NUL bytes, invalid UTF-8) is a DatasetError."""
    if b"\x00" in data:
        raise _binary(where)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{where} is not UTF-8 text (invalid byte at offset {exc.start}): "
                           "convert it to UTF-8 first (e.g. iconv -t UTF-8)") from None


def _chunks(source: Path | BinaryIO, limit: int, beyond: str) -> Iterator[bytes]:
    """``source``'s bytes a chunk at a time, at most ``limit`` of them (more: a DatasetError ending ``beyond``),
    refused as binary at the first chunk that holds a NUL byte; a file through `iter_at_most` (a FIFO nobody
    writes to reads as empty), stdin as it comes."""
    where = str(source) if isinstance(source, Path) else "stdin"
    if isinstance(source, Path):
        if source.is_dir():
            raise DatasetError(f"{source} is a directory, not a text file")
        blocks: Iterator[bytes] = iter_at_most(source, limit, beyond, DatasetError, chunk=_CHUNK)
    else:
        blocks = iter(functools.partial(source.read, _CHUNK), b"")
    total = 0
    for block in blocks:
        total += len(block)
        if total > limit:
            raise DatasetError(f"{where} is larger than {limit >> 20} MiB: {beyond}")
        if b"\x00" in block:
            raise _binary(where)
        yield block


def read_text(source: Path | BinaryIO) -> str:
    """A text file's content, or stdin's, checked to be text (`_chunks`): at most `MAX_TEXT_BYTES`."""
    where = str(source) if isinstance(source, Path) else "stdin"
    beyond = "count a larger corpus as JSONL (--jsonl), a record a line"
    return decode_input(b"".join(_chunks(source, MAX_TEXT_BYTES, beyond)), where)


def _words(text: str) -> int:
    return len(text.split())


def _spaceless(text: str) -> bool:
    """Whether ``text`` is mostly in a script written without spaces between words (Chinese,
    Japanese), where a count of whitespace-separated words means nothing."""
    spaceless = sum(1 for ch in text if "\u3040" <= ch <= "\u30ff" or "\u3400" <= ch <= "\u9fff"
                    or "\uf900" <= ch <= "\ufaff")
    return spaceless * 5 > len(text)


@dataclass(frozen=True, slots=True)
class TextCount:
    """One text (or chat): its tokens, characters and whitespace-separated words."""

    tokens: int
    characters: int
    words: int
    chat: ChatCount | None = None
    spaceless: bool = False  # mostly Chinese/Japanese: the word count means nothing


def count_text(tokenizer: BaseTokenizer, text: str | None = None, messages: Messages | None = None) -> TextCount:
    """Count a text, or a chat with the tokenizer's chat template (characters and words: its contents)."""
    if messages is not None:
        chat = count_chat(tokenizer, messages)
        contents = [message_text(m) for m in messages]
        joined = "".join(contents)
        return TextCount(chat.total, len(joined), sum(_words(c) for c in contents), chat, _spaceless(joined))
    body = text or ""
    return TextCount(tokenizer.count(body), len(body), _words(body), spaceless=_spaceless(body))


@dataclass
class BatchCount:
    """Counts of every record of a file, in file order."""

    tokens: list[int] = field(default_factory=list)
    content_tokens: int = 0
    characters: int = 0
    chat: bool = False
    seconds: float = 0.0
    bytes: int = 0

    @property
    def records(self) -> int:
        return len(self.tokens)

    @property
    def total(self) -> int:
        return sum(self.tokens)

    @property
    def template_tokens(self) -> int:
        return self.total - self.content_tokens if self.chat else 0


def _record(obj: Any, where: str) -> str | Messages:
    if isinstance(obj, str):
        return obj
    if isinstance(obj, Mapping):
        if "messages" in obj:
            return parse_messages(obj["messages"], where)
        for key in ("text", "prompt", "content"):
            if isinstance(obj.get(key), str):
                return str(obj[key])
    raise DatasetError(f"{where}: a record must be a JSON string or an object with 'text', 'prompt', "
                       "'content' or 'messages'")


def _records(source: Path | BinaryIO) -> Iterator[tuple[str | Messages, int]]:
    path = source if isinstance(source, Path) else "stdin"

    def too_long(number: int) -> DatasetError:
        return DatasetError(f"{path}, line {number}: longer than {MAX_RECORD_BYTES >> 20} MiB (one record a line)")

    chunks = _chunks(source, MAX_JSONL_BYTES, "split it")
    for number, line in split_lines(chunks, MAX_RECORD_BYTES, too_long):
        if not line.strip():
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise DatasetError(f"{path}, line {number}: invalid JSON ({exc})") from None
        yield _record(obj, f"{path}, line {number}"), len(line) + 1


@dataclass
class _Prepared:
    """One batch ready for the tokenizer: the texts to count, and which record each belongs to."""

    size: int
    texts: list[str]
    owners: list[int]
    chats: list[list[dict[str, Any]]] | None = None  # chat mode: the messages of each record
    rendered: list[str] | None = None  # ... rendered here, where the tokenizer renders locally


def _prepare(tokenizer: BaseTokenizer, batch: Sequence[str | Messages], chat: bool, out: BatchCount) -> _Prepared:
    texts: list[str] = []
    owners: list[int] = []
    for index, item in enumerate(batch):
        parts = [item] if isinstance(item, str) else [message_text(m) for m in item]
        texts.extend(parts)
        owners.extend([index] * len(parts))
    out.characters += sum(len(t) for t in texts)  # (words are not counted here: split() costs ~5%)
    if not chat:
        return _Prepared(len(batch), texts, owners)
    chats = [[{"role": "user", "content": item}] if isinstance(item, str) else item for item in batch]
    return _Prepared(len(batch), texts, owners, chats, tokenizer.render_chats(chats))


def _count(tokenizer: BaseTokenizer, prepared: _Prepared) -> tuple[list[int], int]:
    """(tokens per record, content tokens): runs in the worker thread; the tokenizers release the GIL."""
    counts = tokenizer.count_batch(prepared.texts)
    if prepared.rendered is not None:
        return tokenizer.count_batch(prepared.rendered), sum(counts)
    if prepared.chats is not None:
        return tokenizer.count_chat_batch(prepared.chats), sum(counts)
    per_record = [0] * prepared.size
    for owner, n in zip(prepared.owners, counts, strict=True):
        per_record[owner] += n
    return per_record, sum(counts)


def count_jsonl(path: Path | BinaryIO, tokenizer: BaseTokenizer, *, chat: bool = False, batch_size: int = 2048,
                progress: Progress | None = None) -> BatchCount:
    """Count every record of a JSONL file; ``chat`` counts each with the chat template (a text
    record becomes one user message). One batch is counted in a worker thread while the next is
    read and parsed, so the parsing hides behind the encoding."""
    from concurrent.futures import Future, ThreadPoolExecutor

    out = BatchCount(chat=chat)
    started = time.perf_counter()
    done_bytes = 0

    def collect(job: Future[tuple[list[int], int]], at_bytes: int) -> None:
        tokens, content = job.result()
        out.tokens.extend(tokens)
        out.content_tokens += content
        if progress:
            progress(out.records, at_bytes)

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="tokometer-count") as pool:
        pending: tuple[Future[tuple[list[int], int]], int] | None = None
        batch: list[str | Messages] = []
        records = _records(path)
        while True:
            item = next(records, None)
            if item is not None:
                batch.append(item[0])
                done_bytes += item[1]
            if batch and (item is None or len(batch) >= batch_size):
                job = pool.submit(_count, tokenizer, _prepare(tokenizer, batch, chat, out))
                if pending is not None:
                    collect(*pending)
                pending, batch = (job, done_bytes), []
            if item is None:
                break
        if pending is not None:
            collect(*pending)
    if not out.tokens:
        raise DatasetError(f"{path if isinstance(path, Path) else 'stdin'} holds no records")
    out.seconds = time.perf_counter() - started
    out.bytes = done_bytes
    return out

