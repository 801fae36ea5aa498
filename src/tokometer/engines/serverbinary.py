"""One ``llama-server`` binary: is an explicitly given one usable, where did it come from, which version is it.

A leaf below both the lookup (`tokometer.engines.binary`, which may build and smoke-run) and the
engine identity (`tokometer.engines.identity`, which records ``binary_source`` and
``llama_server_version``), so the smoke run's own start needs nothing above it.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

from tokometer.engines._fs import built_binary_path
from tokometer.util.errors import EngineError

__all__ = ["ENV_VAR", "binary_source", "checked_binary", "executable", "llama_server_version"]

ENV_VAR = "TOKOMETER_LLAMA_SERVER"


def executable(path: Path) -> bool:
    """An existing file this process may execute."""
    return path.is_file() and os.access(path, os.X_OK)


def checked_binary(path_text: str, origin: str = "the explicit path") -> str:
    """An explicitly given ``llama-server`` (a path, or a bare name looked up on PATH), resolved; EngineError
    if it is not an executable file (an explicit path never falls back to the lookup)."""
    path = Path(path_text).expanduser()
    if not path.is_absolute() and os.sep not in path_text:
        found = shutil.which(path_text)
        if found:
            return found
    if not executable(path):
        raise EngineError(f"llama-server from {origin} ({path_text}) is not an executable file: "
                          f"fix the path, or unset it to use the default lookup")
    return str(path.resolve())


def binary_source(path: str) -> str:
    """Where a found binary came from, in words, for the engine identity."""
    resolved = Path(path).resolve()
    if built_binary_path().exists() and resolved == built_binary_path().resolve():
        return "tokometer build (python -m tokometer.engines.build)"
    if os.environ.get(ENV_VAR) and resolved == Path(os.environ[ENV_VAR]).expanduser().resolve():
        return f"${ENV_VAR}"
    on_path = shutil.which("llama-server")
    if on_path and Path(on_path).resolve() == resolved:
        return "PATH"
    return "explicit path"


@functools.lru_cache(maxsize=8)
def llama_server_version(path: str) -> tuple[str, str]:
    """``llama-server --version`` as (version, built-with), e.g. ("0.6.0-dev (build 0, commit unknown)",
    "GNU 12.2.0 for Linux x86_64"); it prints them to stderr."""
    try:
        completed = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EngineError(f"{path} --version failed: {exc}; is it a llama.cpp server binary?") from exc
    lines = [line.strip() for line in (completed.stderr + completed.stdout).splitlines() if line.strip()]
    version = next((ln.removeprefix("version:").strip() for ln in lines if ln.startswith("version:")), "")
    built = next((ln.removeprefix("built with").strip() for ln in lines if ln.startswith("built with")), "")
    return (version or (lines[0] if lines else "unknown"), built)
