"""``--api-key`` on the simulator: every endpoint but ``GET /health`` wants ``Authorization: Bearer KEY``.

The generation endpoints check the key themselves (`authorized`), so that a refused request is
traced and answered in its protocol's error shape; `RequireKey` guards everything else: the
trace, the config, ``/metrics``, model lists and the tokenizer. ``/health`` stays open, as
load balancers and readiness checks call it without credentials. The key is read from the
current config at each request, so ``PATCH /sim/config`` (with the old key) can change it.
Every path also takes the key as Anthropic clients send it, in ``x-api-key`` (`presented`): their model
list and messages alike, as Anthropic's API does. A key
with non-ASCII characters matches whether its client sends it as UTF-8 or as Latin-1
(`tokometer.inbound.headers`).
"""

from __future__ import annotations

import hmac
from collections.abc import Collection

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from tokometer.inbound.headers import header_text
from tokometer.sim.state import SimState

__all__ = ["OPEN_PATHS", "RequireKey", "authorized", "presented"]

OPEN_PATHS = frozenset({"/health"})
REFUSAL = "Invalid API key (simulated): check the key you send."


def authorized(authorization: str | None, api_key: str | None) -> bool:
    """Whether an ``Authorization`` header value carries ``api_key`` (always, without a key)."""
    if api_key is None:
        return True
    expected = f"Bearer {api_key}".encode()
    return hmac.compare_digest(header_text(authorization or "").encode(), expected)


def presented(headers: Headers, path: str) -> str | None:
    """The credentials a request presents, as an ``Authorization`` value: that header, or else the
    ``x-api-key`` header (Anthropic's) as a bearer token. ``path`` is kept for callers that name it."""
    authorization = headers.get("authorization")
    if authorization is None and (key := headers.get("x-api-key")) is not None:
        return f"Bearer {key}"
    return authorization


class RequireKey:
    """Pure ASGI middleware: refuse (HTTP 401) requests without the key, but for ``skip`` paths."""

    def __init__(self, app: ASGIApp, state: SimState, skip: Collection[str]) -> None:
        self.app = app
        self.state = state
        self.skip = frozenset(skip) | OPEN_PATHS

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (scope["type"] == "http" and scope["path"] not in self.skip
                and not authorized(presented(Headers(scope=scope), scope["path"]), self.state.config.api_key)):
            body = {"error": {"message": REFUSAL, "type": "authentication_error"}}
            await JSONResponse(body, status_code=401)(scope, receive, send)
            return
        await self.app(scope, receive, send)
