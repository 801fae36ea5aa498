"""OpenAI's chat completions and (legacy) completions: two protocols, one package.

They share everything but the request's prompt field: the SSE chunks and ``[DONE]`` (`chunks`), the client's
base class (`client`), the simulator's server base (`server`), the gateway's writer (`writer`), the error
shape (`errors`) and the checks of a request a server reads (`request`). The gateway's internal request is
this shape, so neither has a translation.
"""

from __future__ import annotations

from typing import Any

from tokometer.protocols.common.protocol import ContextProbe, ModelList, Protocol, ids_of
from tokometer.protocols.openai.client import OpenAIChat, OpenAICompletions
from tokometer.protocols.openai.request import CHAT_REQUEST, COMPLETIONS_REQUEST
from tokometer.protocols.openai.server import OpenAIChatServer, OpenAICompletionsServer
from tokometer.protocols.openai.writer import gateway_writer
from tokometer.util.jsontext import whole_number

__all__ = ["CHAT", "COMPLETIONS", "MODELS", "OPENAI_CONTEXT"]

MODELS = ModelList("/models", ids_of)
"""``GET {base}/models``: ``{"data": [{"id": ...}]}``, as every OpenAI-compatible server lists its models."""


def _max_model_len(data: Any, model: str) -> int | None:
    """vLLM's ``max_model_len`` of ``model``'s entry in ``/v1/models`` (a whole number of at least 1)."""
    entries = data.get("data") if isinstance(data, dict) else None
    for entry in entries if isinstance(entries, list) else ():
        if isinstance(entry, dict) and entry.get("id") == model \
                and (length := whole_number(entry.get("max_model_len"), 1)) is not None:
            return length
    return None


OPENAI_CONTEXT = ContextProbe("/models", _max_model_len, "max_model_len in /v1/models")

_FACTS: dict[str, Any] = dict(vendor="OpenAI", family="openai", base_path="/v1", model_list=MODELS,
                              picks_first_model=True, context=OPENAI_CONTEXT, asks_stream_usage=True,
                              gateway_native=True, logprobs=True, writer=gateway_writer)

CHAT = Protocol(client=OpenAIChat, server=OpenAIChatServer, detect=("/v1/models", "data"),
                takes_media=True, chat=True, request=CHAT_REQUEST, **_FACTS)
COMPLETIONS = Protocol(client=OpenAICompletions, server=OpenAICompletionsServer,
                       takes_token_ids=True, request=COMPLETIONS_REQUEST, **_FACTS)
