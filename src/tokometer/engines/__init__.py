"""Engine launchers: the embedded llama.cpp server (the default), vLLM and Ollama.

Each launcher starts an engine with sane settings, waits until it answers a real request and
returns an ``EngineHandle`` (URL, model name, identity, ``stop()``); nothing it started outlives
the handle. ``python -m tokometer.engines.build`` builds llama.cpp's server from source.

    from tokometer.engines import LlamaCppSettings, start_llamacpp
    with start_llamacpp(LlamaCppSettings()) as engine:
        ...  # send requests to engine.openai_url with model=engine.model
"""

from __future__ import annotations

from tokometer.bundled import bundled_model_path
from tokometer.engines.binary import find_llama_server
from tokometer.engines.embedded import start_llamacpp
from tokometer.engines.handle import EngineHandle
from tokometer.engines.llamacpp import LlamaCppSettings

__all__ = [
    "EngineHandle",
    "LlamaCppSettings",
    "bundled_model_path",
    "find_llama_server",
    "start_llamacpp",
]
