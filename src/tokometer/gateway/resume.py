"""Carrying on an answer that has started: continuation and mid-stream resume share one request.

Two situations ask an upstream to carry on an answer from the text so far:

- **continuation** (route option ``continue_on_length``): the upstream stopped at its own length
  limit (``finish_reason="length"``) before the client's ``max_tokens``; the same upstream continues.
- **resume** (``resume_midstream``): the serving upstream failed after content reached the client
  (connection reset, the stream closed before its ending, silence past ``idle_timeout_s``, an error
  event or an unparseable event in the stream); the next available upstream continues.

Both send `carry_on_body`: for a chat, the client's messages plus the answer so far as an assistant
message with ``continue_final_message`` (vLLM, SGLang; llama.cpp's and Ollama's chat endpoints
continue a trailing assistant message as a prefill, and text-only protocols get it appended to the
joined prompt); for a completion, the prompt plus the text so far. ``max_tokens`` is what is left
of the client's.

Once a second segment streams, the relay writes the chunks itself (even for an OpenAI upstream whose
bytes it relayed until then), with the ``id``, ``created`` and ``model`` the client has already seen
(`stream_identity`), so that the client reads one answer with one ending and one usage.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tokometer.protocols.common.framing import sse_payload
from tokometer.util.jsontext import loads, whole_number

if TYPE_CHECKING:
    from tokometer.gateway.config import RouteConfig
    from tokometer.protocols.gateway_clients import Endpoint

__all__ = ["carry_on_body", "client_max_tokens", "resume_enabled", "stream_identity"]


def resume_enabled(route: RouteConfig) -> bool:
    """``resume_midstream``, whose default (unset) is on for a route with a fallback upstream."""
    if route.resume_midstream is not None:
        return route.resume_midstream
    return len(route.upstreams) > 1


def client_max_tokens(body: Mapping[str, Any]) -> int | None:
    """The answer's token limit in the request as it goes upstream (after any capping), if any."""
    value = body.get("max_completion_tokens", body.get("max_tokens"))
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def carry_on_body(body: Mapping[str, Any], endpoint: Endpoint, text: str, left: int | None) -> dict[str, Any]:
    """The request that carries on the answer ``text`` to ``body``, with ``left`` tokens still to come
    (None: the client set no limit, none is sent)."""
    out = dict(body)
    out.pop("max_completion_tokens", None)
    out.pop("max_tokens", None)
    if left is not None:
        out["max_tokens"] = left
    if endpoint == "chat":
        out["messages"] = [*body.get("messages", []), {"role": "assistant", "content": text}]
        out["continue_final_message"] = True
        out["add_generation_prompt"] = False
    else:
        out["prompt"] = str(body.get("prompt", "")) + text
    return out


def stream_identity(raw: bytes) -> tuple[str | None, int | None, str | None]:
    """The ``id``, ``created`` (a whole number of seconds) and ``model`` of one OpenAI stream event (None where
    missing or of another kind)."""
    payload = sse_payload(raw)
    try:
        data = loads(payload) if payload else None
    except ValueError:
        data = None
    if not isinstance(data, dict):
        return None, None, None
    ident, created, model = data.get("id"), data.get("created"), data.get("model")
    return (ident if isinstance(ident, str) else None, whole_number(created),
            model if isinstance(model, str) else None)
