"""Where a new connection waits, unread, when a server at its connection limit has no connection to close yet.

At the limit, a new connection takes the slot of one that does not progress (`tokometer.inbound.connections`). A request
still on its way but keeping up its minimum rate is not closed in its first `SLOW_AFTER_S`; were the new connection
refused at once while only such requests hold the slots, clients that trickle just above the minimum rate and
reconnect the moment they are refused would keep every slot in its first second for ever, and a client that sends
its request at once would mostly get 503 (35 clients trickling 1,000 bytes a second, twice the minimum, against 32
slots: 29 and 31 of 40 normal requests refused in two runs, in waves as the trickles' connections came to their
first second together). So a new connection that finds only such requests waits here instead, its bytes unread, in
the order connections came, for at most `MAX_WAIT_S`: the first in line takes a slot as soon as one can be made (one
of those requests has been on its way `SLOW_AFTER_S`, fell behind, or ended). However fast the slow clients
reconnect, they join the line behind it. At most `MAX_WAITING` wait; beyond, 503 at once.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Protocol

__all__ = ["CHECK_EVERY_S", "MAX_WAITING", "MAX_WAIT_S", "SLOW_AFTER_S", "Newcomer", "WaitingRoom"]

SLOW_AFTER_S = 1.0
"""A request still on its way after this long, though keeping up ``min_body_rate``, may make room at the connection
limit: the slowest first, after those behind."""

MAX_WAIT_S = 2 * SLOW_AFTER_S
"""How long a new connection may wait for a slot: twice the time after which any request on its way can make room."""

MAX_WAITING = 64
"""Connections that may wait at once (each holds a file descriptor; `tokometer.inbound.connections.fd_budget`
keeps that many spare)."""

CHECK_EVERY_S = 0.1
"""The longest the first in line goes without looking for a slot again (it looks sooner when a request it waits
on can make room sooner, and at once when a connection closes)."""


class Newcomer(Protocol):
    """A connection that may wait in a `WaitingRoom`."""

    def make_room(self) -> float | None:
        """Take a slot (closing a connection that does not progress, if the limit needs one): 0.0 if it has one;
        else the seconds until a request on its way can make room; None if none can (every slot does real work)."""

    def admit(self) -> None:
        """Start reading: the connection has its slot."""

    def turn_away(self) -> None:
        """Answer 503 and close: no slot came in time."""

    def gone(self) -> bool:
        """The client has closed (or the connection was refused) meanwhile."""


class WaitingRoom:
    """One server's line of new connections waiting for a slot, first come first served (module docstring)."""

    def __init__(self) -> None:
        self._line: deque[tuple[Newcomer, float]] = deque()
        self._timer: asyncio.Handle | None = None
        self._due = 0.0
        """When the timer fires (uvloop's handle of a timer due at once does not say)."""

    def __len__(self) -> int:
        return len(self._line)

    def join(self, newcomer: Newcomer, wait_s: float) -> bool:
        """Put ``newcomer`` in line (it is not read meanwhile); False if the line is full. ``wait_s``: when a
        slot may be made."""
        if len(self._line) >= MAX_WAITING:
            return False
        self._line.append((newcomer, time.monotonic()))
        self._check_in(wait_s)
        return True

    def leave(self, newcomer: Newcomer) -> None:
        """``newcomer`` closed while waiting."""
        self._line = deque(entry for entry in self._line if entry[0] is not newcomer)

    def slot_freed(self) -> None:
        """A connection with a slot has closed: the first in line may take it."""
        if self._line:
            self._check_in(0.0)

    def _check_in(self, wait_s: float) -> None:
        delay = min(max(wait_s, 0.005), CHECK_EVERY_S) if wait_s > 0 else 0.0
        due = time.monotonic() + delay
        if self._timer is not None:
            if self._due <= due:
                return
            self._timer.cancel()
        self._timer, self._due = asyncio.get_running_loop().call_later(delay, self._let_in), due

    def _let_in(self) -> None:
        """Admit from the front of the line while slots can be had; turn away those that waited `MAX_WAIT_S`."""
        self._timer = None
        now = time.monotonic()
        while self._line:
            first, since = self._line[0]
            if first.gone():
                self._line.popleft()
                continue
            wait_s = first.make_room()
            if wait_s == 0.0:
                self._line.popleft()
                first.admit()
            elif wait_s is None or now - since >= MAX_WAIT_S:
                self._line.popleft()
                first.turn_away()
            else:
                self._check_in(min(wait_s, since + MAX_WAIT_S - now))
                return
