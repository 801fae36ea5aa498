"""A simulator endpoint's request body read within the limits, and the error answers it sends.

The body is read as the gateway reads one (`tokometer.inbound`: a size cap, a whole-body deadline and an idle
deadline); an error goes in the shape of the protocol the request spoke (its server's ``error_body``), or in
OpenAI's for the simulator's own endpoints.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from tokometer.inbound.body import BodyTimeout, BodyTooLarge, discard_rest, read_body
from tokometer.inbound.jsonbody import BadBody, parse_object
from tokometer.protocols.common.server import ProtocolServer
from tokometer.sim.config import SimConfig

__all__ = ["error", "read", "read_json"]


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


async def read_json(request: Request, config: SimConfig) -> dict[str, Any] | Response:
    """An endpoint's JSON object body (an empty body is ``{}``), or the refusal to send."""
    raw = await read(request, config)
    if isinstance(raw, Response):
        return raw
    try:
        return parse_object(raw or b"{}")
    except BadBody as exc:
        return error(None, 400, str(exc), "invalid_request_error")


def error(proto: ProtocolServer | None, status: int, message: str, kind: str) -> Response:
    """An error answer in ``proto``'s shape (OpenAI's where None)."""
    body = proto.error_body(status, message, kind) if proto else {"error": {"message": message, "type": kind}}
    return JSONResponse(body, status_code=status)
