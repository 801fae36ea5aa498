"""Engine identity: what produced a run's numbers, saved with every run as a JSON-able dict.

Two runs are comparable only if the engine, its version, the exact model file, its quantisation,
the context and slot settings and the host are the same; this module gathers those facts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tokometer.bundled import file_sha256
from tokometer.engines._fs import built_binary_path
from tokometer.engines.serverbinary import binary_source, llama_server_version
from tokometer.util.gguf import gguf_metadata, quantization_of
from tokometer.util.hostinfo import host_info, physical_cores

__all__ = ["host_identity", "llamacpp_identity", "physical_cores"]


def host_identity() -> dict[str, Any]:
    """CPU model, core counts, RAM and OS of this host (see `tokometer.util.hostinfo`)."""
    return dict(host_info())


def _build_info(binary: str) -> dict[str, Any] | None:
    if Path(binary).resolve() != built_binary_path().resolve():
        return None
    try:
        info: dict[str, Any] = json.loads((built_binary_path().parent.parent / "BUILD-INFO.json").read_text("utf-8"))
        return info
    except (OSError, ValueError):
        return None


def _chat_template(meta: dict[str, Any], argv: list[str], added: tuple[str, ...]) -> str:
    if added and added[-1] in argv:
        return "gemma turn format, added by tokometer (the GGUF has no chat template)"
    if any(arg.startswith("--chat-template") for arg in argv):
        return "set on the command line"
    return "from the GGUF" if "tokenizer.chat_template" in meta else "llama.cpp's default"


def llamacpp_identity(binary: str, model_path: Path, model_name: str, *, ctx_size: int, parallel: int,
                      threads: int, argv: list[str], meta: dict[str, Any] | None = None,
                      added_template: tuple[str, ...] = ()) -> dict[str, Any]:
    """The identity of a running embedded llama.cpp engine (``meta``: the model's GGUF header)."""
    version, built_with = llama_server_version(binary)
    if meta is None:
        try:
            meta = gguf_metadata(model_path)
        except (OSError, ValueError):
            meta = {}
    return {
        "engine": "llama.cpp",
        "engine_version": version,
        "engine_built_with": built_with,
        "engine_build": _build_info(binary),
        "binary": binary,
        "binary_source": binary_source(binary),
        "model": model_name,
        "model_file": str(model_path),
        "model_sha256": file_sha256(model_path),
        "model_size_bytes": model_path.stat().st_size,
        "model_architecture": meta.get("general.architecture"),
        "model_size_label": meta.get("general.size_label"),
        "quantization": quantization_of(model_path, meta),
        "model_context_length": meta.get(f"{meta.get('general.architecture')}.context_length"),
        "chat_template": _chat_template(meta, argv, added_template),
        "ctx_size": ctx_size,
        "ctx_per_slot": ctx_size // max(1, parallel),
        "parallel": parallel,
        "threads": threads,
        "argv": [arg if len(arg) <= 200 else arg[:60] + "…" for arg in argv],
        "host": host_identity(),
    }
