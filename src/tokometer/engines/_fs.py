"""Where the llama.cpp build lives (the cache directory and the lock are `tokometer.util.cachedir`'s)."""

from __future__ import annotations

import sys
from pathlib import Path

from tokometer.util.cachedir import cache_root

__all__ = ["LLAMA_CPP_BUILD", "LLAMA_QUANTIZE_EXE", "LLAMA_SERVER_EXE", "build_dir", "built_binary_path",
           "built_quantize_path"]

LLAMA_CPP_BUILD = "b11434"
LLAMA_SERVER_EXE = "llama-server.exe" if sys.platform == "win32" else "llama-server"
LLAMA_QUANTIZE_EXE = "llama-quantize.exe" if sys.platform == "win32" else "llama-quantize"


def build_dir() -> Path:
    """Where tokometer's llama.cpp build lives: ``<user cache>/tokometer/llama.cpp/b11434``."""
    return cache_root() / "llama.cpp" / LLAMA_CPP_BUILD


def built_binary_path() -> Path:
    """The path of the cached build's ``llama-server`` (it may not exist yet)."""
    return build_dir() / "bin" / LLAMA_SERVER_EXE


def built_quantize_path() -> Path:
    """The path of the cached build's ``llama-quantize``, built beside ``llama-server`` (it may not exist yet)."""
    return build_dir() / "bin" / LLAMA_QUANTIZE_EXE
