"""What tracing costs the gateway per request, in one process: its hooks with tracing off, its spans with it on.

A request makes these tracing calls (`tokometer.gateway.tracing`): with tracing off, a ``None`` check in
``Gateway.handle`` and ``Gateway.finish``, and per upstream attempt `attempt` (which hands back the attempt's own
coroutine) and `upstream_headers` (one context-variable read each); nothing per event. With it on: the request's
span (``Tracer.begin``, ``Tracer.finish``), one attempt span with its ``traceparent``, and the export, in
batches from the SDK's thread to an OTLP/HTTP receiver in this process that answers as a Collector does and
drops what it got. This times both loops over the same requests, best of ``--repeats``, as wall time on the
event loop and as CPU time of the whole process (the export thread included), per request. The end-to-end
figure is `bench/gateway_overhead.py --tracing`'s.

    .venv/bin/python bench/gateway_tracing_cost.py [--requests 2000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Coroutine
from types import SimpleNamespace
from typing import Any

from gateway_overhead import EXPORTS, otlp_receiver
from tokometer.gateway import tracing
from tokometer.gateway.config import TracingConfig, UpstreamConfig

_HEADERS = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "content-type": "json"}


def _fixtures() -> tuple[Any, Any, Any]:
    """An upstream, an outcome and its figures as the tracing hooks read them (only the fields they read)."""
    upstream = SimpleNamespace(name="pacer", cfg=UpstreamConfig(name="pacer", url="http://127.0.0.1:9/v1", model="m"))
    ctx = SimpleNamespace(route=SimpleNamespace(model="chat"), stream=True, requested_max_tokens=16)
    outcome = SimpleNamespace(ctx=ctx, answer=SimpleNamespace(model="m", finish_reason="length"), status=200,
                              upstream=upstream, fallback=False, retries=0, hedge=None, served_by=(),
                              record=SimpleNamespace(error=None), error=None)
    figures = SimpleNamespace(prompt=12, completion=16, ttft=1_200_000, overhead=250_000)
    return upstream, outcome, figures


async def _one_attempt(upstream: Any, hooks: bool) -> Any:
    if hooks:
        tracing.upstream_headers()  # what `Upstream.request_bytes` asks
    return SimpleNamespace(first_token_ns=2_000_000, call=SimpleNamespace(sent_ns=1_000_000, status=200), span=None)


async def _requests(tracer: tracing.Tracer | None, n: int, hooks: bool = True) -> None:
    """``n`` requests' tracing calls, in the order the gateway makes them (``hooks`` False: none, the code as it
    was before tracing)."""
    upstream, outcome, figures = _fixtures()
    for _ in range(n):
        if tracer is not None:
            tracer.begin(_HEADERS, "chat", "openai")
        attempt = _one_attempt(upstream, hooks)
        opened = await (tracing.attempt(attempt, upstream) if hooks else attempt)
        if opened.span is not None:  # `Opened.release`
            opened.span.end()
        if tracer is not None:
            tracer.finish(outcome, figures)


def _best(run: Callable[[], Coroutine[Any, Any, None]], n: int, repeats: int,
          after: Callable[[], object] = lambda: None) -> tuple[float, float]:
    """(wall, CPU) microseconds per request, best of ``repeats`` (each in a new event loop): the wall time of the
    loop alone (what the requests wait for), the CPU time of the process until ``after`` returns (the export)."""
    walls, cpus = [], []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        asyncio.run(run())
        walls.append(time.perf_counter() - wall)
        after()
        cpus.append(time.process_time() - cpu)
    return 1e6 * min(walls) / n, 1e6 * min(cpus) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    n, repeats = args.requests, args.repeats
    with contextlib.ExitStack() as stack:
        endpoint = stack.enter_context(otlp_receiver())
        tracer = tracing.tracer_for(TracingConfig(endpoint=endpoint))
        assert tracer is not None
        before = _best(lambda: _requests(None, n, hooks=False), n, repeats)
        off = _best(lambda: _requests(None, n), n, repeats)
        on = _best(lambda: _requests(tracer, n), n, repeats, after=lambda: tracer.provider.force_flush())
        tracer.shutdown()
    out = {"requests": n, "repeats": repeats, "no_hooks_wall_us": before[0], "off_wall_us": off[0],
           "off_cpu_us": off[1], "on_wall_us": on[0], "on_cpu_us": on[1], "exports": len(EXPORTS),
           "exported_bytes": sum(EXPORTS)}
    print(json.dumps(out))
    print(f"per request, best of {repeats} x {n}: the hooks with tracing off add {off[0] - before[0]:+.3f} us on the "
          f"loop ({before[0]:.2f} -> {off[0]:.2f} us for the loop's own work); "
          f"on {on[0]:.1f} us on the loop ({on[1]:.1f} us CPU, the export thread's included); "
          f"{sum(EXPORTS) / max(1, repeats * n):,.0f} bytes of OTLP per request")


if __name__ == "__main__":
    main()
