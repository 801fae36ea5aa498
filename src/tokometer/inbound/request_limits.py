"""The default limits of one client request, shared by the gateway (its ``[server]`` settings) and the simulator.

The connection's (head, body bytes and time, chunked framing), the JSON body's (depth), and the fields' (counts
and sizes each protocol's request shape names, `tokometer.inbound.shapes`): one table.

nginx's ``client_max_body_size``, ``large_client_header_buffers``, ``client_header_timeout`` and
``client_body_timeout``, and ``send_timeout`` (a client that takes nothing of its answer), in one place: the
gateway's config takes its defaults from `DEFAULT_LIMITS`, the simulator serves with them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = ["DEFAULT_LIMITS", "STRINGS_PER_MESSAGE", "RequestLimits"]


@dataclass(frozen=True, slots=True)
class RequestLimits:
    max_body_bytes: int = 4 * 1024 * 1024
    """Larger request bodies get 413, refused before they are read (from Content-Length) or as they arrive."""
    body_timeout_s: float = 30.0
    """A request body must arrive whole within this, from the end of its head (408)."""
    body_idle_timeout_s: float = 10.0
    """Nor may it pause longer than this between two reads (nginx's ``client_body_timeout``): a trickle
    or an ``Expect: 100-continue`` that never sends its body gets 408 well before ``body_timeout_s``."""
    max_header_bytes: int = 32 * 1024
    """Larger request heads (request line and fields) get 431."""
    max_header_fields: int = 100
    """Request heads with more fields get 431."""
    header_timeout_s: float = 10.0
    """A request head must arrive within this of its first byte, or of the connection opening (408)."""
    max_json_depth: int = 64
    """JSON bodies nested deeper (arrays and objects inside each other) get 400."""
    max_json_values: int = 262_144
    """JSON bodies of more values (counted as the commas outside strings, and one) get 400 before they are
    parsed (a token-id prompt of up to that many tokens passes)."""
    max_json_strings: int = 32_768
    """JSON bodies of more strings (keys included) get 400 before they are parsed: what parsing costs the loop
    is their number (a chat of 2,048 messages holds ~8,000 to ~16,000; see `with_messages`)."""
    client_stall_s: float = 30.0
    """A client whose connection takes none of its response (writes paused, nothing drained) for this long
    is closed, and its upstream request cancelled."""
    max_body_framing_bytes: int = 64 * 1024
    """A chunked body's framing (its chunk-size lines with their extensions, the CRLFs, its trailers) may take
    this many bytes of the wire, and an eighth of the body (`tokometer.inbound.connections.FRAMING_SHARE`), beyond
    the body itself (413): a 1 MiB chunk extension, or a body sent a byte a chunk, is refused after ~64 KiB."""
    max_messages: int = 2048
    """Messages (chat), input items (Responses), turns: more get 400 (the gateway's ``[server] max_messages``)."""
    max_content_parts: int = 512
    """Content parts or blocks of one message (text, images, tool results), and blocks of one tool result."""
    max_tools: int = 256
    """Tool (function) definitions of one request."""
    max_stop_sequences: int = 64
    """Stop sequences of one request (``stop``, ``stop_sequences``, TGI's ``stop``)."""
    max_logit_bias_entries: int = 1024
    """Entries of a ``logit_bias`` map (token id to bias): a 300,000-entry map is refused before it costs anything."""
    max_name_chars: int = 256
    """Characters of a name or id field (a model, a role, a tool's name, a call's id)."""
    max_inputs: int = 4096
    """Inputs of one embeddings request, documents of one rerank request."""
    min_body_rate: int = 500
    """Bytes a second a request's body must keep up (Apache's ``mod_reqtimeout`` ``MinRate``) to keep its
    connection when the server is at its connection limit: a slower one (or one that sent nothing for
    `tokometer.inbound.connections.PROGRESS_GRACE_S`) is closed with 408 to make room."""


    def with_messages(self, max_messages: int) -> RequestLimits:
        """These limits for ``max_messages`` messages (the gateway's ``[server] max_messages``): the JSON strings
        and values a body may hold grow with it, `STRINGS_PER_MESSAGE` a message, so that a chat that many
        messages long is parsed."""
        room = STRINGS_PER_MESSAGE * max_messages
        return replace(self, max_messages=max_messages, max_json_strings=max(self.max_json_strings, room),
                       max_json_values=max(self.max_json_values, room))


STRINGS_PER_MESSAGE = 16
"""Strings (keys included) a chat message may take: ``{"role": "user", "content": [{"type": "text", "text":
"..."}]}`` is 7."""

DEFAULT_LIMITS = RequestLimits()
