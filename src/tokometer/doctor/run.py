"""`run_doctor`: the library call behind ``tokometer doctor``: every check in turn, one report.

Order: reach (can the server be spoken to; stop here if not), auth (is the first request taken;
later checks that send requests are skipped if not), context, streaming, speed, server, host.
Each check is a small module with a ``run(session)`` that adds findings to the shared `Session`;
a check that cannot run adds a `Skipped` entry instead. Nothing is stored.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable

from tokometer.doctor import auth, context, host, reach, server, speed, streaming
from tokometer.doctor.finding import DoctorReport
from tokometer.doctor.session import Session
from tokometer.doctor.spec import DoctorSpec

__all__ = ["run_doctor"]


async def run_doctor(spec: DoctorSpec) -> DoctorReport:
    """Examine ``spec``'s server; see the module docstring."""
    started = time.monotonic()
    swap_before = host.SwapCounters.now()
    session = Session(spec)
    seconds: dict[str, float] = {}

    async def timed(check: str, call: Awaitable[None]) -> None:
        begun = time.monotonic()
        await call
        seconds[check] = round(time.monotonic() - begun, 2)

    await timed("reach", reach.run(session))
    if session.reachable:
        await timed("auth", auth.run(session))
        if session.can_generate:
            await timed("context", context.run(session))
            await timed("streaming", streaming.run(session))
            await timed("speed", speed.run(session))
        else:
            for check in ("context", "streaming", "speed"):
                session.skip(check, "the first request failed (see auth)")
        await timed("server", server.run(session))
        await timed("host", host.run(session, swap_before, started))
    report = DoctorReport(url=spec.url, api=session.api, model=session.model, quick=spec.quick,
                          findings=session.findings, skipped=session.skipped, seconds=seconds)
    report.elapsed_s = time.monotonic() - started
    return report
