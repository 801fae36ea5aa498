"""Generated hostile servers against every reader of a server's answer (issue 31, the one bounded reader).

Each example composes an attack (`tests.hostile_servers.Attack`: framing x stream format x flooding content x
piece size x trickle), serves it endless from a real loopback socket, and points one of the readers at it: the
stamping client as bench drives it (`StreamClient`, SSE and NDJSON protocols), the small-GET client of doctor
and the probes (`Probe`), and the blocking one under ``/metrics``, ``top`` and ``/tokenize``
(`util.blockinghttp`). For every example the reader must end within its deadline (and a margin for a loaded
host), keep its memory within its read budget (tracemalloc's peak), and report the failure as data with a clear
category (a record's error, an ``OSError``) rather than a traceback or a hang. The readers run with a small
budget (1 MiB) and a short deadline (1 s) so that the whole file takes seconds.
"""

from __future__ import annotations

import asyncio
import http.client
import time
import tracemalloc
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.hostile_servers import CONTENTS, Attack, hostile
from tokometer.client.probe import Probe
from tokometer.client.streamclient import StreamClient, Target, Timeouts
from tokometer.prompt import Prompt
from tokometer.protocols.common.base import GenerationParams
from tokometer.protocols.registry import create_client
from tokometer.records import RequestRecord
from tokometer.util.blockinghttp import request_bytes

BUDGET = 1024 * 1024
DEADLINE_S = 1.0
MARGIN_S = 10.0
"""Far above the deadline's own slack: what this catches is a reader that holds on (a hang, a flood read to the
end), not a loaded host."""
EVENT_LIMIT = 256 * 1024
MEMORY_BOUND = 4 * BUDGET + 16 * EVENT_LIMIT
"""The budget (what was kept, the copies one parse of it makes, the socket reads around it) and the decoding of
one unparseable event (orjson's error keeps the whole document: about 13 times the event)."""

_EXAMPLES = max(1, settings().max_examples * 2 // 3)
"""Two thirds of the profile's examples (20 in CI: each example serves real sockets for up to a second)."""

attacks = st.builds(
    Attack,
    framing=st.sampled_from(("length", "chunked", "close")),
    body=st.sampled_from(("sse", "ndjson")),
    content=st.sampled_from(CONTENTS),
    piece=st.sampled_from((1, 7, 200, 4096, 70000)),
    trickle_s=st.sampled_from((0.0, 0.0, 0.05)),
)


def _bounded(run: Callable[[], object]) -> tuple[object, float, int]:
    """``run()``'s result (or exception), its time and tracemalloc's peak."""
    tracemalloc.start()
    started = time.monotonic()
    try:
        result: object = run()
    except Exception as exc:  # the test judges which ones are allowed
        result = exc
    elapsed = time.monotonic() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return result, elapsed, peak


async def _bench_one(url: str, api: str) -> RequestRecord:
    timeouts = Timeouts(connect=5.0, idle=30.0, total=DEADLINE_S, max_event_bytes=EVENT_LIMIT,
                        max_response_bytes=BUDGET)
    client = StreamClient(Target(url), create_client(api), GenerationParams(model="m", max_tokens=8), timeouts)
    async with client:
        return await client.send(Prompt.from_text("hi"), RequestRecord(index=0, step=0))


@settings(max_examples=_EXAMPLES)
@given(attack=attacks)
def test_bench_request_against_a_generated_hostile_server_fails_bounded(attack: Attack) -> None:
    api = "openai-chat" if attack.body == "sse" else "ollama"
    path = "/v1/chat/completions" if attack.body == "sse" else "/api/chat"
    with hostile({path: attack}) as server:
        url = server.url if attack.body == "sse" else server.root
        record, elapsed, peak = _bounded(lambda: asyncio.run(_bench_one(url, api)))
    assert isinstance(record, RequestRecord), f"{attack.describe()}: raised {record!r}"
    assert record.error in ("protocol", "timeout", "malformed_stream"), (attack.describe(), record.error,
                                                                        record.error_detail)
    assert record.error_detail and "\n" not in record.error_detail
    assert elapsed < DEADLINE_S + MARGIN_S, attack.describe()
    assert peak < MEMORY_BOUND, f"{attack.describe()}: {peak / 2**20:.1f} MiB"


@settings(max_examples=_EXAMPLES)
@given(attack=attacks)
def test_small_get_against_a_generated_hostile_server_fails_bounded(attack: Attack) -> None:
    with hostile({"/": attack}) as server:
        probe = Probe(timeout_s=DEADLINE_S, max_body_bytes=BUDGET // 2)
        result, elapsed, peak = _bounded(lambda: asyncio.run(probe.get(server.root + "/metrics")))
    assert isinstance(result, OSError), f"{attack.describe()}: {result!r}"  # ConnectError, HttpTimeout, PeerReset
    assert elapsed < DEADLINE_S + MARGIN_S, attack.describe()
    assert peak < MEMORY_BOUND, f"{attack.describe()}: {peak / 2**20:.1f} MiB"


@settings(max_examples=_EXAMPLES)
@given(attack=attacks)
def test_blocking_get_against_a_generated_hostile_server_fails_bounded(attack: Attack) -> None:
    with hostile({"/": attack}) as server:
        result, elapsed, peak = _bounded(lambda: request_bytes(server.root + "/metrics", timeout_s=DEADLINE_S,
                                                               max_bytes=BUDGET // 2))
    assert isinstance(result, OSError), f"{attack.describe()}: {result!r}"
    assert not isinstance(result, http.client.HTTPException), attack.describe()
    assert elapsed < DEADLINE_S + MARGIN_S, attack.describe()
    assert peak < MEMORY_BOUND, f"{attack.describe()}: {peak / 2**20:.1f} MiB"
