"""Read a GGUF file's metadata *with* its tokenizer arrays (vocabulary, scores, types, merges).

``tokometer.engines.model.gguf_metadata`` skips the large ``tokenizer.*`` arrays because the engine
needs ten keys; converting the tokenizer needs all of them. ``gguf.GGUFReader`` builds a numpy view
per array item (262k strings for Gemma: ~12 s); this reader walks a memory map with
``struct.unpack_from`` and reads the whole header of the bundled model in ~0.2 s. Nothing here
imports torch, numpy or transformers.
"""

from __future__ import annotations

import mmap
import struct
from pathlib import Path
from typing import Any

__all__ = ["read_gguf_header"]

_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9


class _Cursor:
    __slots__ = ("buf", "off")

    def __init__(self, buf: memoryview) -> None:
        self.buf = buf
        self.off = 0

    def unpack(self, fmt: str) -> tuple[Any, ...]:
        values = struct.unpack_from(fmt, self.buf, self.off)
        self.off += struct.calcsize(fmt)
        return values

    def string(self) -> str:
        (length,) = struct.unpack_from("<Q", self.buf, self.off)
        start = self.off + 8
        self.off = start + length
        if self.off > len(self.buf):
            raise ValueError("truncated GGUF header")
        return str(self.buf[start:self.off], "utf-8", "replace")

    def strings(self, count: int) -> list[str]:
        buf, off, unpack = self.buf, self.off, struct.unpack_from
        out: list[str] = []
        append = out.append
        for _ in range(count):
            (length,) = unpack("<Q", buf, off)
            off += 8
            append(str(buf[off:off + length], "utf-8", "replace"))
            off += length
        if off > len(buf):
            raise ValueError("truncated GGUF header")
        self.off = off
        return out

    def value(self, kind: int) -> Any:
        if kind in _SCALARS:
            return self.unpack("<" + _SCALARS[kind])[0]
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            item_kind, count = self.unpack("<IQ")
            if item_kind in _SCALARS:
                return list(self.unpack(f"<{count}{_SCALARS[item_kind]}"))
            if item_kind == _STRING:
                return self.strings(count)
            return [self.value(item_kind) for _ in range(count)]
        raise ValueError(f"unknown GGUF value type {kind}")


def read_gguf_header(path: str | Path) -> dict[str, Any]:
    """Every key/value pair of the GGUF header, arrays included. Raises ``ValueError`` for a file
    that is not GGUF or is cut short, ``OSError`` for one that cannot be read."""
    with Path(path).open("rb") as handle:
        if handle.read(4) != b"GGUF":
            raise ValueError(f"{path} is not a GGUF file")
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            view = memoryview(mapped)
            cursor = _Cursor(view)
            cursor.off = 4
            try:
                version, _tensors, kv_count = cursor.unpack("<IQQ")
                meta: dict[str, Any] = {"GGUF.version": version}
                for _ in range(kv_count):
                    key = cursor.string()
                    (kind,) = cursor.unpack("<I")
                    meta[key] = cursor.value(kind)
            except struct.error as exc:
                raise ValueError(f"truncated GGUF header in {path}") from exc
            finally:
                cursor.buf = memoryview(b"")
                view.release()
    return meta
