"""Server side: what the server's own ``/metrics`` says (vLLM, SGLang, llama.cpp, TGI, the gateway, the sim).

Read through `tokometer.observe` (prometheus parsing, the engines' metric vocabulary, the window
summary): the speed check's load step was sampled every 0.25 s, and its window is judged here;
with ``--quick`` one scrape is judged as it stands (then a queue or a full cache is other
traffic's). Findings: requests waiting in the server's queue, the KV cache near full, preemptions
(sequences evicted from the KV cache and recomputed).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from time import perf_counter_ns
from typing import Any

from tokometer.doctor.finding import Finding
from tokometer.doctor.session import Session

__all__ = ["KV_FULL", "gauge_max", "run", "server_findings"]

KV_FULL = 0.90
"""KV-cache use at or above this share is "near full"."""


def gauge_max(block: Mapping[str, Any], gauge: str) -> float | None:
    """The highest value a gauge of a server window (as JSON) took, or None where the server has no such gauge."""
    value = (block.get("gauges") or {}).get(gauge)
    return float(value["max"]) if isinstance(value, dict) and value.get("max") is not None else None


def server_findings(block: dict[str, Any], under: str) -> list[Finding]:
    """Findings from one `tokometer.observe.server_window.ServerWindow` (as JSON); ``under``: what load it covers."""
    out: list[Finding] = []
    waiting, running = gauge_max(block, "requests_waiting"), gauge_max(block, "requests_running")
    kv = gauge_max(block, "kv_cache_usage")
    preemptions = (block.get("counters") or {}).get("preemptions") or 0.0
    evidence = {"source": block.get("source"), "under": under, "requests_running_max": running,
                "requests_waiting_max": waiting, "kv_cache_usage_max": kv, "preemptions": preemptions}
    if waiting is not None and waiting >= 1:
        out.append(Finding("server.queue", "warning",
                           f"requests waited in the server's queue ({waiting:.0f} at most, {under}) while "
                           f"{running or 0:.0f} ran", evidence,
                           "The server runs fewer requests at once than it is sent: raise its batch limits (vLLM "
                           "--max-num-seqs, llama.cpp --parallel) if memory allows, or add replicas."))
    if kv is not None and kv >= KV_FULL:
        out.append(Finding("server.kv_cache_full", "warning", f"the KV cache was {100 * kv:.0f}% full ({under})",
                           evidence, "Long contexts or many requests fill the KV cache, and then requests queue or "
                           "are preempted: more GPU memory for the cache (--gpu-memory-utilization), a KV-cache "
                           "format of fewer bits (fp8), a shorter --max-model-len, or fewer sequences."))
    if preemptions > 0:
        out.append(Finding("server.preemptions", "warning", f"{preemptions:.0f} sequences were preempted ({under})",
                           evidence, "The server evicted running requests from the KV cache to make room, and "
                           "recomputes them: latency spikes. Give the cache more memory or admit fewer sequences."))
    if not out:
        out.append(Finding("server.ok", "info", f"/metrics ({block.get('source')}): no queue, KV cache at most "
                           f"{100 * (kv or 0):.0f}%, no preemptions ({under})", evidence))
    return out


async def run(session: Session) -> None:
    """The server check."""
    from tokometer.observe.server_window import server_window

    block = session.speed.get("server")
    under = "4 requests at once"
    if block is None:
        from tokometer.observe.prometheus import parse
        from tokometer.observe.sampler import fetch_text
        from tokometer.observe.watch import metrics_url

        url = metrics_url(session.spec.url)
        try:
            text = await asyncio.to_thread(fetch_text, url, session.connect_timeout_s)
            snapshot = parse(text, perf_counter_ns())
        except (OSError, ValueError) as exc:
            if "401" in str(exc) or "403" in str(exc):
                session.skip("server", f"{url} wants credentials doctor does not send there ({exc})")
                return
            session.add(Finding("server.no_metrics", "info", f"no server metrics at {url}",
                                {"error": " ".join(str(exc).split())[:160]},
                                "Without /metrics the server's queue, KV cache and preemptions stay hidden: "
                                "enable it (llama.cpp --metrics; vLLM, SGLang and TGI export it by default)."))
            return
        if snapshot.source == "unknown":
            session.skip("server", f"{url} is not an engine's metrics tokometer knows")
            return
        block = server_window([snapshot]).to_json()
        under = "at one look, with no load from doctor: other traffic"
    for finding in server_findings(block, under):
        session.add(finding)
