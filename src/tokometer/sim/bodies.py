"""A simulator endpoint's request body read within the limits, and the error answers it sends.

The body is read as the gateway reads one (`tokometer.inbound`: a size cap, a whole-body deadline and an idle
deadline, a JSON object of bounded depth, the fields of its shape: the protocol's, or for the simulator's own
endpoints `TOKENIZE_REQUEST`, `DETOKENIZE_REQUEST` and `CONFIG_CHANGES`); an error goes in the shape of the
protocol the request spoke (its server's ``error_body``), or in OpenAI's for the simulator's own endpoints.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from tokometer.inbound.body import BodyTimeout, BodyTooLarge, discard_rest, read_body
from tokometer.inbound.jsonbody import BadBody, parse_object
from tokometer.inbound.request_limits import DEFAULT_LIMITS
from tokometer.inbound.shapes import Anything, Arr, Bool, FieldError, Map, Obj, Shape, Str, check
from tokometer.protocols.common.server import ProtocolServer
from tokometer.protocols.openai.request import CHAT_REQUEST, TOKEN_ID
from tokometer.sim.config import SimConfig

__all__ = ["CONFIG_CHANGES", "DETOKENIZE_REQUEST", "TOKENIZE_REQUEST", "checked", "error", "read", "read_json"]

TOKENIZE_REQUEST = Obj({"content": Str(), "prompt": Str(), "messages": CHAT_REQUEST.fields["messages"],
                        "add_special_tokens": Bool(), "model": Str("max_name_chars")})
"""``POST /tokenize``: vLLM's (``prompt`` or ``messages``) and llama.cpp's (``content``)."""
DETOKENIZE_REQUEST = Obj({"tokens": Arr(TOKEN_ID, says="an array"), "model": Str("max_name_chars")},
                         required=("tokens",))
"""``POST /detokenize``."""
CONFIG_CHANGES = Map(Anything(), "max_content_parts", Str("max_name_chars"), "an object of settings")
"""``PATCH /sim/config``: settings by name (each then checked by `SimConfig`)."""


async def read(request: Request, config: SimConfig) -> bytes | Response:
    """The body within the limits the gateway keeps too (`tokometer.inbound`), or the refusal to send."""
    try:
        return await read_body(request, config.max_body_bytes, config.body_timeout_s, "--max-body-bytes",
                               idle_timeout_s=config.body_idle_timeout_s)
    except BodyTooLarge as exc:
        await discard_rest(request)
        return JSONResponse({"error": {"message": str(exc), "type": "invalid_request_error"}}, status_code=413,
                            headers={"connection": "close"})
    except BodyTimeout as exc:
        return JSONResponse({"error": {"message": str(exc), "type": "invalid_request_error"}}, status_code=408,
                            headers={"connection": "close"})
    except ClientDisconnect:
        return Response(status_code=499)


async def read_json(request: Request, config: SimConfig, shape: Shape | None = None,
                    proto: ProtocolServer | None = None) -> dict[str, Any] | Response:
    """An endpoint's JSON object body (an empty body is ``{}``) of ``shape``, or the refusal to send (in
    ``proto``'s error shape)."""
    raw = await read(request, config)
    if isinstance(raw, Response):
        return raw
    try:
        return checked(parse_object(raw or b"{}"), shape)
    except BadBody as exc:
        return error(proto, 400, str(exc), "invalid_request_error")
    except FieldError as exc:
        return error(proto, 400, f"invalid request: {exc}", "invalid_request_error")


def checked(body: dict[str, Any], shape: Shape | None) -> dict[str, Any]:
    """``body``, if it fits ``shape`` within the simulator's limits (the gateway's defaults); else FieldError."""
    if shape is not None:
        check(shape, body, DEFAULT_LIMITS)
    return body


def error(proto: ProtocolServer | None, status: int, message: str, kind: str,
          headers: dict[str, str] | None = None) -> Response:
    """An error answer in ``proto``'s shape (OpenAI's where None)."""
    body = proto.error_body(status, message, kind) if proto else {"error": {"message": message, "type": kind}}
    return JSONResponse(body, status_code=status, headers=headers)
