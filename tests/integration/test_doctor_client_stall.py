"""tokometer doctor's streaming check when the client itself stalls as the answer streams (a saturated host).

On a busy 2-core machine the vLLM lane's doctor test read a healthy vLLM's stream as bursty ("52 % of gaps near
zero, then gaps up to 1,116 ms"): measured there, the client's event loop went unscheduled for 513 ms while the
answer streamed, and the events vLLM sent meanwhile waited in the socket and were read together. Here the stall
is made on purpose: the simulator streams an event every 20 ms, and half a second into the answer the client's
loop is blocked for 500 ms (a blocking sleep in a callback, as a process the OS does not schedule). The server's
stream is steady, so doctor must not call it bursty; it says the client stalled, as info.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from tests.conftest import SimServer
from tokometer.doctor import DoctorSpec, auth, reach, streaming
from tokometer.doctor.session import Session


async def _streaming_with_a_stall(url: str, stall_s: float | None) -> Session:
    session = Session(DoctorSpec(url=url))
    await reach.run(session)
    await auth.run(session)
    session.findings.clear()
    if stall_s is not None:
        asyncio.get_running_loop().call_later(0.25, time.sleep, stall_s)
    await streaming.run(session)
    return session


def test_events_read_together_after_the_clients_own_stall_are_not_a_burst(
        sim_factory: Callable[..., SimServer]) -> None:
    sim = sim_factory("--ttft-ms", "100", "--itl-ms", "20")
    session = asyncio.run(_streaming_with_a_stall(sim.openai_url, 0.5))
    found = {f.id: f for f in session.findings}
    shape = session.speed["stream_shape"]
    assert shape.client_held >= 10  # ~25 events waited in the socket and were read together after the stall
    assert "streaming.bursty" not in found, found["streaming.bursty"].title
    assert found["streaming.ok"].severity == "info"
    stalled = found["streaming.client_stalled"]
    assert stalled.severity == "info" and stalled.to_json()["evidence"]["client_stall_longest_ms"] >= 400


def test_without_a_stall_the_steady_stream_is_said_to_stream(sim_factory: Callable[..., SimServer]) -> None:
    sim = sim_factory("--ttft-ms", "100", "--itl-ms", "20")
    session = asyncio.run(_streaming_with_a_stall(sim.openai_url, None))
    ids = {f.id for f in session.findings}
    assert "streaming.ok" in ids and "streaming.bursty" not in ids
