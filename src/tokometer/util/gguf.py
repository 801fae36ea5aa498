"""The one GGUF reader: the header, the metadata key/values and the tensor table of a ``.gguf`` file.

The layout (llama.cpp's model file; ggml's ``docs/gguf.md``), little-endian:

    magic "GGUF", version u32 (2 or 3), tensor count u64, key/value count u64
    key/values   key (string), value type u32, value
                 string = length u64 + UTF-8 bytes; array = item type u32 + count u64 + items
    tensors      name (string), dims u32, shape u64 × dims (innermost first), ggml type u32, offset u64
    padding to ``general.alignment`` (32 unless set), then the tensor data; offsets count from there

`read_gguf` walks a memory map with ``struct.unpack_from``, so only the header's pages are read.
``skip_arrays`` steps over the arrays under the given key prefixes without decoding them (the
tokenizer's vocabulary, scores, types and merges: 262k entries each for Gemma), which is what the
engine, the estimate and the run identity want; the tokenizer converter reads them all. On the
bundled Gemma 3 270M: ~30 ms with the tokenizer arrays skipped, ~0.13 s with them decoded
(``gguf.GGUFReader`` builds a numpy view per item and takes seconds). Nothing here imports numpy.

This module imports nothing from tokometer: engines, perf and tokens all read GGUF files through it.
"""

from __future__ import annotations

import mmap
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["FILE_TYPES", "GGML_TYPES", "MAX_ARRAY_DEPTH", "MAX_DIMS", "MAX_ELEMENTS", "TOKENIZER_ARRAYS", "GGUFFile",
           "GGUFTensor", "gguf_metadata", "quantization_of", "read_gguf"]

TOKENIZER_ARRAYS = ("tokenizer.",)
"""Key prefix of the large arrays (vocabulary, scores, token types, merges): pass as ``skip_arrays``."""

# llama.cpp's `llama_ftype` (general.file_type) -> the names its quantize tool uses.
FILE_TYPES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K", 11: "Q3_K_S",
    12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K",
    19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL",
    26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16",
    36: "TQ1_0", 37: "TQ2_0", 38: "MXFP4_MOE",
}
# ggml's `ggml_type` (a tensor's type in the table) -> its name.
GGML_TYPES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 9: "Q8_1", 10: "Q2_K", 11: "Q3_K",
    12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 15: "Q8_K", 16: "IQ2_XXS", 17: "IQ2_XS", 18: "IQ3_XXS", 19: "IQ1_S",
    20: "IQ4_NL", 21: "IQ3_S", 22: "IQ2_S", 23: "IQ4_XS", 24: "I8", 25: "I16", 26: "I32", 27: "I64", 28: "F64",
    29: "IQ1_M", 30: "BF16", 34: "TQ1_0", 35: "TQ2_0", 39: "MXFP4",
}
_NAME_QUANT = re.compile(r"(?<![A-Za-z0-9])(I?Q\d_[A-Z0-9_]*?|F16|BF16|F32|MXFP4)(?=[.\-]|$)", re.IGNORECASE)

_SCALARS = {kind: struct.Struct("<" + code) for kind, code in
            {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}.items()}
_CODES = {kind: s.format[1:] for kind, s in _SCALARS.items()}
_STRING, _ARRAY = 8, 9
_MIN_ITEM_BYTES = {**{kind: s.size for kind, s in _SCALARS.items()}, _STRING: 8, _ARRAY: 12}

MAX_ARRAY_DEPTH = 8
"""Arrays of arrays deeper than this are refused (real files nest one level at most)."""
MAX_DIMS = 8
"""Dimensions a tensor may have (ggml's GGML_MAX_DIMS is 4)."""
MAX_ELEMENTS = 2**48
"""Elements one tensor may have (2.8 x 10^14: far beyond any model's largest tensor)."""
_U32, _U64 = struct.Struct("<I"), struct.Struct("<Q")
_ARRAY_HEAD = struct.Struct("<IQ")  # item type, count
_TENSOR_TAIL = struct.Struct("<IQ")  # ggml type, offset


@dataclass(frozen=True)
class GGUFTensor:
    """One row of the tensor table. ``shape`` is innermost first (ggml's order: ``[hidden, vocab]``
    for ``token_embd.weight``); ``offset`` counts from `GGUFFile.data_offset`."""

    name: str
    shape: tuple[int, ...]
    ggml_type: int
    offset: int

    @property
    def elements(self) -> int:
        count = 1
        for dim in self.shape:
            count *= dim
        return count

    @property
    def type_name(self) -> str:
        return GGML_TYPES.get(self.ggml_type, f"type {self.ggml_type}")


@dataclass(frozen=True)
class GGUFFile:
    """What `read_gguf` found. ``skipped``: the array keys stepped over (absent from ``metadata``);
    ``tensors`` is empty and ``data_offset`` None when the table was not read."""

    path: Path
    version: int
    metadata: dict[str, Any]
    tensor_count: int
    tensors: tuple[GGUFTensor, ...]
    data_offset: int | None
    file_size: int
    skipped: tuple[str, ...] = ()

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", ""))

    @property
    def data_bytes(self) -> int | None:
        """Bytes of tensor data: the file from the (aligned) end of the tensor table on."""
        return None if self.data_offset is None else max(0, self.file_size - self.data_offset)


class _Cursor:
    __slots__ = ("buf", "off")

    def __init__(self, buf: memoryview, off: int) -> None:
        self.buf = buf
        self.off = off

    def take(self, fmt: struct.Struct) -> tuple[Any, ...]:
        values = fmt.unpack_from(self.buf, self.off)
        self.off += fmt.size
        return values

    def string(self) -> str:
        (length,) = _U64.unpack_from(self.buf, self.off)
        start = self.off + 8
        self.off = start + length
        if self.off > len(self.buf):
            raise struct.error("string runs past the end of the file")
        return str(self.buf[start:self.off], "utf-8", "replace")

    def strings(self, count: int, keep: bool) -> list[str] | None:
        buf, off, unpack = self.buf, self.off, _U64.unpack_from
        out: list[str] = []
        append = out.append
        for _ in range(count):
            (length,) = unpack(buf, off)
            off += 8
            if keep:
                append(str(buf[off:off + length], "utf-8", "replace"))
            off += length
        if off > len(buf):
            raise struct.error("array runs past the end of the file")
        self.off = off
        return out if keep else None

    def value(self, kind: int, keep: bool = True, depth: int = 0) -> Any:
        if kind in _SCALARS:
            return self.take(_SCALARS[kind])[0]
        if kind == _STRING:
            return self.string()
        if kind != _ARRAY:
            raise ValueError(f"unknown GGUF value type {kind}")
        if depth >= MAX_ARRAY_DEPTH:
            raise ValueError(f"arrays nested more than {MAX_ARRAY_DEPTH} deep")
        item_kind, count = self.take(_ARRAY_HEAD)
        self.fits(count, _MIN_ITEM_BYTES.get(item_kind, 1), "array")
        if item_kind in _SCALARS:
            size = _SCALARS[item_kind].size * count
            if self.off + size > len(self.buf):
                raise struct.error("array runs past the end of the file")
            if not keep:
                self.off += size
                return None
            values = struct.unpack_from(f"<{count}{_CODES[item_kind]}", self.buf, self.off)
            self.off += size
            return list(values)
        if item_kind == _STRING:
            return self.strings(count, keep)
        items = [self.value(item_kind, keep, depth + 1) for _ in range(count)]
        return items if keep else None

    def fits(self, count: int, least: int, what: str) -> None:
        """``count`` items of at least ``least`` bytes each must fit in the rest of the file."""
        if count * least > len(self.buf) - self.off:
            raise struct.error(f"{what} of {count:,} items runs past the end of the file")


def read_gguf(path: str | Path, *, skip_arrays: tuple[str, ...] = (), tensors: bool = True) -> GGUFFile:
    """Read the header of the GGUF file at ``path``: metadata and (``tensors``) the tensor table.

    ``skip_arrays``: key prefixes whose array values are stepped over, not decoded (`TOKENIZER_ARRAYS`
    for the tokenizer's). Raises ``ValueError`` for a file that is not GGUF, is cut short inside what is
    read, or holds what no real file does (arrays nested past `MAX_ARRAY_DEPTH`, counts larger than the
    file, a tensor of more than `MAX_DIMS` dimensions or `MAX_ELEMENTS` elements); ``OSError`` for one
    that cannot be read.
    """
    file = Path(path)
    with file.open("rb") as handle:
        if handle.read(4) != b"GGUF":
            raise ValueError(f"{file} is not a GGUF file")
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            view = memoryview(mapped)
            cursor = _Cursor(view, 4)
            try:
                return _parse(file, cursor, len(mapped), skip_arrays, tensors)
            except struct.error as exc:
                raise ValueError(f"truncated GGUF header in {file}: {exc}") from exc
            finally:
                cursor.buf = memoryview(b"")
                view.release()


def _parse(file: Path, cursor: _Cursor, size: int, skip_arrays: tuple[str, ...], tensors: bool) -> GGUFFile:
    (version,) = cursor.take(_U32)
    if version < 2:
        raise ValueError(f"{file} is GGUF version {version}; only versions 2 and later are read")
    (tensor_count,) = cursor.take(_U64)
    (kv_count,) = cursor.take(_U64)
    cursor.fits(kv_count, 12, "key/value table")  # a key (8 + its bytes) and a type (4)
    meta: dict[str, Any] = {}
    skipped: list[str] = []
    for _ in range(kv_count):
        key = cursor.string()
        (kind,) = cursor.take(_U32)
        if kind == _ARRAY and skip_arrays and key.startswith(skip_arrays):
            cursor.value(kind, keep=False)
            skipped.append(key)
        else:
            meta[key] = cursor.value(kind)
    table: list[GGUFTensor] = []
    data_offset: int | None = None
    if tensors:
        cursor.fits(tensor_count, 24, "tensor table")  # a name (8 + its bytes), dims (4), type (4), offset (8)
        for _ in range(tensor_count):
            name = cursor.string()
            (dims,) = cursor.take(_U32)
            if dims > MAX_DIMS:
                raise ValueError(f"tensor {name[:80]!r} has {dims} dimensions (at most {MAX_DIMS})")
            shape = struct.unpack_from(f"<{dims}Q", cursor.buf, cursor.off)
            cursor.off += 8 * dims
            elements = 1
            for dim in shape:
                elements *= dim
            if elements > MAX_ELEMENTS:
                raise ValueError(f"tensor {name[:80]!r} has a shape of {elements:.3g} elements "
                                 f"({' x '.join(map(str, shape))}): no model has such a tensor")
            ggml_type, offset = cursor.take(_TENSOR_TAIL)
            table.append(GGUFTensor(name, tuple(shape), ggml_type, offset))
        alignment = meta.get("general.alignment", 32)
        alignment = alignment if isinstance(alignment, int) and alignment > 0 else 32
        data_offset = -(-cursor.off // alignment) * alignment
    return GGUFFile(file, version, meta, tensor_count, tuple(table), data_offset, size, tuple(skipped))


def gguf_metadata(path: str | Path) -> dict[str, Any]:
    """The header's key/values without the tokenizer's arrays (and without reading the tensor table)."""
    return read_gguf(path, skip_arrays=TOKENIZER_ARRAYS, tensors=False).metadata


def quantization_of(path: Path, meta: dict[str, Any] | None = None) -> str:
    """The quantisation name (e.g. ``Q4_K_M``): from ``general.file_type``, else from the file name."""
    file_type = (meta or {}).get("general.file_type")
    if isinstance(file_type, int) and file_type in FILE_TYPES:
        return FILE_TYPES[file_type]
    match = _NAME_QUANT.search(path.name)
    return match.group(1).upper() if match else "unknown"
