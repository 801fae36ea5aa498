"""Auth: does the server take the request, and when not, which *authentication* token is at fault.

One request is sent as every later check sends them (the benchmark's client, one token asked
for). A 401 or 403 becomes a finding that says plainly it is about authentication tokens (API
keys, JWTs), not model tokens, which header was sent (the key itself never shown), whether a key
was set at all, what the server said (``WWW-Authenticate`` included) and how far the server's
clock is from this one (an expiry or not-before check fails on a skewed clock). Any other failure
of this request (a wrong path or protocol, a broken answer) is named too, with the protocol the
server does speak where the benchmark's preflight can tell; later checks that send requests are
then skipped.
"""

from __future__ import annotations

from tokometer.benchmark.preflight import protocol_hint
from tokometer.doctor.finding import Finding
from tokometer.doctor.session import Session
from tokometer.prompt import Prompt
from tokometer.protocols.registry import create_client

__all__ = ["CLOCK_SKEW_S", "NOT_MODEL_TOKENS", "key_header", "key_shown", "run"]

CLOCK_SKEW_S = 60.0
"""A server clock further than this from this machine's is a finding (tokens with exp/nbf claims fail)."""

NOT_MODEL_TOKENS = "this is about authentication tokens (API keys), not model tokens"


def key_shown(key: str | None, api: str = "openai-chat") -> str:
    """The header a key is sent in (the protocol's: `ProtocolClient.auth_headers`), with the key hidden but for its
    length and first characters."""
    if not key:
        return "none (no --api-key, no TOKOMETER_API_KEY)"
    head = key[:3] if len(key) >= 12 else ""
    return key_header(api, f"{head}… ({len(key)} characters)")


def key_header(api: str, shown: str = "KEY") -> str:
    """``Authorization: Bearer KEY`` or, for Anthropic's Messages API, ``x-api-key: KEY``."""
    name, value = next(iter(create_client(api).auth_headers("\0").items()))
    return f"{name}: {value.replace(chr(0), shown)}"


def _skew_evidence(session: Session) -> dict[str, object]:
    skew = session.server_date_skew_s
    return {"clock_skew_s": round(skew, 1) if skew is not None else "unknown (no Date header)"}


async def run(session: Session) -> None:
    """The auth check (the first request): sets ``session.can_generate``."""
    exchange = await session.send(Prompt.from_text("Hello"), 1)
    record = exchange.record
    evidence: dict[str, object] = {"header_sent": key_shown(session.spec.api_key, session.api),
                                   "key_set": bool(session.spec.api_key), "status": record.status,
                                   "answer": record.error_detail[:300], **_skew_evidence(session)}
    if session.www_authenticate:
        evidence["www_authenticate"] = session.www_authenticate
    skew = session.server_date_skew_s
    skewed = skew is not None and abs(skew) > CLOCK_SKEW_S
    if record.error in ("http_401", "http_403"):
        session.can_generate = False
        if record.error == "http_403":
            session.add(Finding("auth.forbidden", "error",
                                f"HTTP 403: the server refuses this key or this client; {NOT_MODEL_TOKENS}", evidence,
                                "The key is known but not allowed here: check its permissions (model, project), "
                                "any region or network policy (IP allow-list, VPN), and a proxy or gateway in "
                                "between that may strip or replace the Authorization header."))
        elif not session.spec.api_key:
            session.add(Finding("auth.missing_key", "error",
                                f"HTTP 401: the server wants an API key, none was sent; {NOT_MODEL_TOKENS}", evidence,
                                "Give the key with --api-key KEY (or TOKOMETER_API_KEY); it is sent as "
                                f"'{key_header(session.api)}'."))
        else:
            session.add(Finding("auth.key_refused", "error",
                                f"HTTP 401: the server refuses the API key sent; {NOT_MODEL_TOKENS}", evidence,
                                "Check that the key is the server's and has not expired or been revoked; for JWTs "
                                "check the signing key and algorithm, and the clock (see clock_skew_s); a gateway "
                                "may expect its own key rather than the upstream's."))
        if skewed:
            _add_skew(session, evidence)
        return
    if skewed:
        _add_skew(session, evidence)
    if record.error is None:
        if session.spec.api_key:
            session.add(Finding("auth.ok", "info", "the API key (authentication token) is accepted", evidence))
        return
    session.can_generate = record.error not in ("http_404", "http_4xx", "redirect", "protocol", "connect")
    hint = ""
    if record.status in (404, 405):
        hint = await protocol_hint(session.bench_spec(), session.probe)
    session.add(Finding("auth.request_failed", "error", f"the first request failed: {record.error}",
                        {**evidence, "hint": hint} if hint else evidence,
                        hint[:1].upper() + hint[1:] + "." if hint else
                        "See the answer above: the server fails requests before any load."))


def _add_skew(session: Session, evidence: dict[str, object]) -> None:
    skew = session.server_date_skew_s or 0.0
    session.add(Finding("auth.clock_skew", "warning", f"the server's clock is {abs(skew):,.0f} s "
                        f"{'ahead of' if skew > 0 else 'behind'} this machine's", evidence,
                        "Authentication tokens with an expiry (JWT exp/nbf, signed URLs) fail when clocks differ: "
                        "run NTP (chrony, systemd-timesyncd) on both machines."))
