"""Request traces (the Mooncake format): when each request arrived, how long it was, which prefix blocks it shared.

A trace is JSONL, one request a line, in arrival order::

    {"timestamp": 0, "input_length": 1636, "output_length": 40, "hash_ids": [0, 1, 2, 3]}

``timestamp`` is in milliseconds from the trace's start; ``input_length`` and ``output_length`` in tokens;
``hash_ids`` (optional) names each ``block_tokens``-token block of the prompt (512 in Mooncake's traces), the
last one possibly partial. Two requests with the same id in the same place share that block, and everything
before it: that is what a server's prefix cache can reuse.

`TraceSource` makes one prompt per request, of exactly ``input_length`` tokens with a tokenizer:

- each block id gets one text of exactly ``block_tokens`` tokens, made once from the run's seed and the id,
  and reused by every prompt that names the id (so the same ids give the same text, token for token);
- a partial last block with an id gets a text of its own length, shared the same way;
- blocks without an id (a trace without ``hash_ids``, or fewer ids than blocks) are text of their own;
- the prompt is the blocks joined by single spaces; its length is counted with the tokenizer, and only the
  last block, the one no later block depends on, is remade to a nudged length until the whole prompt is
  exactly ``input_length`` tokens. A shared last block that had to be nudged is counted in ``nudged``.

Without a tokenizer, a token is a word, and the report says so.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tokometer.datasets.files import json_line
from tokometer.datasets.synthetic import make_exact_text
from tokometer.datasets.words import WORDS
from tokometer.prompt import Prompt
from tokometer.tokens.base import Tokenizer
from tokometer.util.errors import DatasetError
from tokometer.util.readlimit import iter_at_most, split_lines

__all__ = ["BLOCK_TOKENS", "EXAMPLE_TRACE", "MAX_TRACE_BYTES", "MAX_TRACE_LINE_BYTES", "TraceEntry", "TraceSource",
           "read_trace", "trace_offsets"]

BLOCK_TOKENS = 512
"""Tokens per ``hash_ids`` block unless told otherwise (``bench --trace-block-tokens``): Mooncake's 512."""
EXAMPLE_TRACE = Path(__file__).with_name("data") / "example_trace.jsonl"
"""The small example trace shipped with tokometer (``bench --trace example``); scripts/gen_example_trace.py
writes it."""
MAX_TRACE_BYTES = 256 << 20
"""The largest trace file read (a Mooncake trace of 24,000 requests is ~3 MiB), a line at a time."""
MAX_TRACE_LINE_BYTES = 1 << 20
"""The longest line of a trace (one request: its lengths and its hash ids)."""

_NUDGES = 12


@dataclass(frozen=True, slots=True)
class TraceEntry:
    """One request of a trace."""

    timestamp_ms: float
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...] = ()


def _int(obj: dict[str, Any], key: str, where: str, minimum: int) -> int:
    value = obj.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise DatasetError(f"{where}: '{key}' must be a whole number of at least {minimum}")
    return value


def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """The trace's lines, one at a time: at most `MAX_TRACE_BYTES` in all, each at most `MAX_TRACE_LINE_BYTES`."""
    def too_long(number: int) -> DatasetError:
        return DatasetError(f"{path}:{number}: a line longer than {MAX_TRACE_LINE_BYTES >> 10} KiB")

    yield from split_lines(iter_at_most(path, MAX_TRACE_BYTES, "not read", DatasetError, what="trace"),
                           MAX_TRACE_LINE_BYTES, too_long)


def read_trace(path: str | Path) -> list[TraceEntry]:
    """The requests of a trace file, in file order; ``example`` names the shipped example."""
    p = EXAMPLE_TRACE if str(path) == "example" else Path(path)
    out: list[TraceEntry] = []
    for number, raw in _lines(p):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DatasetError(f"trace {p}:{number} is not UTF-8 text (byte {exc.start})") from None
        if not line.strip():
            continue
        where = f"{p}:{number}"
        obj = json_line(line, where)
        if not isinstance(obj, dict):
            raise DatasetError(f"{where}: expected an object with timestamp, input_length, output_length")
        stamp = obj.get("timestamp")
        if not isinstance(stamp, int | float) or isinstance(stamp, bool) or stamp < 0:
            raise DatasetError(f"{where}: 'timestamp' must be a number of milliseconds, at least 0")
        ids = obj.get("hash_ids", [])
        if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise DatasetError(f"{where}: 'hash_ids' must be a list of whole numbers")
        if out and stamp < out[-1].timestamp_ms:
            raise DatasetError(f"{where}: timestamps must not go backwards ({stamp} after {out[-1].timestamp_ms})")
        out.append(TraceEntry(float(stamp), _int(obj, "input_length", where, 1), _int(obj, "output_length", where, 1),
                              tuple(ids)))
    if not out:
        raise DatasetError(f"trace {p} holds no requests")
    return out


def trace_offsets(entries: list[TraceEntry], time_scale: float = 1.0) -> tuple[int, ...]:
    """Each request's due time in ns from the first request's, stretched by ``time_scale`` (2: half as fast)."""
    first = entries[0].timestamp_ms if entries else 0.0
    return tuple(round((e.timestamp_ms - first) * time_scale * 1e6) for e in entries)


class TraceSource:
    """One prompt per trace request, of its exact input length, with the trace's shared blocks shared."""

    def __init__(self, path: str | Path, tokenizer: Tokenizer | None, *, block_tokens: int = BLOCK_TOKENS,
                 seed: int = 0) -> None:
        if block_tokens < 1:
            raise DatasetError("the trace's block size must be at least 1 token")
        self.path = EXAMPLE_TRACE if str(path) == "example" else Path(path)
        self.entries = read_trace(self.path)
        self.tokenizer = tokenizer
        self.block_tokens = block_tokens
        self.seed = seed
        self.exact = tokenizer is not None
        self.nudged = 0
        """Prompts whose shared partial last block had to be remade to fit (their last block is then their own)."""
        self.items: list[Prompt] = []
        self._blocks: dict[tuple[int, int], str] = {}
        self.name = (f"trace:{self.path.name} ({len(self.entries)} requests, {block_tokens}-token blocks, "
                     f"{self.shared_share:.0%} of prompt tokens in blocks sent before; "
                     + (f"exact: {tokenizer.name})" if tokenizer else "words)"))

    @property
    def shared_share(self) -> float:
        """The share of the trace's prompt tokens in blocks an earlier request already had: the prefix-cache hit
        rate a server with an unlimited cache would reach, replaying the trace in order."""
        seen: set[int] = set()
        shared = total = 0
        for e in self.entries:
            leading = 0
            for block_id in e.hash_ids:
                if block_id not in seen:
                    break
                leading += 1
            shared += min(e.input_length, leading * self.block_tokens)
            total += e.input_length
            seen.update(e.hash_ids)
        return shared / total if total else 0.0

    def prepare(self, n: int = 0, stop: Any = None) -> None:
        """Make every prompt now, before any timing starts."""
        while len(self.items) < len(self.entries) and not (stop is not None and stop.is_set()):
            index = len(self.items)
            self.items.append(self._prompt(index, self.entries[index]))

    def prompts(self) -> Iterator[Prompt]:
        """The trace's prompts in order, again from the start when it ends."""
        self.prepare()
        while True:
            yield from self.items

    def _text(self, key: tuple[int, int], n: int, salt: str) -> str:
        """Text of exactly ``n`` tokens (words without a tokenizer) for block ``key``, made once."""
        if key not in self._blocks:
            rng = random.Random(f"{self.seed}:{salt}:{key[0]}:{key[1]}")
            if self.tokenizer is None:
                self._blocks[key] = " ".join(rng.choice(WORDS) for _ in range(n))
            else:
                self._blocks[key] = make_exact_text(self.tokenizer, n, rng)
        return self._blocks[key]

    def _prompt(self, index: int, entry: TraceEntry) -> Prompt:
        size, n = self.block_tokens, entry.input_length
        lengths = [size] * (n // size) + ([n % size] if n % size else [])
        texts = []
        for k, length in enumerate(lengths):
            if k < len(entry.hash_ids):
                texts.append(self._text((entry.hash_ids[k], length), length, "block"))
            else:
                texts.append(self._text((-1 - index, k), length, "own"))
        if self.tokenizer is None:
            return replace(Prompt.from_text(" ".join(texts), max_tokens=entry.output_length), exact_length=True)
        head = " ".join(texts[:-1])
        text = _fit(self.tokenizer, head, texts[-1], lengths[-1], n, random.Random(f"{self.seed}:fit:{index}"))
        if text is None:
            raise DatasetError(f"trace request {index + 1}: could not make a prompt of exactly {n} tokens with "
                               f"tokenizer {self.tokenizer.name}")
        if not text.endswith(texts[-1]):
            self.nudged += 1
        return replace(Prompt.from_text(text, input_tokens=n, max_tokens=entry.output_length), exact_length=True)


def _fit(tokenizer: Tokenizer, head: str, last: str, last_tokens: int, total: int,
         rng: random.Random) -> str | None:
    """``head`` + the last block, the last block remade to a nudged length until the whole is ``total`` tokens."""
    join = (lambda tail: f"{head} {tail}") if head else (lambda tail: tail)
    candidate = join(last)
    count = tokenizer.count(candidate)
    want = last_tokens
    for _ in range(_NUDGES):
        if count == total:
            return candidate
        want += total - count
        if want < 1:
            return None
        candidate = join(make_exact_text(tokenizer, want, rng))
        count = tokenizer.count(candidate)
    return candidate if count == total else None
