"""Ollama: make sure the daemon answers and has the model, then wait until it serves a token.

If nothing answers at the URL (default ``http://127.0.0.1:11434``, or ``$OLLAMA_HOST``) and the
``ollama`` command is on PATH, we start ``ollama serve`` ourselves and stop it on exit; a daemon
that was already running is left alone. A missing model is pulled through the HTTP API
(``POST /api/pull``, NDJSON progress), not the CLI, so a remote daemon works the same way.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

from tokometer.engines.handle import EngineHandle
from tokometer.engines.identity import host_identity
from tokometer.engines.process import EngineProcess
from tokometer.engines.ready import http_json, log_excerpt, wait_ready
from tokometer.util.blockinghttp import open_answer
from tokometer.util.errors import EngineError
from tokometer.util.jsontext import loads_object, whole_number
from tokometer.util.shown import clipped, quoted

__all__ = ["default_ollama_url", "pull_model", "start_ollama"]

_PULL_TIMEOUT_S = 4 * 3600.0
"""The deadline of a whole pull (tens of GB on a slow link), however its progress trickles."""
_PULL_BUDGET_BYTES = 64 * 1024 * 1024
"""The read budget of a pull's NDJSON progress (a line of ~150 bytes a few times a second for hours)."""
_PULL_LINE_BYTES = 64 * 1024


def default_ollama_url() -> str:
    """``$OLLAMA_HOST`` as a URL, else ``http://127.0.0.1:11434``."""
    host = os.environ.get("OLLAMA_HOST", "").strip()
    if not host:
        return "http://127.0.0.1:11434"
    url = host if "://" in host else "http://" + host
    try:
        parsed = urllib.parse.urlsplit(url)
        port = parsed.port or 11434
    except ValueError:  # a port that is not a number, or past 65535; a bracket not closed
        raise EngineError(f"$OLLAMA_HOST is {quoted(host)}: give HOST[:PORT] (e.g. 127.0.0.1:11434), or unset "
                          "it") from None
    if parsed.scheme not in ("http", "https"):
        raise EngineError(f"$OLLAMA_HOST is {quoted(host)}: its scheme must be http or https, or leave it out")
    return f"{parsed.scheme}://{_host_port(parsed.hostname, port)}"


def _host_port(host: str | None, port: int) -> str:
    """``HOST:PORT`` as a URL and Ollama spell it: an IPv6 host in brackets, no host the loopback."""
    name = host or "127.0.0.1"
    return f"[{name}]:{port}" if ":" in name else f"{name}:{port}"


def _version(root: str) -> str | None:
    """The daemon's version, "unknown" if it answers /api/tags but not /api/version, None if nothing answers."""
    for path in ("/api/version", "/api/tags"):
        try:
            status, payload = http_json(f"{root}{path}", timeout=2.0)
        except OSError:
            return None
        if status == 200 and isinstance(payload, dict):
            return str(payload.get("version", "unknown"))
    return None


def _local_model(root: str, model: str) -> dict[str, Any] | None:
    status, payload = http_json(f"{root}/api/tags", timeout=10.0)
    if status != 200 or not isinstance(payload, dict):
        raise EngineError(f"{root}/api/tags answered HTTP {status}: is this an Ollama server?")
    wanted = {model, f"{model}:latest"}
    models = payload.get("models", [])
    if not isinstance(models, list):
        raise EngineError(f"{root}/api/tags answered 'models' that is not a list: is this an Ollama server?")
    for entry in models:
        if isinstance(entry, dict) and (entry.get("name") in wanted or entry.get("model") in wanted):
            return entry
    return None


def pull_model(root: str, model: str, progress: Callable[[str], None]) -> None:
    """``POST /api/pull`` and follow its NDJSON progress until ``success``; EngineError on an error line. The
    whole pull is read within its deadline and read budget, line by line (`util.blockinghttp`)."""
    body = json.dumps({"model": model, "stream": True}).encode()
    try:
        with open_answer(f"{root}/api/pull", body, {"Content-Type": "application/json"}, method="POST",
                         timeout_s=_PULL_TIMEOUT_S, budget=_PULL_BUDGET_BYTES, any_status=True) as response:
            if response.status != 200:
                detail = response.read(200).decode(errors="replace")
                raise EngineError(f"ollama could not pull {model!r}: HTTP {response.status} {detail}")
            if _follow_pull(response, model, progress):
                return
    except (OSError, ValueError) as exc:
        raise EngineError(f"pulling {model!r} from {root} failed: {exc}") from exc
    raise EngineError(f"ollama's pull of {model!r} ended without 'success'; try `ollama pull {model}`")


def _follow_pull(response: Any, model: str, progress: Callable[[str], None]) -> bool:
    """Read a pull's progress lines until ``success`` (True) or the end (False)."""
    last_report = 0.0
    for raw in iter(lambda: response.readline(_PULL_LINE_BYTES), b""):
        if not raw.endswith(b"\n") and len(raw) >= _PULL_LINE_BYTES:
            raise EngineError(f"ollama's pull of {model!r} sent a progress line longer than "
                              f"{_PULL_LINE_BYTES // 1024} KiB: is this an Ollama server?")
        if not raw.strip():
            continue
        event = loads_object(raw, f"a progress line of ollama's pull of {model!r}")
        if event.get("error"):
            raise EngineError(f"ollama could not pull {model!r}: {clipped(str(event['error']))}; check the name at "
                              "https://ollama.com/library")
        status = str(event.get("status", ""))[:200]
        if status == "success":
            return True
        now = time.monotonic()
        total, completed = whole_number(event.get("total")), whole_number(event.get("completed")) or 0  # bytes
        if total and now - last_report > 2.0:
            last_report = now
            progress(f"{status}: {100 * min(completed / total, 1.0):.0f} %")
        elif not total:
            progress(status)
    return False




def _start_daemon(root: str, timeout_s: float, progress: Callable[[str], None]) -> EngineProcess:
    exe = shutil.which("ollama")
    if exe is None:
        raise EngineError(f"Ollama is not running at {root} and `ollama` is not on PATH: install it from "
                          "https://ollama.com and start `ollama serve`, or pass the daemon's URL")
    progress(f"no Ollama daemon at {root}: starting `{exe} serve`")
    parsed = urllib.parse.urlsplit(root)
    env = {**os.environ, "OLLAMA_HOST": _host_port(parsed.hostname, parsed.port or 11434)}
    process = EngineProcess([exe, "serve"], "ollama", env=env)
    deadline = time.monotonic() + timeout_s
    while _version(root) is None:
        if not process.alive() or time.monotonic() > deadline:
            process.stop()
            raise EngineError(f"`ollama serve` did not come up at {root}; its log ends: {log_excerpt(process)}")
        time.sleep(0.2)
    return process


def start_ollama(model: str, url: str | None = None, *, pull: bool = True, ready_timeout_s: float = 300.0,
                 progress: Callable[[str], None] = lambda _: None) -> EngineHandle:
    """Ensure an Ollama daemon with ``model`` answers a 1-token request; return its handle.

    ``stop()`` on the handle stops the daemon only if we started it.
    """
    root = (url or default_ollama_url()).rstrip("/")
    process = None
    version = _version(root)
    if version is None:
        process = _start_daemon(root, 60.0, progress)
        version = _version(root) or "?"
    try:
        entry = _local_model(root, model)
        if entry is None:
            if not pull:
                raise EngineError(f"model {model!r} is not in Ollama at {root}: run `ollama pull {model}` "
                                  "or leave out --no-pull")
            progress(f"pulling {model} (POST {root}/api/pull)")
            pull_model(root, model, progress)
            entry = _local_model(root, model) or {}
        name = wait_ready(root, process, ready_timeout_s, model=str(entry.get("name", model)))
        details = entry.get("details", {}) if isinstance(entry.get("details"), dict) else {}
        identity = {"engine": "ollama", "engine_version": version, "model": name, "model_digest": entry.get("digest"),
                    "model_size_bytes": entry.get("size"), "quantization": details.get("quantization_level"),
                    "parameter_size": details.get("parameter_size"), "family": details.get("family"),
                    "daemon_started_by_tokometer": process is not None, "url": root, "host": host_identity()}
    except BaseException:
        if process is not None:
            process.stop()
        raise
    return EngineHandle(root, name, identity, process)
