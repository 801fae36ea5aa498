"""llama.cpp server's native API: ``POST /completion`` (``client``: bench's side; ``server``: the simulator's;
``timings``: the ``timings`` object it sends, which its OpenAI API sends too)."""

from __future__ import annotations

from typing import Any

from tokometer.protocols.common.protocol import ModelList, Protocol
from tokometer.protocols.llamacpp.client import LlamaCpp
from tokometer.protocols.llamacpp.request import COMPLETION_REQUEST
from tokometer.protocols.llamacpp.server import LlamaCppServer
from tokometer.util.jsontext import whole_number

__all__ = ["LLAMACPP", "slot_context"]


def _alias(data: Any) -> list[str] | None:
    """The one model of ``/props`` (``model_alias``, else ``model_path``)."""
    alias = (data.get("model_alias") or data.get("model_path")) if isinstance(data, dict) else None
    return [alias] if isinstance(alias, str) else None


def slot_context(props: Any) -> int | None:
    """The context window of one of llama-server's slots: ``default_generation_settings.n_ctx`` of its
    ``/props`` (a whole number of at least 1), else None."""
    settings = props.get("default_generation_settings") if isinstance(props, dict) else None
    return whole_number(settings.get("n_ctx"), 1) if isinstance(settings, dict) else None


LLAMACPP = Protocol("llama.cpp", LlamaCpp, LlamaCppServer,
                    model_list=ModelList("/props", _alias, at_root=True), serves_one_model=True,
                    detect=("/props", "default_generation_settings"), request=COMPLETION_REQUEST)
