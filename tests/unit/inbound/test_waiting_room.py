"""The waiting room's line on its own: first come first served, bounded in length and in time.

The newcomers here are plain objects standing for connections (the room calls four methods of theirs); the room
with real connections, at a real gateway, is tests/integration/test_slow_clients.py and test_inbound_boundary.py.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from tokometer.inbound import waiting_room
from tokometer.inbound.waiting_room import MAX_WAITING, WaitingRoom


class _Slots:
    def __init__(self) -> None:
        self.free = 0
        self.none_can = False
        self.order: list[str] = []


class _Newcomer:
    def __init__(self, name: str, slots: _Slots) -> None:
        self.name, self.slots, self.outcome, self.closed = name, slots, "", False

    def make_room(self) -> float | None:
        if self.slots.none_can:
            return None
        if self.slots.free:
            self.slots.free -= 1
            return 0.0
        return 0.02

    def admit(self) -> None:
        self.outcome = "admitted"
        self.slots.order.append(self.name)

    def turn_away(self) -> None:
        self.outcome = "503"

    def gone(self) -> bool:
        return self.closed


async def _until(check: Callable[[], bool], within_s: float = 2.0) -> None:
    for _ in range(int(within_s / 0.005)):
        if check():
            return
        await asyncio.sleep(0.005)


def test_slots_go_to_the_line_in_the_order_it_came() -> None:
    async def scenario() -> None:
        slots, room = _Slots(), WaitingRoom()
        waiting = [_Newcomer(name, slots) for name in "abc"]
        for newcomer in waiting:
            assert room.join(newcomer, 0.02)
        waiting[1].closed = True  # b's client left meanwhile
        await asyncio.sleep(0.05)
        assert slots.order == [] and len(room) == 3
        for _ in range(2):
            slots.free += 1
            room.slot_freed()
            await _until(lambda: slots.free == 0)
        await _until(lambda: len(room) == 0)
        assert slots.order == ["a", "c"] and waiting[1].outcome == ""

    asyncio.run(scenario())


def test_the_line_is_bounded_in_length_and_in_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(waiting_room, "MAX_WAIT_S", 0.2)

    async def scenario() -> None:
        slots, room = _Slots(), WaitingRoom()
        waiting = [_Newcomer(str(i), slots) for i in range(MAX_WAITING)]
        assert all(room.join(newcomer, 0.02) for newcomer in waiting)
        assert not room.join(_Newcomer("late", slots), 0.02)  # full: the caller answers 503 at once
        began = time.monotonic()
        await _until(lambda: len(room) == 0)
        assert 0.15 < time.monotonic() - began < 1.0
        assert {n.outcome for n in waiting} == {"503"}

    asyncio.run(scenario())


def test_no_wait_when_every_slot_does_real_work() -> None:
    async def scenario() -> None:
        slots, room = _Slots(), WaitingRoom()
        first = _Newcomer("a", slots)
        assert room.join(first, 0.02)
        slots.none_can = True  # the request it waited on was answered: nothing can make room soon
        await _until(lambda: first.outcome != "")
        assert first.outcome == "503" and len(room) == 0

    asyncio.run(scenario())
