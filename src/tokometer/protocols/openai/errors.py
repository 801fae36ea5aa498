"""OpenAI's error shape: ``{"error": {...}}`` as a body (`error_body`) and as an event
inside a stream (`error_event`)."""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["error_body", "error_event"]

def error_body(message: str, kind: str = "server_error", code: str | int | None = None,
               param: str | None = None) -> dict[str, Any]:
    """``{"error": {...}}`` as OpenAI sends it."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def error_event(message: str, kind: str = "server_error", code: str | int | None = None) -> bytes:
    """An error reported inside a stream that has started (vLLM sends the error object as an event)."""
    return b"data: " + orjson.dumps(error_body(message, kind, code)) + b"\n\n"
