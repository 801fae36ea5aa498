"""`Protocol`: one protocol's description, its facts and its parts, as the registry holds it.

Each protocol package builds its `Protocol` (in its ``__init__``) and `tokometer.protocols.registry` lists
them by name. Code outside the protocol packages reads what differs between protocols from here (where a
server lists its models, whether the gateway relays it, the writer its clients get), never by comparing a
protocol's name.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tokometer.inbound.shapes import Shape
from tokometer.protocols.common.base import ProtocolClient
from tokometer.protocols.common.server import ProtocolServer
from tokometer.protocols.common.tool_events import ToolEvents
from tokometer.protocols.common.writer import StreamWriter

__all__ = ["ContextProbe", "ModelList", "Protocol", "WriterFactory", "ids_of", "root_of"]

class WriterFactory(typing.Protocol):
    """Makes the writer of one answer to a client (``opened``: an OpenAI client has seen the stream's start
    already, relayed byte for byte)."""

    def __call__(self, *, chat: bool, model: str, include_usage: bool, prompt_tokens: int | None,
                 max_tokens: int | None, ident: str | None, created: int | None, opened: bool) -> StreamWriter: ...


def root_of(url: str) -> str:
    """scheme://host:port of ``url``."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def ids_of(data: Any) -> list[str] | None:
    """The model ids of an OpenAI-style list (``{"data": [{"id": ...}]}``), or None when it is not one."""
    if not isinstance(data, dict):
        return None
    entries = data.get("data")
    return [e["id"] for e in entries if isinstance(e, dict) and isinstance(e.get("id"), str)] \
        if isinstance(entries, list) else None


@dataclass(frozen=True, slots=True)
class ModelList:
    """Where a server of the protocol lists the models it serves, and how the list reads."""

    path: str
    """GET path: under the URL the user gave (``at_root`` False) or at the server's root."""
    read: Callable[[Any], list[str] | None]
    """The model names of the decoded JSON answer, or None when it is not a list of them."""
    at_root: bool = False

    def url(self, url: str) -> str:
        """The list's URL for a server at ``url``."""
        return (root_of(url) if self.at_root else url.rstrip("/")) + self.path


@dataclass(frozen=True, slots=True)
class ContextProbe:
    """Where a server of the protocol advertises its context length, and how it reads."""

    path: str
    read: Callable[[Any, str], int | None]
    """(decoded JSON answer, model) -> the context in tokens, or None."""
    where: str
    """The place named in words (``max_model_len in /v1/models``)."""
    at_root: bool = False

    def url(self, url: str) -> str:
        """The probe's URL for a server at ``url``."""
        return (root_of(url) if self.at_root else url.rstrip("/")) + self.path


@dataclass(frozen=True, slots=True)
class Protocol:
    """One protocol tokometer speaks: its parts, and the facts other code asks about; its name (``--api``) is
    its client's."""

    vendor: str
    """Who defines it, in messages (``OpenAI``, ``Anthropic``, ``Ollama``)."""
    client: type[ProtocolClient]
    """The request a client sends and the parser of the answer's events (bench, the gateway's upstreams)."""
    server: type[ProtocolServer] | None = None
    """The simulator's side of it (None: the simulator serves it elsewhere, or not at all)."""
    family: str = ""
    """Protocols one server serves together share a family (OpenAI's chat, completions, Responses...);
    empty: the protocol's own name."""
    base_path: str = ""
    """Where the family's API lives under the server's root (OpenAI's ``/v1``), if anywhere."""
    model_list: ModelList | None = None
    """Where its servers list their models (None: nowhere tokometer reads)."""
    picks_first_model: bool = False
    """With no ``--model``, bench asks for the first model the server lists (else: the user must name one)."""
    serves_one_model: bool = False
    """The server serves its one model whatever name a request gives (TGI, llama.cpp): no name is needed."""
    detect: tuple[str, str] | None = None
    """(GET path at the server's root, a key of its JSON answer): how preflight tells the server speaks it."""
    context: ContextProbe | None = None
    takes_media: bool = False
    """Its requests carry images and tools (``--images``, ``--tools``)."""
    takes_token_ids: bool = False
    """Its prompt may be token ids: quality's teacher forcing feeds one model the other's path."""
    asks_stream_usage: bool = False
    """A client asks for the usage in a stream (``stream_options.include_usage``), and a server may refuse it."""
    chat: bool = False
    """Its request carries chat messages (else a prompt text)."""
    logprobs: bool = False
    """It answers with each token's top log-probabilities when asked (``tokometer quality``)."""
    gateway_native: bool = False
    """It is the gateway's own shape (OpenAI chat or completions): a client's request passes as it is, and
    an upstream's stream relays to a client of the same shape byte for byte."""
    to_chat: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    """The gateway's inbound side: a client's request as the chat request that carries it (None: it is one)."""
    error_body: Callable[[int, dict[str, Any]], dict[str, Any]] | None = None
    """An error the gateway answers (in OpenAI's shape, with its HTTP status) in this protocol's shape
    (None: OpenAI's is this protocol's)."""
    tool_events: ToolEvents | None = None
    """How it streams and declares tool calls where that is not OpenAI chat's way (the gateway's upstreams)."""
    writer: WriterFactory | None = None
    """The writer of one answer to a client of this protocol (the gateway; None: the gateway does not serve it)."""
    request: Shape | None = None
    """The shape of a request its servers take (its package's ``request`` module): the inbound boundary of the
    gateway and the simulator checks a client's body against it, within the limits of
    `tokometer.inbound.request_limits`, before any other work."""

    @property
    def model_list_path(self) -> str:
        """The path at the server's root its model list is at (OpenAI's ``/v1/models``)."""
        listing = self.model_list
        if listing is None:
            return self.base_path + "/models"
        return listing.path if listing.at_root else self.base_path + listing.path

    @property
    def streams(self) -> bool:
        """It answers in a stream of events (embeddings and rerank answer with one JSON body)."""
        return self.client.streams

    @property
    def name(self) -> str:
        """What ``--api`` calls it (and the gateway's upstream ``api``): its client's ``name``."""
        return self.client.name

    @property
    def key_header(self) -> str:
        """The header the API key goes in, in lower case (``authorization``; Anthropic's ``x-api-key``)."""
        return next(iter(self.client().auth_headers("KEY"))).lower()

    @property
    def family_name(self) -> str:
        """Its family, or its own name where it has none."""
        return self.family or self.name
