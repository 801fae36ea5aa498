"""llama.cpp server's native API: ``POST /completion`` (``client``: bench's side; ``server``: the simulator's;
``timings``: the ``timings`` object it sends, which its OpenAI API sends too)."""

from __future__ import annotations

from typing import Any

from tokometer.protocols.common.protocol import ModelList, Protocol
from tokometer.protocols.llamacpp.client import LlamaCpp
from tokometer.protocols.llamacpp.request import COMPLETION_REQUEST
from tokometer.protocols.llamacpp.server import LlamaCppServer

__all__ = ["LLAMACPP"]


def _alias(data: Any) -> list[str] | None:
    """The one model of ``/props`` (``model_alias``, else ``model_path``)."""
    alias = (data.get("model_alias") or data.get("model_path")) if isinstance(data, dict) else None
    return [alias] if isinstance(alias, str) else None


LLAMACPP = Protocol("llama.cpp", LlamaCpp, LlamaCppServer,
                    model_list=ModelList("/props", _alias, at_root=True), serves_one_model=True,
                    detect=("/props", "default_generation_settings"), request=COMPLETION_REQUEST)
