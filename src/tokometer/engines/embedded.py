"""Starting the embedded engine: ``start_llamacpp``, llama.cpp's server found by the normal lookup, then launched.

The lookup (`tokometer.engines.binary`) may build the server and smoke-run it, and the smoke run
launches a binary through `tokometer.engines.llamacpp`; this module sits above both, so neither
imports the other's caller.
"""

from __future__ import annotations

from tokometer.engines.binary import find_llama_server
from tokometer.engines.handle import EngineHandle
from tokometer.engines.llamacpp import LlamaCppSettings, checked_model, launch_llamacpp

__all__ = ["start_llamacpp"]


def start_llamacpp(settings: LlamaCppSettings) -> EngineHandle:
    """Start ``llama-server`` and block until it completes a 1-token request; raise EngineError on failure.

    Nothing is left running if this raises (or is interrupted): the engine's process group is stopped.
    """
    model, meta = checked_model(settings)  # a bad model file is said first, whatever the binary
    return launch_llamacpp(find_llama_server(settings.binary), model, meta, settings)
