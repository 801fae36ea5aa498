"""Embeddings and rerank: one JSON request, one JSON answer, no stream (client side).

- ``openai-embeddings``: ``POST {base}/embeddings`` with ``input`` a list of texts (one per input of the
  batch); the answer's ``data`` holds one ``{"index": I, "embedding": [floats]}`` per input, and ``usage``
  its ``prompt_tokens``. vLLM serves it for a model started with ``--runner pooling``; so does OpenAI.
- ``rerank``: ``POST {base}/rerank`` (Cohere's and Jina's shape, which vLLM serves for a classification
  model) with a ``query`` and ``documents`` (the inputs of the batch); the answer's ``results`` hold one
  ``{"index": I, "relevance_score": S}`` per document, ``usage`` its ``total_tokens`` (vLLM: the query and
  document tokens of every pair). The query is one fixed short sentence (`RERANK_QUERY`): the inputs are
  the documents, which is what the input length and batch size set.

The whole body is one event (framing ``json``): there is no first token, so an answer has no TTFT, TPOT
or ITL; its latency is the full response time. The parser checks the answer's shape, not its values'
meaning: one result per input (the count goes in ``ParsedEvent.items`` and is compared with the inputs
sent, `tokometer.client.assemble`), indexes each in range and seen once, every embedding a non-empty
list of finite numbers of one length (or a base64 string: ``encoding_format: base64``), every score a
finite number. An answer of any other shape raises ``ValueError`` with what was wrong (a
``malformed_stream`` error of the request); the size of the body is capped by the client
(`tokometer.protocols.common.framing.MAX_BODY_BYTES`).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import orjson

from tokometer.prompt import Prompt
from tokometer.protocols.common.base import Framing, GenerationParams, HttpRequest, ParsedEvent, ProtocolClient
from tokometer.protocols.common.numbers import count, error_message, obj

__all__ = ["RERANK_QUERY", "NonStreamingClient", "OpenAIEmbeddings", "Rerank", "batch_inputs"]

RERANK_QUERY = "Which of these texts is the most relevant to the question asked?"
"""The query of every rerank request (the documents are the inputs measured)."""


def batch_inputs(prompt: Prompt) -> list[str]:
    """The texts one request carries: each message of the prompt is one input (a batch of N inputs is a
    prompt of N messages, `tokometer.datasets.batched`)."""
    return [m.content for m in prompt.messages]


class NonStreamingClient(ProtocolClient):
    """A protocol whose answer is one JSON body (no first token: latency is the whole response)."""

    framing: ClassVar[Framing] = "json"
    streams: ClassVar[bool] = False


class OpenAIEmbeddings(NonStreamingClient):
    """``POST {base}/embeddings``."""

    name: ClassVar[str] = "openai-embeddings"

    def build(self, prompt: Prompt, params: GenerationParams) -> HttpRequest:
        body: dict[str, Any] = {"model": params.model, "input": batch_inputs(prompt), "encoding_format": "float"}
        body.update(params.extra_body)
        return HttpRequest("/embeddings", body)

    def parse(self, payload: bytes) -> ParsedEvent | None:
        data = _answer(payload)
        if (error := _error(data)) is not None:
            return ParsedEvent(error=error, done=True)
        items = data.get("data")
        if not isinstance(items, list):
            raise ValueError("the answer has no 'data' list of embeddings")
        width: int | None = None
        seen: set[int] = set()
        for n, item in enumerate(items):
            item = obj(item)
            _index(item.get("index", n), len(items), seen, f"data[{n}]")
            size = _embedding_size(item.get("embedding"), f"data[{n}].embedding")
            if width is not None and size is not None and size != width:
                raise ValueError(f"data[{n}].embedding has {size} values, data[0] had {width}")
            width = size if size is not None else width
        event = ParsedEvent(done=True, meta=True, finish_reason="stop", items=len(items))
        usage = obj(data.get("usage"))
        event.prompt_tokens = count(event, "usage.prompt_tokens", usage.get("prompt_tokens"))
        return event


class Rerank(NonStreamingClient):
    """``POST {base}/rerank``."""

    name: ClassVar[str] = "rerank"

    def build(self, prompt: Prompt, params: GenerationParams) -> HttpRequest:
        documents = batch_inputs(prompt)
        body: dict[str, Any] = {"model": params.model, "query": RERANK_QUERY, "documents": documents,
                                "top_n": len(documents)}
        body.update(params.extra_body)
        return HttpRequest("/rerank", body)

    def parse(self, payload: bytes) -> ParsedEvent | None:
        data = _answer(payload)
        if (error := _error(data)) is not None:
            return ParsedEvent(error=error, done=True)
        results = data.get("results")
        if not isinstance(results, list):
            raise ValueError("the answer has no 'results' list of scores")
        seen: set[int] = set()
        for n, item in enumerate(results):
            item = obj(item)
            _index(item.get("index"), len(results), seen, f"results[{n}]")
            score = item.get("relevance_score")
            if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
                raise ValueError(f"results[{n}].relevance_score is not a finite number: {_short(score)}")
        event = ParsedEvent(done=True, meta=True, finish_reason="stop", items=len(results))
        usage = obj(data.get("usage"))
        name = "prompt_tokens" if usage.get("prompt_tokens") is not None else "total_tokens"
        event.prompt_tokens = count(event, f"usage.{name}", usage.get(name))
        return event


def _answer(payload: bytes) -> dict[str, Any]:
    data = orjson.loads(payload)  # nesting deeper than orjson's limit raises JSONDecodeError, a ValueError
    if not isinstance(data, dict):
        raise ValueError("the answer is not a JSON object")
    return data


def _error(data: dict[str, Any]) -> str | None:
    """The message of an ``error`` answer sent with HTTP 200 (OpenAI's and vLLM's shape), else None: read by
    its shape (`error_message`), so an ``"error": false`` beside the data is no error."""
    return error_message(data.get("error"))


def _index(value: Any, n: int, seen: set[int], where: str) -> None:
    """Check that one result's index is a whole number in ``range(n)`` not seen before."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < n:
        raise ValueError(f"{where}.index is {_short(value)}, not a whole number from 0 to {n - 1}")
    if value in seen:
        raise ValueError(f"{where}.index {value} came twice")
    seen.add(value)


def _embedding_size(value: Any, where: str) -> int | None:
    """How many values one embedding has (None for a base64 string, whose width is not decoded)."""
    if isinstance(value, str) and value:
        return None
    if not isinstance(value, list) or not value:
        raise ValueError(f"{where} is not a non-empty list of numbers: {_short(value)}")
    for x in value:
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
            raise ValueError(f"{where} holds {_short(x)}, not a finite number")
    return len(value)


def _short(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."
