"""API keys for the gateway, and the error bodies of authentication failures.

The config holds only the sha256 of each secret (``tokometer gateway --hash-key``, which reads it). A
presented key is hashed and compared with every configured hash in constant time, so neither the
time of a refusal nor its position in the list tells anything about the secrets. A secret with
non-ASCII characters (hashed as UTF-8) matches whether its client sends it as UTF-8 or as Latin-1
(`tokometer.inbound.headers`).

"Token" is an ambiguous word next to a language model: a 401 here is about an *authentication*
token (an API key), never about model tokens or the context length. Every error body says so,
and when an upstream refuses the gateway's own key, the body names that upstream.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Any

from tokometer.gateway.config import KeyConfig
from tokometer.inbound.headers import header_text

__all__ = ["KeyRing", "auth_error", "hash_key"]

_NOT_MODEL_TOKENS = ("this is an authentication problem with an API key (an authentication token), "
                     "not a problem with model tokens or the context length")


def hash_key(secret: str) -> str:
    """The sha256 hex digest of an API key's secret, as the config stores it."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


class KeyRing:
    """The configured API keys; without any, the gateway is open and `identify` is not needed."""

    def __init__(self, keys: list[KeyConfig]) -> None:
        self._keys = list(keys)
        self._digests = [bytes.fromhex(k.sha256) for k in self._keys]

    @property
    def enabled(self) -> bool:
        return bool(self._keys)

    @property
    def keys(self) -> list[KeyConfig]:
        return list(self._keys)

    def identify(self, secret: str | None) -> KeyConfig | None:
        """The key whose secret this is, or None.

        The presented secret is compared with every configured key, each comparison in constant
        time, with no early exit.
        """
        if not secret:
            return None
        digest = hashlib.sha256(secret.encode("utf-8")).digest()
        found: KeyConfig | None = None
        for key, expected in zip(self._keys, self._digests, strict=True):
            if hmac.compare_digest(digest, expected) and found is None:
                found = key
        return found

    def identify_request(self, headers: Mapping[str, str]) -> tuple[KeyConfig | None, str]:
        """(the key a request presents, or None with what was wrong, in words without the secret).

        A key is sent as ``Authorization: Bearer KEY`` (OpenAI's form) or ``x-api-key: KEY``
        (Anthropic's). A bare ``Authorization: KEY`` is refused, with that hint: accepting it would
        hide clients that send a key in a form other servers reject.
        """
        authorization = headers.get("authorization")
        if authorization is not None:
            authorization = header_text(authorization)
            scheme, _, rest = authorization.strip().partition(" ")
            if scheme.lower() != "bearer":
                return None, ("the Authorization header must be 'Bearer KEY' (a bare key is not accepted there; "
                              "or send the key as 'x-api-key: KEY')")
            secret = rest.strip()
        else:
            secret = header_text(headers.get("x-api-key") or "").strip()
        if not secret:
            return None, "missing API key"
        found = self.identify(secret)
        return found, "" if found is not None else "unknown API key"


def auth_error(status: int, message: str, *, upstream: str | None = None) -> dict[str, Any]:
    """An OpenAI-shaped error body for an authentication failure.

    ``status`` is 401 (the key is missing, unknown or expired) or 403 (the key is known but not let
    through). Without ``upstream`` the failure is the client's key at the gateway; with it, the named
    upstream refused the key the gateway sent it, which the gateway's operator has to fix.
    """
    forbidden = status == 403
    if upstream is None:
        text = f"{message}: {_NOT_MODEL_TOKENS}"
        if not forbidden:
            text += "; send a gateway API key as 'Authorization: Bearer KEY' (or 'x-api-key: KEY')"
        code = "permission_denied" if forbidden else "invalid_api_key"
    elif forbidden:
        text = (f"upstream '{upstream}' denied access (HTTP 403) to the gateway's API key: {message}; "
                f"{_NOT_MODEL_TOKENS}. The key was refused by policy: check its permissions, the region or "
                "network rules of that upstream, and any proxy in between")
        code = "upstream_permission_denied"
    else:
        text = (f"upstream '{upstream}' refused the gateway's API key (HTTP {status}): {message}; "
                f"{_NOT_MODEL_TOKENS}. Check api_key / api_key_env of upstream '{upstream}' in the gateway "
                "config (a wrong or expired key, or a clock skew if it is a signed token)")
        code = "upstream_invalid_api_key"
    return {"error": {"message": text, "type": "permission_error" if forbidden else "authentication_error",
                      "param": None, "code": code}}
