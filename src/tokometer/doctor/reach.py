"""Reach: can the server be found and spoken to, and does it serve the model asked for.

Times the name lookup (``getaddrinfo``), the TCP connect and, for https, the TLS handshake (the
probe's connection time less the other two); reads the HTTP status of the model list
(``/v1/models`` for OpenAI APIs, ``/api/tags`` for Ollama, ``/info`` for TGI, ``/props`` for
llama.cpp) and of ``/health``; and checks that the model asked for is one the server lists,
naming the closest served names (`difflib`) when it is not. The server's ``Date`` header is kept
for the auth check's clock-skew figure.

The closest names are looked for in a bounded number of names (`CLOSE_COMPARED`, each of at most
`CLOSE_NAME_CHARS`): the list is the server's, up to the 16 MiB an answer may have, and difflib over a 700,000-name
list took 25 s. Names that extend the one asked for are still looked for in the whole list (one prefix test each).
"""

from __future__ import annotations

import asyncio
import difflib
import email.utils
import itertools
import socket
import time
from typing import Any

from tokometer.client.http1 import ConnectError, HttpTimeout, PeerReset, ProtocolViolation, StreamedResponse
from tokometer.doctor.finding import Finding
from tokometer.doctor.session import Session
from tokometer.protocols.registry import protocol_named
from tokometer.util.jsontext import loads
from tokometer.util.shown import quoted

__all__ = ["CLOSE_COMPARED", "CLOSE_NAME_CHARS", "SLOW_CONNECT_MS", "close_matches", "date_skew_s", "model_names",
           "run"]

SLOW_CONNECT_MS = 300.0
"""A name lookup, TCP connect or TLS handshake slower than this is a finding: every new connection pays it."""
CLOSE_COMPARED = 2_000
"""The served names (the first listed) difflib ranks against the name asked for."""
CLOSE_NAME_CHARS = 256
"""A served name longer than this is not compared (no model name a person types is as long)."""


def close_matches(name: str, served: list[str], n: int = 5) -> list[str]:
    """The served names closest to ``name`` first, then the rest, at most ``n`` in all: names that extend the one
    asked for (or that it extends: ``llama-3.1-8b`` and ``llama-3.1-8b-instruct``), then difflib's ranking of the
    first `CLOSE_COMPARED` names (module docstring)."""
    asked = name.lower()[:CLOSE_NAME_CHARS]
    lowered = {s.lower(): s for s in served if len(s) <= CLOSE_NAME_CHARS}  # in the list's order
    extends = itertools.islice((s for low, s in lowered.items() if low.startswith(asked) or asked.startswith(low)),
                               n)
    compared = list(itertools.islice(lowered, CLOSE_COMPARED))
    close = [lowered[m] for m in difflib.get_close_matches(asked, compared, n=n, cutoff=0.3)]
    ranked = list(dict.fromkeys([*extends, *close]))
    return [*ranked, *itertools.islice((s for s in served if s not in ranked), n)][:n]


def model_names(api: str, data: Any) -> list[str] | None:
    """The model names a model-list answer holds, or None when it is not one."""
    listing = protocol_named(api).model_list
    return None if listing is None else listing.read(data)


def date_skew_s(date_header: str, now: float | None = None) -> float | None:
    """The server's clock minus this one's, in seconds, from an HTTP ``Date`` header (None if unreadable)."""
    try:
        when = email.utils.parsedate_to_datetime(date_header)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return when.timestamp() - (time.time() if now is None else now)


async def _dns_ms(host: str, port: int) -> tuple[float, str | None, list[str]]:
    """(lookup time, error, addresses)."""
    loop = asyncio.get_running_loop()
    start = time.perf_counter()
    try:
        async with asyncio.timeout(10):
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, TimeoutError) as exc:
        return (time.perf_counter() - start) * 1e3, str(exc) or type(exc).__name__, []
    return (time.perf_counter() - start) * 1e3, None, sorted({str(info[4][0]) for info in infos})


async def _tcp_ms(address: str, port: int, limit_s: float) -> float | None:
    """Time of one bare TCP connect to ``address`` (closed at once), or None when it fails."""
    loop = asyncio.get_running_loop()
    start = time.perf_counter()
    try:
        async with asyncio.timeout(limit_s):
            transport, _ = await loop.create_connection(asyncio.Protocol, address, port)
    except (OSError, TimeoutError):
        return None
    elapsed = (time.perf_counter() - start) * 1e3
    transport.close()
    return elapsed


async def _get(session: Session, path: str) -> StreamedResponse | OSError:
    try:
        return await session.probe.fetch(session.root + path)
    except (ConnectError, HttpTimeout, PeerReset) as exc:
        return exc


async def run(session: Session) -> None:
    """The reach check; sets ``session.reachable``, ``served``, ``model`` and the Date skew."""
    from urllib.parse import urlsplit

    parts = urlsplit(session.spec.url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    dns_ms, dns_error, addresses = await _dns_ms(session.host, port)
    if dns_error is not None:
        _unreachable(session, Finding("reach.dns_failed", "error", f"the name {session.host} does not resolve",
                                      {"host": session.host, "error": dns_error, "dns_ms": round(dns_ms, 1)},
                                      "Check the host name in the URL, and this machine's DNS (resolv.conf, "
                                      "/etc/hosts)."))
        return
    tcp_ms = await _tcp_ms(addresses[0], port, session.connect_timeout_s) if addresses else None
    list_path = protocol_named(session.api).model_list_path
    listing = await _get(session, list_path)
    if not isinstance(listing, StreamedResponse):
        _unreachable(session, _no_listing(session, list_path, listing, {"error": str(listing), "addresses": addresses,
                                                                         "dns_ms": round(dns_ms, 1)}))
        return
    health = await _get(session, "/health")
    tls_ms = _tls_ms(listing, dns_ms, tcp_ms) if parts.scheme == "https" else None
    _note_answers(session, listing, health)
    _report_connection(session, list_path, listing, health, {"dns_ms": dns_ms, "tcp_connect_ms": tcp_ms,
                                                             "tls_ms": tls_ms}, addresses)
    if listing.status in (401, 403):
        return  # the auth check says why
    await _read_models(session, list_path, listing)


def _unreachable(session: Session, finding: Finding) -> None:
    """The server cannot be spoken to: say why, and let the checks that need it skip."""
    session.reachable = session.can_generate = False
    session.add(finding)


def _no_listing(session: Session, list_path: str, failure: OSError, facts: dict[str, Any]) -> Finding:
    """Why the model list could not be read: an answer no client can use, or no answer at all."""
    if isinstance(failure, ProtocolViolation):  # something answered, and broke HTTP or a limit
        return Finding("reach.bad_answer", "error", f"the answer to GET {list_path} is not one a client can use",
                       facts, "Is this URL the inference server's (and not another service on that port)? An answer "
                              "larger than 16 MiB or one that breaks HTTP/1.1 is refused rather than read.")
    return Finding("reach.unreachable", "error", f"nothing answers HTTP at {session.root}", facts,
                   "Is the server running, on this host and port, and listening on an address this machine can "
                   "reach (not only 127.0.0.1 on another host)? A firewall may drop it.")


def _tls_ms(listing: StreamedResponse, dns_ms: float, tcp_ms: float | None) -> float | None:
    """The TLS handshake's time: the probe's connection time less the name lookup and the bare TCP connect."""
    return max(0.0, listing.connect_ns / 1e6 - dns_ms - tcp_ms) if tcp_ms is not None else None


def _note_answers(session: Session, listing: StreamedResponse, health: StreamedResponse | OSError) -> None:
    """Keep what the auth check reads from the answers: the server's clock skew and its WWW-Authenticate."""
    for response in (listing, health):
        if isinstance(response, StreamedResponse) and "date" in response.headers:
            session.server_date_skew_s = date_skew_s(response.headers["date"])
            break
    session.www_authenticate = listing.headers.get("www-authenticate", "")


_STEP_NAMES = {"dns_ms": "DNS", "tcp_connect_ms": "TCP connect", "tls_ms": "TLS"}
"""Each step of opening a connection, as its time is keyed in the findings and as a sentence says it."""


def _report_connection(session: Session, list_path: str, listing: StreamedResponse,
                       health: StreamedResponse | OSError, times_ms: dict[str, float | None],
                       addresses: list[str]) -> None:
    """The findings of a server that answers: its statuses and connection times, a slow connection, and a
    /health that is not there."""
    health_status = health.status if isinstance(health, StreamedResponse) else None
    timing = {**{k: round(v, 2) if v is not None else None for k, v in times_ms.items()}, "addresses": addresses,
              f"status {list_path}": listing.status, "status /health": health_status}
    session.add(Finding("reach.ok", "info", f"{session.root} answers: {list_path} HTTP {listing.status}, "
                        f"/health {health_status if health_status is not None else 'no answer'}", timing))
    slow = {_STEP_NAMES[k]: v for k, v in times_ms.items() if v is not None and v > SLOW_CONNECT_MS}
    if slow:
        what = ", ".join(f"{k} {v:,.0f} ms" for k, v in slow.items())
        session.add(Finding("reach.slow_connect", "warning", f"opening a connection is slow: {what}", timing,
                            "Every new connection pays this before the first token: keep connections alive (a "
                            "pooling client or gateway), use a closer DNS resolver, or put the client nearer."))
    if health_status is not None and health_status != 200 and health_status not in (401, 403):
        session.add(Finding("reach.no_health", "info", f"/health answers HTTP {health_status}", timing,
                            "Load balancers and readiness probes often call /health: point them at "
                            f"{list_path} instead, or enable the server's health endpoint."))


async def _read_models(session: Session, list_path: str, listing: StreamedResponse) -> None:
    """Read the served models from the model list (and llama.cpp's /props), then check the model asked for."""
    props = await session.probe.get_json(session.root + "/props")  # llama.cpp: its model file and n_ctx
    session.props = props if isinstance(props, dict) else None
    data: Any = None
    if listing.status == 200:
        try:
            data = loads(b"".join(listing.chunks))
        except ValueError:
            data = None
    session.served = model_names(session.api, data)
    if session.served is None:
        protocol = protocol_named(session.api)
        if protocol.picks_first_model:
            session.add(Finding("reach.no_model_list", "warning", f"{list_path} does not list models "
                                f"(HTTP {listing.status})", {"status": listing.status},
                                f"{protocol.vendor} clients list models to pick one: check that the URL's path ends "
                                f"in {protocol.base_path} and that this is an {protocol.vendor}-compatible server "
                                "(or give --api)."))
        return
    _check_model(session)


def _check_model(session: Session) -> None:
    served = session.served or []
    if not session.model:
        if served:
            session.model = served[0]
        return
    if session.model in served or protocol_named(session.api).serves_one_model:
        return  # TGI and llama.cpp serve one model whatever name a request gives
    if not served:
        session.add(Finding("reach.no_models", "error", "the server lists no models", {"asked": session.model},
                            "The server has no model loaded: load one (vLLM --model, ollama pull, llama.cpp -m)."))
        return
    matches = close_matches(session.model, served)
    session.add(Finding("reach.model_not_found", "error",
                        f"the server does not list model {quoted(session.model)}; it serves "
                        f"{', '.join(quoted(m) for m in matches)}" + (" …" if len(served) > len(matches) else ""),
                        {"asked": session.model, "closest": matches, "served": served[:50]},
                        f"Ask for one of the served names (--model {quoted(matches[0])} is the closest), or load the "
                        "model on the server. Some servers answer any name with their one model; most answer 404."))
