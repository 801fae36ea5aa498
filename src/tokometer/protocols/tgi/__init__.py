"""Hugging Face TGI's native streaming API: ``POST /generate_stream`` (``client``: bench's side; ``server``: the
simulator's)."""

from __future__ import annotations

from typing import Any

from tokometer.protocols.common.protocol import ContextProbe, ModelList, Protocol
from tokometer.protocols.tgi.client import TGI
from tokometer.protocols.tgi.request import GENERATE_REQUEST
from tokometer.protocols.tgi.server import TgiServer
from tokometer.util.jsontext import whole_number

__all__ = ["TGI_GENERATE"]


def _model_id(data: Any) -> list[str] | None:
    """The one model of ``/info`` (``model_id``)."""
    return [data["model_id"]] if isinstance(data, dict) and isinstance(data.get("model_id"), str) else None


def _max_total_tokens(data: Any, model: str) -> int | None:
    """``max_total_tokens`` of ``/info`` (a whole number of at least 1)."""
    return whole_number(data.get("max_total_tokens"), 1) if isinstance(data, dict) else None


TGI_GENERATE = Protocol("TGI", TGI, TgiServer, model_list=ModelList("/info", _model_id, at_root=True),
                        serves_one_model=True, detect=("/info", "model_id"),
                        context=ContextProbe("/info", _max_total_tokens, "max_total_tokens in /info", at_root=True),
                        request=GENERATE_REQUEST)
