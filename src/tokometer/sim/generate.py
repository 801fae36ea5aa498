"""The simulator's protocol endpoints: one request admitted, its answer's length decided, its stream started.

`generate` answers every path of `tokometer.sim.servers.SERVERS`. It stamps the request into the send trace,
admits it (`_admit`: the key, the body within its limits, its fields within the protocol's request shape
(`tokometer.sim.servers.REQUESTS`), the protocol's reading of it, the scripted faults
that answer at once), decides the answer's length and finish (`_length`: the context window, ``max_tokens``,
the script's natural length, the server's own cap) and hands it to a stream: the scheduler's (`EngineStream`)
when a performance model drives the simulator, else the script's (`ScriptedStream`).
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from tokometer.inbound.jsonbody import BadBody, parse_object
from tokometer.protocols.common.server import ProtocolServer, RequestInfo
from tokometer.sim.adapters import not_served, refusal
from tokometer.sim.auth import REFUSAL, authorized, presented
from tokometer.sim.bodies import checked, error, read
from tokometer.sim.config import SimConfig
from tokometer.sim.prefixcache import block_hashes, prompt_words
from tokometer.sim.servers import REQUESTS, SERVERS, count_words
from tokometer.sim.state import SimState
from tokometer.sim.streams import EngineStream, ScriptedStream
from tokometer.sim.trace import SendTrace

__all__ = ["generate"]

_ERRORS: dict[str, tuple[int, str, str]] = {
    "http_400": (400, "invalid request: simulated bad request", "invalid_request_error"),
    "http_401": (401, "Incorrect API key provided (simulated). Check the API key you send.", "authentication_error"),
    "http_403": (403, "Access denied for this key or region (simulated).", "permission_error"),
    "http_429": (429, "Rate limit reached for requests (simulated). Retry later.", "rate_limit_error"),
    "http_500": (500, "Internal server error (simulated).", "server_error"),
    "http_503": (503, "Service unavailable: the model is overloaded (simulated).", "server_error"),
}


async def generate(request: Request) -> Response | ScriptedStream | EngineStream:
    """Answer one request to a protocol endpoint: an error, or the stream (or whole answer) it asked for."""
    state: SimState = request.app.state.sim
    received_ns = request.scope.get("tokometer.arrival_ns") or time.perf_counter_ns()
    config = state.config  # read once: PATCH /sim/config may change it between requests
    proto = SERVERS[request.url.path]
    seq, fault = state.next_request()
    trace = SendTrace(seq=seq, path=request.url.path, fault=fault, received_ns=received_ns)
    state.trace.add(trace)
    admitted = await _admit(request, state, config, proto, trace)
    if isinstance(admitted, Response):
        return _refused(trace, admitted)
    body, info = admitted
    if (unknown := refusal(info.model, config.model, config.lora)) is not None:
        return _refused(trace, not_served(proto, unknown))
    if config.lora is not None and info.model in config.lora.names:
        trace.adapter = info.model
    length = _length(config, proto, info, fault)
    if isinstance(length, Response):
        return _refused(trace, length)
    n_tokens, finish = length
    info.id = f"cmpl-sim-{seq}"
    info.created = int(time.time())
    trace.prompt_tokens = info.prompt_tokens
    trace.finish = finish
    if state.engine is not None:
        blocks = block_hashes(prompt_words(body)) if state.engine.prefix_cache is not None else ()
        return EngineStream(state, proto, info, trace, n_tokens, finish, blocks=blocks)
    cached = config.prefix_cache_speedup > 1 and state.seen_before(trace.body_digest)
    trace.adapter_loaded = trace.adapter is not None and state.adapters is not None and state.adapters.use(
        trace.adapter)
    return ScriptedStream(state, proto, info, trace, n_tokens, finish,
                          ttft_factor=1 / config.prefix_cache_speedup if cached else 1.0,
                          ttft_extra_ms=config.lora.switch_ms if trace.adapter_loaded and config.lora else 0.0)


def _refused(trace: SendTrace, answer: Response) -> Response:
    """``answer``, an error, with its status in the trace."""
    trace.status = answer.status_code
    return answer


async def _admit(request: Request, state: SimState, config: SimConfig, proto: ProtocolServer,
                 trace: SendTrace) -> tuple[dict[str, Any], RequestInfo] | Response:
    """The request's body and the protocol's reading of it, or the error answer (the key, the body, a fault)."""
    if not authorized(presented(request.headers, request.url.path), config.api_key):
        return error(proto, 401, REFUSAL, "authentication_error")
    raw = await read(request, config)
    if isinstance(raw, Response):
        return raw
    trace.body_digest = hashlib.blake2b(raw, digest_size=6).hexdigest()
    if state.config.trace_bodies:
        trace.body = raw[:65536].decode("utf-8", "replace")
    try:
        body = checked(parse_object(raw), REQUESTS.get(request.url.path))
        info = proto.read(body, config.model, count_words)
    except BadBody as exc:
        return error(proto, 400, str(exc), "invalid_request_error")
    except ValueError as exc:
        return error(proto, 400, f"invalid request: {exc}", "invalid_request_error")
    if config.reject_stream_options and info.sent_stream_options:
        return error(proto, 400, "Unrecognized request argument supplied: stream_options", "invalid_request_error")
    if trace.fault in _ERRORS:
        status, message, kind = _ERRORS[trace.fault]
        wait = config.retry_after_s if status in (429, 503) else None
        return error(proto, status, message, kind, None if wait is None else {"retry-after": str(wait)})
    return body, info


def _length(config: SimConfig, proto: ProtocolServer, info: RequestInfo, fault: str) -> tuple[int, str] | Response:
    """(tokens, finish reason) of the answer, or the context-length error; a prompt too long for the context
    is cut instead where ``truncate_context`` says (the usage then says so)."""
    max_tokens = info.max_tokens if info.max_tokens is not None else config.default_max_tokens
    too_long = info.prompt_tokens + max_tokens > config.max_context
    if too_long and config.truncate_context and fault != "http_400_context_length":
        info.prompt_tokens = max(1, config.max_context - max_tokens)  # cut silently; usage says so
        too_long = False
    if fault == "http_400_context_length" or too_long:
        message = (f"This model's maximum context length is {config.max_context} tokens. However, you requested "
                   f"{info.prompt_tokens + max_tokens} tokens ({info.prompt_tokens} in the messages, "
                   f"{max_tokens} in the completion). Please reduce the length of the messages or completion.")
        return error(proto, 400, message, "invalid_request_error")
    natural = config.output_tokens
    if info.ignore_eos or natural is None or natural > max_tokens:
        n_tokens, finish = max_tokens, "length"
    else:
        n_tokens, finish = natural, "stop"
    if config.max_output_tokens is not None and n_tokens > config.max_output_tokens:
        n_tokens, finish = config.max_output_tokens, "length"
    return n_tokens, finish
