"""Whether the Hugging Face Hub can be reached at all, asked before `huggingface_hub` is: a quick TCP connect.

An offline machine otherwise waits through huggingface_hub's retries (five, backing off 1 to 8 s: about 23 s)
before each lookup fails; with this check it gets its answer within `CONNECT_TIMEOUT_S`. ``HF_HUB_OFFLINE`` set
is read as unreachable. Behind a proxy the connect tells nothing, so the library is left to try.
"""

from __future__ import annotations

import os
import socket
from urllib.parse import urlsplit

__all__ = ["CONNECT_TIMEOUT_S", "hub_reachable"]

CONNECT_TIMEOUT_S = 3.0
"""How long the connect to the Hub's endpoint may take."""
_PROXIES = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")


def hub_reachable() -> bool:
    """Whether the Hub's endpoint (``HF_ENDPOINT``, as huggingface_hub reads it) takes a TCP connection within
    `CONNECT_TIMEOUT_S`; True behind a proxy (it cannot be told), False with ``HF_HUB_OFFLINE``. Needs
    huggingface_hub (the caller has it)."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return False
    if any(os.environ.get(v) for v in _PROXIES):
        return True
    parts = urlsplit(constants.ENDPOINT)
    try:
        with socket.create_connection((parts.hostname or "", parts.port or 443), timeout=CONNECT_TIMEOUT_S):
            return True
    except OSError:
        return False
