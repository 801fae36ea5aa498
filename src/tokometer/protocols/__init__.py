"""Each protocol tokometer speaks, one package per protocol, owned once in both directions.

A protocol package (`openai`, `openai_responses`, `anthropic_messages`, `ollama`, `tgi`, `llamacpp`,
`embeddings`) holds everything about its protocol: the client side that `tokometer bench` and the gateway's
upstream calls use (``client``: the request and the stream parser), the server side the simulator answers
with (``server``), the writer the simulator and the gateway answer clients with (``writer``), the translation
of its requests into the gateway's chat request (``translate``), its tool calls where they have a shape of
their own (``tools``), and its facts (its package's ``__init__``). `registry` names them all: the one table
from a protocol's name (``--api``) to its `registry.Protocol`; `gateway_clients` and `tool_events` read it
for the gateway's clients and upstreams.
What every protocol shares and none owns is in `common`: the base classes, the event splitter for SSE and
NDJSON, the number readers, reasoning inline between ``<think>`` tags, images, tool-call pieces.
The reading of a chat message's text is the leaf module `tokometer.messages` (the tokenizers use it too);
the HTTP client and the transport-error map are in `tokometer.client.http1`.
"""

from __future__ import annotations

from tokometer.protocols.common.base import GenerationParams, HttpRequest, ParsedEvent, ProtocolClient
from tokometer.protocols.common.framing import EventSplitter, iter_payloads

__all__ = ["EventSplitter", "GenerationParams", "HttpRequest", "ParsedEvent", "ProtocolClient", "iter_payloads"]
