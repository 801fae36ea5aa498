"""tokometer doctor's streaming check when the client itself stalls as the answer streams (a saturated host).

On a busy 2-core machine the vLLM lane's doctor test read a healthy vLLM's stream as bursty ("52 % of gaps near
zero, then gaps up to 1,116 ms"): measured there, the client's event loop went unscheduled for 513 ms while the
answer streamed, and the events vLLM sent meanwhile waited in the socket and were read together. Here the stall
is made on purpose: the simulator streams an event every 20 ms, and half a second into the answer the client's
loop is blocked for 500 ms (a blocking sleep in a callback, as a process the OS does not schedule). The server's
stream is steady, so doctor must not call it bursty; it says the client stalled, as info.

The stall is timed from the moment doctor starts watching for stalls (just before it sends the streamed request),
not from the test's start: the prompt doctor makes first takes longer on a loaded machine, and a stall timed from
before it could end before the answer began streaming.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from tests.conftest import SimServer
from tokometer.doctor import DoctorSpec, auth, reach, streaming
from tokometer.doctor.client_stalls import StallWatch
from tokometer.doctor.session import Session

_STALL_AFTER_S = 0.25
"""The stall starts this long after doctor starts watching: past the 100 ms TTFT, well before the ~0.74 s end."""


class _StallingWatch(StallWatch):
    """doctor's own stall watch, which also blocks the loop for ``stall_s`` once the request is about to be sent."""

    stall_s = 0.5

    async def __aenter__(self) -> StallWatch:
        asyncio.get_running_loop().call_later(_STALL_AFTER_S, time.sleep, self.stall_s)
        return await super().__aenter__()


async def _streaming(url: str) -> Session:
    session = Session(DoctorSpec(url=url))
    await reach.run(session)
    await auth.run(session)
    session.findings.clear()
    await streaming.run(session)
    return session


def test_events_read_together_after_the_clients_own_stall_are_not_a_burst(
        sim_factory: Callable[..., SimServer], monkeypatch: pytest.MonkeyPatch) -> None:
    sim = sim_factory("--ttft-ms", "100", "--itl-ms", "20")
    monkeypatch.setattr(streaming, "StallWatch", _StallingWatch)
    session = asyncio.run(_streaming(sim.openai_url))
    found = {f.id: f for f in session.findings}
    shape = session.speed["stream_shape"]
    assert shape.client_held >= 10  # ~25 events waited in the socket and were read together after the stall
    assert "streaming.bursty" not in found, found["streaming.bursty"].title
    assert found["streaming.ok"].severity == "info"
    stalled = found["streaming.client_stalled"]
    assert stalled.severity == "info" and stalled.to_json()["evidence"]["client_stall_longest_ms"] >= 400


def test_without_a_stall_the_steady_stream_is_said_to_stream(sim_factory: Callable[..., SimServer]) -> None:
    sim = sim_factory("--ttft-ms", "100", "--itl-ms", "20")
    session = asyncio.run(_streaming(sim.openai_url))
    ids = {f.id for f in session.findings}
    assert "streaming.ok" in ids and "streaming.bursty" not in ids
