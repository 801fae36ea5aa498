"""Readiness: an engine is ready when it answers a real request, not when its port opens.

``wait_ready`` polls ``GET /v1/models`` (llama.cpp answers 503 while it loads the model, vLLM
refuses connections until its workers are up) and then sends one 1-token completion. While
waiting it watches the engine process: if that exits, the error (an ``EngineDied``) says how, a
signal by name, and quotes the tail of its log.
"""

from __future__ import annotations

import json
import time
from typing import Any, Protocol

from tokometer.engines.signals import died_error
from tokometer.util.blockinghttp import open_answer, read_whole
from tokometer.util.errors import EngineError
from tokometer.util.jsontext import loads
from tokometer.util.readbudget import answer_budget
from tokometer.util.shown import clipped

__all__ = ["MAX_ANSWER_BYTES", "http_json", "http_raw", "log_excerpt", "wait_ready"]

MAX_ANSWER_BYTES = 1 << 20  # /v1/models and a 1-token completion fit many times over


class _Watched(Protocol):
    name: str
    argv: list[str]

    def alive(self) -> bool: ...
    def exit_code(self) -> int | None: ...
    def log_tail(self, lines: int = 20) -> str: ...
    def mark_ready(self) -> None: ...


def http_raw(url: str, body: dict[str, Any] | None = None, timeout: float = 5.0,
             api_key: str | None = None) -> tuple[int, bytes]:
    """GET (or POST ``body`` as JSON) and return (status, body bytes), the whole answer within ``timeout``
    and its read budget (`util.blockinghttp`). Raises OSError if unreachable, too slow or too large."""
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    method = "POST" if body is not None else "GET"
    with open_answer(url, data, headers, timeout_s=timeout, method=method, budget=answer_budget(MAX_ANSWER_BYTES),
                     any_status=True) as response:
        return response.status, read_whole(response, MAX_ANSWER_BYTES)


def http_json(url: str, body: dict[str, Any] | None = None, timeout: float = 5.0,
              api_key: str | None = None) -> tuple[int, Any]:
    """Like ``http_raw`` but parse the body as JSON (None if it is not JSON)."""
    status, raw = http_raw(url, body, timeout, api_key)
    try:
        return status, loads(raw) if raw else None
    except ValueError:
        return status, None


def log_excerpt(process: _Watched, lines: int = 6, limit: int = 700) -> str:
    """The engine's last log lines as one line, for an error message."""
    tail = [line.strip() for line in process.log_tail(lines).splitlines() if line.strip()]
    text = " | ".join(tail) or "(the engine wrote nothing)"
    return text if len(text) <= limit else "…" + text[-limit:]


def _check_alive(process: _Watched | None, what: str) -> None:
    if process is not None and not process.alive():
        program = process.argv[0] if process.argv else ""
        raise died_error(process.name, process.exit_code(), what, log_excerpt(process), program)


def _models(root_url: str, api_key: str | None) -> list[str] | None:
    try:
        status, payload = http_json(f"{root_url}/v1/models", timeout=3.0, api_key=api_key)
    except OSError:
        return None
    if status != 200 or not isinstance(payload, dict) or not isinstance(payload.get("data"), list):
        return None
    return [str(item.get("id")) for item in payload["data"] if isinstance(item, dict) and item.get("id")]


def _answered(raw: bytes) -> bool:
    """A completion body with choices: one JSON object, or SSE events (some servers always stream)."""
    try:
        payload = loads(raw)
    except ValueError:
        return raw.lstrip().startswith(b"data:") and b'"choices"' in raw
    return isinstance(payload, dict) and bool(payload.get("choices"))


def _one_token(root_url: str, model: str, timeout: float, api_key: str | None) -> tuple[int, bytes]:
    completion = {"model": model, "prompt": "Hello", "max_tokens": 1, "temperature": 0, "stream": False}
    status, raw = http_raw(f"{root_url}/v1/completions", completion, timeout=timeout, api_key=api_key)
    if status in (404, 405):  # some engines only speak chat
        chat = {"model": model, "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 1}
        status, raw = http_raw(f"{root_url}/v1/chat/completions", chat, timeout=timeout, api_key=api_key)
    return status, raw


def wait_ready(root_url: str, process: _Watched | None, timeout_s: float, model: str | None = None,
               poll_s: float = 0.2, api_key: str | None = None) -> str:
    """Block until the engine at ``root_url`` lists a model and completes one token; return the model id.
    The process (if given) is stamped ready (`mark_ready`) the moment that token's answer is in.

    Raises EngineError if the process exits first or ``timeout_s`` passes (with its log tail).
    """
    name = process.name if process is not None else "the engine"
    deadline = time.monotonic() + timeout_s
    models: list[str] | None = None
    while models is None:
        _check_alive(process, "while starting")
        models = _models(root_url, api_key)
        if not models:
            models = None
            if time.monotonic() > deadline:
                tail = f"; its log ends: {log_excerpt(process)}" if process is not None else ""
                raise EngineError(f"{name} did not answer GET {root_url}/v1/models within {timeout_s:.0f} s{tail}; "
                                  "raise the start-up timeout if the model is large")
            time.sleep(poll_s)
    chosen = model if model and model in models else models[0]
    last = ""
    while True:
        _check_alive(process, "on its first request")
        try:
            status, raw = _one_token(root_url, chosen, max(1.0, deadline - time.monotonic()), api_key)
            if status == 200 and _answered(raw):
                if process is not None:
                    process.mark_ready()  # the end of its start-up time (`tokometer.engines.startup`)
                return chosen
            last = f"HTTP {status}: {clipped(raw.decode(errors='replace'))}"
            if 400 <= status < 500 and status not in (408, 429):  # the request itself is refused: waiting won't help
                raise EngineError(f"{name} lists model {chosen!r} but refused a 1-token completion ({last})")
        except OSError as exc:
            last = str(exc)
        if time.monotonic() > deadline:
            tail = f"; its log ends: {log_excerpt(process)}" if process is not None else ""
            raise EngineError(f"{name} lists model {chosen!r} but a 1-token completion failed ({last}){tail}")
        time.sleep(poll_s)
