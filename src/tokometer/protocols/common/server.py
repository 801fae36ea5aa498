"""The server side of a protocol: reading a request, rendering a stream (the simulator speaks through it).

A `ProtocolServer` turns "these tokens are ready now" into the exact bytes the real engine sends.
Each protocol's implementation is the ``server`` module of its package, beside the client side it answers
(`tokometer.protocols.openai.server`, `tokometer.protocols.ollama.server`, `tokometer.protocols.tgi.server`,
`tokometer.protocols.llamacpp.server`, ...), so that what a client parses and what a server writes are
written down once, together. Where the gateway writes the same protocol to its clients, both write through
one writer of an answer: OpenAI's `tokometer.protocols.openai.chunks.ChunkWriter`, Anthropic's
`tokometer.protocols.anthropic_messages.writer.AnthropicStreamWriter`, the Responses API's
`tokometer.protocols.openai_responses.writer.ResponsesStreamWriter`.
``count`` is the server's tokenizer (the simulator's: one word, one token).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from tokometer.messages import message_text

__all__ = [
    "Count",
    "ProtocolServer",
    "RequestInfo",
    "StreamTiming",
    "no_field",
    "opt_bool",
    "opt_int",
    "opt_str",
    "prompt_tokens",
    "stream_field",
]

Count = Callable[[str], int]
"""A server's tokenizer: text -> tokens."""


@dataclass(slots=True)
class RequestInfo:
    """What the simulator needs from a request, whatever protocol it came in."""

    model: str
    prompt_tokens: int
    max_tokens: int | None
    ignore_eos: bool = False
    stream: bool = True
    """Whether the answer is streamed (the request's ``stream``, or the protocol's default), else one body."""
    include_usage: bool = False
    return_tokens: bool = False
    sent_stream_options: bool = False
    id: str = ""
    created: int = 0
    writer: object | None = None
    """The writer of this answer's events, made once by its protocol (OpenAI's `ChunkWriter`, Anthropic's and
    the Responses API's stream writers; protocols whose events carry no state have none)."""
    reasoning_field: str = "reasoning_content"
    """OpenAI chat: the delta field reasoning text goes in (``reasoning_content`` or ``reasoning``)."""
    reasoning_tokens: int | None = None
    """The answer's first this many tokens are reasoning and the server counts them (OpenAI usage's
    ``completion_tokens_details.reasoning_tokens``); ``None``: no count is reported."""
    cached_tokens: int | None = None
    """Prompt tokens the server took from its prefix cache (OpenAI usage's
    ``prompt_tokens_details.cached_tokens``, llama.cpp's ``cache_n``); ``None``: not reported."""
    spec_counts: tuple[int, int, int] | None = None
    """Speculative decoding: the answer's verify steps, accepted and drafted tokens, sent in a ``meta_info``
    at its end (`tokometer.protocols.common.spec_meta`); ``None``: not reported."""
    image_tokens: int | None = None
    """Of ``prompt_tokens``, those of the request's images (OpenAI chat: reported as usage's
    ``prompt_tokens_details.image_tokens``); ``None``: no images."""
    tool_name: str | None = None
    """OpenAI chat: the answer is a call of this tool (its tokens stream as ``delta.tool_calls`` argument
    fragments, `tokometer.protocols.common.toolcalls`); ``None``: a text answer."""
    tool_started: bool = False
    """The call's first delta (its id and name) has been written."""


@dataclass(slots=True)
class StreamTiming:
    """Server-side durations of one answer, for protocols that report them."""

    prompt_ms: float
    decode_ms: float
    total_ms: float


class ProtocolServer(ABC):
    """One wire protocol, server side."""

    path: ClassVar[str]
    content_type: ClassVar[str] = "text/event-stream"
    stream_default: ClassVar[bool | None] = None
    """What a request without ``stream`` gets (OpenAI and llama.cpp: not streamed; Ollama: streamed);
    None: the endpoint always streams (TGI's ``/generate_stream``) and ``stream`` is not read."""
    carries_reasoning: ClassVar[bool] = False
    """True when the protocol has a field for reasoning text; without one, reasoning goes inline in the
    text between ``<think>`` tags (`tokometer.protocols.common.reasoning.inline`)."""
    models_path: ClassVar[str | None] = None
    """Where the protocol's server lists its models (``GET``; `models` is the answer); None: nowhere."""

    def models(self, model: str, max_context: int, owner: str) -> dict[str, Any]:
        """The model list a server serving ``model`` answers at `models_path`."""
        raise NotImplementedError(f"{self.path} has no model list")

    @abstractmethod
    def read(self, body: dict[str, Any], default_model: str, count: Count) -> RequestInfo:
        """Parse a request body; raise `ValueError` for a malformed one."""

    def start(self, info: RequestInfo) -> bytes:
        """An empty role-only event, for protocols that have one; else nothing."""
        return b""

    @abstractmethod
    def tokens(self, info: RequestInfo, ids: list[int], text: str, done_before: int, reasoning: str = "") -> bytes:
        """One content event carrying ``ids`` (``done_before`` tokens were sent earlier): answer ``text`` and,
        where the protocol `carries_reasoning`, ``reasoning`` text in its own field."""

    @abstractmethod
    def finish(self, info: RequestInfo, finish: str, completion_tokens: int, timing: StreamTiming) -> bytes:
        """The closing event(s): finish reason, usage and timings where the protocol has them."""

    def last_tokens(
        self, info: RequestInfo, ids: list[int], text: str, done_before: int, finish: str, timing: StreamTiming,
        reasoning: str = "",
    ) -> bytes:
        """The last content event followed by the closing event(s), in one write."""
        return (self.tokens(info, ids, text, done_before, reasoning)
                + self.finish(info, finish, done_before + len(ids), timing))

    def whole(self, info: RequestInfo, text: str, reasoning: str, ids: list[int], finish: str,
              completion_tokens: int, timing: StreamTiming) -> dict[str, Any]:
        """The body of an answer that is not streamed (``info.stream`` false): all of ``text`` (and
        ``reasoning``, where the protocol `carries_reasoning`) with the closing event's accounting."""
        raise NotImplementedError(f"{self.path} always streams")

    @abstractmethod
    def error_event(self, info: RequestInfo, message: str) -> bytes:
        """An error reported inside an already started stream."""

    def malformed(self) -> bytes:
        return b'data: {"choices": [{"delta": {"content": "broken\n\n'

    def error_body(self, status: int, message: str, kind: str) -> dict[str, Any]:
        """The JSON body of an HTTP error (OpenAI shape unless overridden)."""
        return {"error": {"message": message, "type": kind, "param": None, "code": status}}


def no_field(protocol: ProtocolServer, reasoning: str) -> None:
    """Refuse reasoning text for a protocol without a field for it (the caller must put it inline)."""
    if reasoning and not protocol.carries_reasoning:
        raise ValueError(f"{protocol.path} has no field for reasoning text: send it inline between <think> tags")


def prompt_tokens(messages: Any, count: Count) -> int:
    """Tokens of a chat's message texts (``count`` each); ValueError for a malformed ``messages``."""
    if not isinstance(messages, list):
        raise ValueError("'messages' must be a list")
    total = 0
    for message in messages:
        if not isinstance(message, dict):
            raise ValueError("each message must be an object")
        total += count(message_text(message))
    return total


def stream_field(body: dict[str, Any], default: bool) -> bool:
    """A request's ``stream``: its value, or ``default`` when absent or null; ValueError if not a boolean."""
    value = body.get("stream")
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ValueError("'stream' must be a boolean (true or false)")
    return value


def opt_str(value: Any, name: str) -> str | None:
    """A request's optional string field: None when absent or null; ValueError if not a string."""
    if value is not None and not isinstance(value, str):
        raise ValueError(f"'{name}' must be a string")
    return value


def opt_bool(value: Any, name: str) -> bool:
    """A request's optional boolean field: False when absent or null; ValueError if not a boolean."""
    if value is not None and not isinstance(value, bool):
        raise ValueError(f"'{name}' must be a boolean (true or false)")
    return bool(value)


def opt_int(value: Any, name: str) -> int | None:
    """A request's optional non-negative integer field: None when absent or null; ValueError otherwise."""
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"'{name}' must be a non-negative integer")
    return value
