"""Each wire protocol tokometer speaks, owned once, in both directions.

Client side (what `tokometer bench` and the gateway's upstream calls send and read): a `Backend`
per protocol builds the request and parses each event (`base`, `openai`, `ollama`, `tgi`,
`llamacpp`, `anthropic`, `openai_responses`, with llama.cpp's `timings`). Server side: one writer of an
answer per protocol, used by the simulator and by the gateway alike: OpenAI chunks
(`openai_chunks.ChunkWriter`, under `stream_writer`), Anthropic Messages events (`anthropic_writer`),
Responses API events (`responses_writer`); the simulator's endpoints over them (`server_protocol`, and
`anthropic_server`, `responses_server`); the translations of a Messages or Responses request into a chat
request (`anthropic_request`, `responses_request`) and chat tool-call deltas (`chat_tools`). Shared by
both: one event
splitter for SSE and NDJSON (`framing`); reasoning inline between ``<think>`` tags (`reasoning`);
the reading of a chat message's text is the leaf module `tokometer.messages` (the tokenizers use it
too).
The HTTP client and the transport-error map are in `tokometer.client.http1`.
"""

from __future__ import annotations

from tokometer.wire.base import Backend, GenerationParams, HttpRequest, ParsedEvent
from tokometer.wire.framing import EventSplitter, iter_payloads

__all__ = ["Backend", "EventSplitter", "GenerationParams", "HttpRequest", "ParsedEvent", "iter_payloads"]
