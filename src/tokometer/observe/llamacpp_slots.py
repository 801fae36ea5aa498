"""llama.cpp's live token count: its ``/slots`` beside its ``/metrics``.

llama-server adds a request's generated tokens to ``llamacpp:tokens_predicted_total`` only when the
request ends (``metrics_on_prediction``, called as the slot is released, in
``tools/server/server-context.cpp``), so a window shorter than a request sees that counter stand
still while tokens stream, then jump. Its ``/slots`` (on by default; ``--no-slots`` turns it off)
says per slot ``is_processing`` and ``next_token[0].n_decoded``: the tokens generated so far by
the request the slot is running, reset to 0 when the slot is released, at the moment those tokens
are added to the counter. So the tokens generated since the server started are, at any moment,
``tokens_predicted_total`` + Σ ``n_decoded`` over the processing slots, and that sum moves with every
token. `in_progress` reads it from ``/slots``; `with_in_progress` puts it into a `Snapshot` as the
gauge ``generation_tokens_in_progress``, which `observe.server_window` adds to the counter.

``/metrics`` and ``/slots`` are two requests: a request that ends between them is counted twice or
not at all in that one reading (at most one request's tokens, once).
"""

from __future__ import annotations

import dataclasses
from urllib.parse import urlsplit, urlunsplit

from tokometer.observe.snapshot import Snapshot
from tokometer.util.jsontext import loads

__all__ = ["IN_PROGRESS", "in_progress", "slots_url", "with_in_progress"]

IN_PROGRESS = "generation_tokens_in_progress"
"""The gauge: tokens generated so far by the requests still running (Σ n_decoded of busy slots)."""


def slots_url(metrics_url: str) -> str:
    """``/slots`` beside a ``/metrics`` URL (same origin and prefix)."""
    parts = urlsplit(metrics_url)
    path = parts.path.rstrip("/")
    base = path[: -len("/metrics")] if path.endswith("/metrics") else path
    return urlunsplit((parts.scheme, parts.netloc, base + "/slots", "", ""))


def in_progress(text: str) -> float:
    """Σ ``next_token[0].n_decoded`` over the processing slots of a ``/slots`` answer; ValueError if it is not one."""
    try:
        slots = loads(text)
    except ValueError as exc:
        raise ValueError(f"/slots: not JSON: {exc}") from None
    if not isinstance(slots, list):
        raise ValueError("/slots: not a list of slots")
    total = 0.0
    for slot in slots:
        if not isinstance(slot, dict):
            raise ValueError("/slots: a slot that is not an object")
        if not slot.get("is_processing"):
            continue
        nxt = slot.get("next_token")
        first = nxt[0] if isinstance(nxt, list) and nxt else nxt
        decoded = first.get("n_decoded") if isinstance(first, dict) else None
        if not isinstance(decoded, int | float) or isinstance(decoded, bool) or decoded < 0:
            raise ValueError("/slots: a processing slot without next_token[0].n_decoded")
        total += float(decoded)
    return total


def with_in_progress(snapshot: Snapshot, tokens: float) -> Snapshot:
    """The snapshot with the ``generation_tokens_in_progress`` gauge."""
    return dataclasses.replace(snapshot, gauges={**snapshot.gauges, IN_PROGRESS: tokens})
