"""Imported files parsed as they are read, within a fixed memory budget: `ImportStream`, the import
readers' `tokometer.util.jsonstream.JsonStream` with their limits.

A JSON document is parsed within `MAX_TREE_BYTES` of parsed values, one string or number at most
`MAX_TOKEN_CHARS`, nesting at most `MAX_NESTING`, a list at most `MAX_EVENTS` long; a file of JSON lines a
line at a time, each at most `MAX_LINE_BYTES`; at most `MAX_IMPORT_BYTES` in all. Every error is an
`ImportFormatError` naming the file and the line or character.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from tokometer.imports import source
from tokometer.imports.source import MAX_IMPORT_BYTES, MAX_NESTING, ImportFormatError
from tokometer.util.jsonstream import WINDOW_BYTES, JsonLimits, JsonStream

__all__ = ["MAX_LINE_BYTES", "MAX_TOKEN_CHARS", "MAX_TREE_BYTES", "WINDOW_BYTES", "ImportStream"]

MAX_TREE_BYTES: Final = 256 * 1024 * 1024
"""The memory a parsed document may take (`JsonLimits.tree_bytes`): a vLLM file of 10,000 requests takes
~90 MiB."""
MAX_TOKEN_CHARS: Final = 16 * 1024 * 1024
"""The longest one string or number may be (a generated text, a prompt)."""
MAX_LINE_BYTES: Final = 4 * 1024 * 1024
"""The longest line of a JSON-lines file (an AIPerf record of 100,000 chunk gaps is ~1 MiB)."""


class ImportStream(JsonStream):
    """One imported file, read once, front to back, within the import limits (read when it is opened)."""

    def __init__(self, path: Path, *, window: int = WINDOW_BYTES, refusal: str = "not imported",
                 limit: int = MAX_IMPORT_BYTES) -> None:
        """``refusal``: what a file past a limit is told it was not; ``limit``: its most bytes."""
        limits = JsonLimits(file_bytes=limit, tree_bytes=MAX_TREE_BYTES, token_chars=MAX_TOKEN_CHARS,
                            line_bytes=MAX_LINE_BYTES, nesting=MAX_NESTING, entries=source.MAX_EVENTS,
                            refusal=refusal)
        super().__init__(path, limits, ImportFormatError, window=window)
