"""One reading of a server for `bench` and `top`: its ``/metrics``, and where it is llama.cpp its ``/slots`` too.

`scraper` makes the function the sampler calls: ``GET /metrics`` parsed into a `Snapshot`; when the
engine is llama.cpp, ``GET /slots`` beside it adds the tokens of the requests still running
(`observe.llamacpp_slots`), so that its output tokens per second move with every token rather than
when a request ends. A llama-server started with ``--no-slots`` (or any answer there that is not its
slots) is not asked again: its counter is then read as it is, marked as counted at request ends.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from time import perf_counter_ns

from tokometer.observe.llamacpp_slots import in_progress, slots_url, with_in_progress
from tokometer.observe.prometheus import parse
from tokometer.observe.sampler import fetch_text
from tokometer.observe.snapshot import Snapshot

__all__ = ["scraper"]


def scraper(url: str, timeout_s: float, context: ssl.SSLContext | None = None) -> Callable[[], Snapshot]:
    """A function reading ``url`` (a ``/metrics`` URL) once per call; OSError/ValueError as `fetch_text`/`parse`."""
    slots = {"answers": True}

    def scrape() -> Snapshot:
        snap = parse(fetch_text(url, timeout_s, context), perf_counter_ns())
        if snap.source == "llamacpp" and slots["answers"]:
            try:
                snap = with_in_progress(snap, in_progress(fetch_text(slots_url(url), timeout_s, context)))
            except (OSError, ValueError):
                slots["answers"] = False
        return snap

    return scrape
