"""The simulator's embeddings and rerank endpoints: ``POST /v1/embeddings`` and ``POST /v1/rerank``.

One JSON answer per request, after the modelled time of a prefill-only pass (nothing is decoded):

- scripted timing (no ``--hardware``): every request takes ``ttft_ms`` (the scripted prefill), whatever its
  size, and requests do not wait for each other;
- modelled timing (``--hardware``): one pass at a time (a compute-bound prefill gains nothing from running
  beside another), each taking `tokometer.perf.embedding_pass_s` for its inputs (× ``time_scale``), so
  that requests queue under load as on a real server.

Inputs are counted in words (`tokometer.sim.servers.count_words`); an input longer than ``max_context``
is refused (HTTP 400, as vLLM does). Each embedding is 64 numbers made from a hash of its text (the same
text, the same vector), each rerank score a number in [0, 1] made the same way: they mean nothing. The
trace (``GET /sim/trace``) records each request: arrival, when its answer was written (``end_ns``), its
input tokens.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import struct
import time
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from tokometer.inbound.request_limits import DEFAULT_LIMITS
from tokometer.protocols.embeddings import EMBEDDINGS, RERANK
from tokometer.sim.config import SimConfig
from tokometer.sim.servers import count_words
from tokometer.sim.state import SimState
from tokometer.sim.trace import SendTrace
from tokometer.util.clock import PRECISE_SPIN_NS, sleep_until

__all__ = ["DIMENSIONS", "MAX_INPUTS", "embedding_routes"]

DIMENSIONS = 64
"""Numbers in each simulated embedding."""

MAX_INPUTS = DEFAULT_LIMITS.max_inputs
"""The most inputs (or documents) one request may carry."""

ReadBody = Callable[..., Any]
"""`tokometer.sim.bodies.read_json`: (request, config, shape) -> the body, or the refusal."""


def embedding_routes(state: SimState, read_json: ReadBody) -> list[Route]:
    """The two routes, sharing ``state``; ``read_json`` reads a body within the simulator's limits."""
    lock = asyncio.Lock()
    pass_s = _pass_time(state.config)

    async def serve(request: Request, rerank: bool) -> Response:
        received_ns = request.scope.get("tokometer.arrival_ns") or time.perf_counter_ns()
        config = state.config
        seq, fault = state.next_request()
        trace = SendTrace(seq=seq, path=request.url.path, fault=fault, received_ns=received_ns)
        state.trace.add(trace)
        body = await read_json(request, config, (RERANK if rerank else EMBEDDINGS).request)
        if isinstance(body, Response):
            trace.status = body.status_code
            return body
        try:
            texts, query = _inputs(body, rerank)
        except ValueError as exc:
            trace.status = 400
            return _error(400, f"invalid request: {exc}")
        counts = [count_words(t) for t in texts]
        extra = count_words(query) if query is not None else 0
        if (longest := max(counts) + extra) > config.max_context:
            trace.status = 400
            return _error(400, f"This model's maximum context length is {config.max_context} tokens. However, "
                               f"an input has {longest} tokens.")
        tokens = sum(counts) + extra * len(texts)
        trace.prompt_tokens = tokens
        # sleep_until, not asyncio.sleep: the loop's millisecond timers may fire early (a 40 ms request served in 39.9)
        spin = PRECISE_SPIN_NS if config.precise else 0
        if pass_s is None:
            await sleep_until(received_ns + int(config.ttft_ms * 1e6), spin)
        else:
            async with lock:
                pass_ns = pass_s(len(texts), round(tokens / len(texts))) * config.time_scale * 1e9
                await sleep_until(time.perf_counter_ns() + int(pass_ns), spin)
        answer = _rerank_answer(texts, config.model, tokens) if rerank else _embedding_answer(texts, config.model,
                                                                                              tokens)
        trace.finish = "stop"
        return _Traced(answer, trace)

    async def embeddings(request: Request) -> Response:
        return await serve(request, rerank=False)

    async def rerank(request: Request) -> Response:
        return await serve(request, rerank=True)

    return [Route("/v1/embeddings", embeddings, methods=["POST"]), Route("/v1/rerank", rerank, methods=["POST"])]


class _Traced(JSONResponse):
    """A JSON answer that stamps the trace as its head, and then its body, are handed to the server to write."""

    def __init__(self, content: Any, trace: SendTrace) -> None:
        super().__init__(content)
        self.trace = trace

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def stamped(message: Message) -> None:
            if message["type"] == "http.response.start":
                self.trace.headers_ns = time.perf_counter_ns()
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                self.trace.end_ns = time.perf_counter_ns()
            await send(message)

        await super().__call__(scope, receive, stamped)


def _pass_time(config: SimConfig) -> Callable[[int, int], float] | None:
    """Seconds of one pass over N inputs of T tokens each on the modelled deployment (None: scripted)."""
    if not config.modelled:
        return None
    from tokometer.perf import Deployment, Efficiency, embedding_pass_s
    from tokometer.sim.steptime import deployment_for

    d = deployment_for(config)
    assert isinstance(d, Deployment)
    efficiency = Efficiency()
    return lambda inputs, tokens_each: embedding_pass_s(d, inputs, tokens_each, efficiency)


def _inputs(body: dict[str, Any], rerank: bool) -> tuple[list[str], str | None]:
    """The texts of a request (an embeddings ``input``, or a rerank's ``documents``) and a rerank's query."""
    value = body.get("documents" if rerank else "input")
    texts = [value] if isinstance(value, str) else value
    what = "'documents'" if rerank else "'input'"
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        raise ValueError(f"{what} must be a string or a non-empty list of strings")
    if len(texts) > MAX_INPUTS:
        raise ValueError(f"{what} has {len(texts)} items, more than the {MAX_INPUTS} one request may carry")
    query = body.get("query") if rerank else None
    if rerank and not isinstance(query, str):
        raise ValueError("'query' must be a string")
    return texts, query


def _unit(text: str, n: int) -> list[float]:
    """``n`` numbers in [0, 1) from a hash of ``text``."""
    out: list[float] = []
    block = 0
    while len(out) < n:
        digest = hashlib.blake2b(f"{block}:{text}".encode(), digest_size=64).digest()
        out.extend(v / 2**32 for v in struct.unpack("<16I", digest))
        block += 1
    return out[:n]


def _embedding_answer(texts: list[str], model: str, tokens: int) -> dict[str, Any]:
    data = []
    for index, text in enumerate(texts):
        values = [v - 0.5 for v in _unit(text, DIMENSIONS)]
        norm = math.sqrt(sum(v * v for v in values)) or 1.0
        data.append({"index": index, "object": "embedding", "embedding": [round(v / norm, 6) for v in values]})
    return {"object": "list", "model": model, "data": data,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


def _rerank_answer(texts: list[str], model: str, tokens: int) -> dict[str, Any]:
    scores = [(round(_unit(text, 1)[0], 6), index) for index, text in enumerate(texts)]
    results = [{"index": index, "document": {"text": texts[index]}, "relevance_score": score}
               for score, index in sorted(scores, reverse=True)]
    return {"id": "rerank-sim", "model": model, "results": results, "usage": {"total_tokens": tokens}}


def _error(status: int, message: str) -> Response:
    return JSONResponse({"error": {"message": message, "type": "invalid_request_error"}}, status_code=status)

