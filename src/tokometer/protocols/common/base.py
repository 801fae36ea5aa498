"""What every protocol's client side provides: a request body, a framing, an event parser.

A `ProtocolClient` knows one protocol and nothing about timing. The shared client
(`tokometer.client.streamclient`) sends the request, stamps every chunk of bytes as
it arrives, and only afterwards splits the bytes into events (by the client's
framing) and asks the client what each event carried (`ParsedEvent`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from tokometer.prompt import Prompt
from tokometer.protocols.common.toolcalls import ToolDelta
from tokometer.records import FinishReason

__all__ = ["GenerationParams", "HttpRequest", "ParsedEvent", "ProtocolClient", "answer_length", "map_finish_reason"]

Framing = Literal["sse", "ndjson", "json"]


@dataclass(frozen=True, slots=True)
class GenerationParams:
    """Sampling and length settings shared by every request of a run."""

    model: str = ""
    max_tokens: int | None = 128
    ignore_eos: bool = False
    temperature: float | None = 0.0
    seed: int | None = None
    include_usage: bool = True
    extra_body: dict[str, Any] = field(default_factory=dict)
    tools: tuple[dict[str, Any], ...] = ()
    """Tool definitions sent with every chat request (``--tools``: `tokometer.datasets.tools`)."""
    tool_choice: str | dict[str, Any] | None = None
    """The request's ``tool_choice`` (``auto``, ``required``, ``none`` or a named function); None: not sent."""


def answer_length(prompt: Prompt, params: GenerationParams) -> int | None:
    """The ``max_tokens`` one request asks for: the prompt's own (a dataset's reference answer length) unless
    ``--ignore-eos`` makes every answer ``--output-tokens`` long; a prompt whose length is exact (a trace's
    ``output_length``) keeps it either way."""
    if prompt.max_tokens is not None and (prompt.exact_length or not params.ignore_eos):
        return prompt.max_tokens
    return params.max_tokens


@dataclass(frozen=True, slots=True)
class HttpRequest:
    """A request ready to send: path below the base URL, and a JSON body."""

    path: str
    body: dict[str, Any]


@dataclass(slots=True)
class ParsedEvent:
    """What one event of a stream carried. Fields not in the event stay ``None``."""

    text: str = ""
    reasoning: str = ""
    """Reasoning text sent in a field of its own (``reasoning_content``/``reasoning`` deltas, Ollama's
    ``thinking``); reasoning inline in ``text`` (``<think>``) is found later
    (`tokometer.protocols.common.reasoning`)."""
    tool_calls: ToolDelta | None = None
    """OpenAI chat ``delta.tool_calls``: output like text (`tokometer.protocols.common.toolcalls`)."""
    tokens: int | None = None
    """Tokens this event carried, when the protocol says so exactly."""
    finish_reason: FinishReason | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    completion_tokens_native: int | None = None
    prompt_tokens_native: int | None = None
    server_prompt_ms: float | None = None
    server_prompt_n: int | None = None
    server_decode_ms: float | None = None
    server_decode_n: int | None = None
    server_total_ms: float | None = None
    cached_prompt_tokens: int | None = None
    """Prompt tokens the server took from its prompt (prefix) cache, where it says."""
    image_tokens: int | None = None
    """Prompt tokens the server counted for images (``usage.prompt_tokens_details.image_tokens``), where it says."""
    reasoning_tokens: int | None = None
    """Output tokens the server counted as reasoning (``usage.completion_tokens_details.reasoning_tokens``)."""
    spec_verify_steps: int | None = None
    spec_accepted_tokens: int | None = None
    spec_draft_tokens: int | None = None
    """The request's speculative decoding, where the answer says it (`tokometer.protocols.common.spec_meta`)."""
    error: str | None = None
    rejected: str | None = None
    """The server's numbers in this event that were not believed, in words (`tokometer.protocols.common.numbers`)."""
    items: int | None = None
    """Results a non-streaming answer carried (embeddings, rerank scores): checked against the inputs sent."""
    done: bool = False
    meta: bool = False
    """True when the event carries anything besides content (finish reason, counters, timings)."""

    @property
    def has_content(self) -> bool:
        tools = self.tool_calls
        return bool(self.text or self.reasoning or self.tokens or (tools is not None and tools.text))


def map_finish_reason(value: object) -> FinishReason | None:
    """Map the many spellings engines use onto `stop` / `length`."""
    if value is None or value == "":
        return None
    text = str(value).lower()
    if text in {"length", "limit", "max_tokens", "max_new_tokens"}:
        return "length"
    if text in {"stop", "eos", "eos_token", "stop_sequence", "word", "end_turn", "tool_calls", "tool_use"}:
        return "stop"
    return "unknown"


class ProtocolClient(ABC):
    """One wire protocol. Subclasses are registered by `name` in `tokometer.protocols.registry`."""

    name: ClassVar[str]
    framing: ClassVar[Framing] = "sse"
    supports_include_usage: ClassVar[bool] = False
    exact_event_tokens: ClassVar[bool] = False
    """True when every content event is exactly one token (TGI)."""
    streams: ClassVar[bool] = True
    """False for a protocol answered by one JSON body (embeddings, rerank): no first token, no TTFT."""

    def __init__(self) -> None:
        self.include_usage_rejected = False

    @abstractmethod
    def build(self, prompt: Prompt, params: GenerationParams) -> HttpRequest:
        """The request for one prompt."""

    @abstractmethod
    def parse(self, payload: bytes) -> ParsedEvent | None:
        """Parse one event's payload (SSE data or one NDJSON line); ``None`` to skip it."""

    def auth_headers(self, api_key: str) -> dict[str, str]:
        """The headers that carry ``api_key``, and any the protocol always wants (``Authorization: Bearer``
        unless overridden: Anthropic's ``x-api-key``)."""
        return {"Authorization": f"Bearer {api_key}"}

    def fixed_headers(self) -> dict[str, str]:
        """Headers every request of this protocol carries, with or without a key (Anthropic's version)."""
        return {}

    def wants_usage(self, params: GenerationParams) -> bool:
        return self.supports_include_usage and params.include_usage and not self.include_usage_rejected
