"""Plain GET requests for looking around a server before a run (model lists, /props, /info), with the
same HTTP client, proxies and TLS settings as the run itself.

Each GET has a deadline for the whole answer (``timeout_s`` from the request's sending: a server that
trickles a byte now and then does not keep it open), a size limit (`MAX_SMALL_BODY_BYTES`) and a read
budget for the whole answer, head, framing and trailers included (`util.readbudget.answer_budget`); past
any of them the GET fails (HttpTimeout, ProtocolViolation) like any other failure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from tokometer.client.http1 import (
    MAX_SMALL_BODY_BYTES,
    ConnectError,
    HttpPool,
    HttpTimeout,
    PeerReset,
    StreamedResponse,
)
from tokometer.client.tls import TlsOptions
from tokometer.util.jsontext import loads
from tokometer.util.readbudget import answer_budget

__all__ = ["Probe"]


@dataclass(frozen=True, slots=True)
class Probe:
    """GETs with ``headers`` (credentials), one fresh connection each."""

    headers: Mapping[str, str] = field(default_factory=dict)
    tls: TlsOptions = field(default_factory=TlsOptions)
    timeout_s: float = 10.0
    max_body_bytes: int = MAX_SMALL_BODY_BYTES

    async def get(self, url: str) -> tuple[int, bytes]:
        """(status, body) of ``GET url``; raises ConnectError, HttpTimeout or PeerReset."""
        response = await self.fetch(url)
        return response.status, b"".join(response.chunks)

    async def fetch(self, url: str) -> StreamedResponse:
        """The whole answer to ``GET url`` (status, headers, stamps, body chunks, ``connect_ns``: how long
        opening the connection took); raises ConnectError, HttpTimeout or PeerReset."""
        parts = urlsplit(url)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        pool = HttpPool(f"{parts.scheme}://{parts.netloc}", connect_timeout=self.timeout_s,
                        idle_timeout=self.timeout_s, total_timeout=self.timeout_s, tls=self.tls)
        try:
            response = StreamedResponse(max_body_bytes=self.max_body_bytes,
                                        max_bytes=answer_budget(self.max_body_bytes))
            await pool.request(pool.encode("GET", path, b"", self.headers), response)
            return response
        finally:
            await pool.close()

    async def get_json(self, url: str) -> Any:
        """The JSON a GET of ``url`` answers with, or None (any failure, or a status other than 200)."""
        try:
            status, body = await self.get(url)
            return loads(body) if status == 200 else None
        except (ConnectError, HttpTimeout, PeerReset, ValueError):
            return None
