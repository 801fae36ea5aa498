"""Putting a Ray actor's stamps on the driver's timeline (`tokometer.load.cluster`), on synthetic clocks."""

from __future__ import annotations

import itertools

from tokometer.load.cluster import ClockOffset
from tokometer.records import RequestRecord


def test_the_shortest_round_trip_gives_the_offset_and_half_of_it_the_accuracy() -> None:
    # The driver's clock ticks on; the actor's runs 5 s behind it. Round trips take 9, 3 and 7 us; the actor
    # reads its clock 1 us after the request left (asymmetric, as networks are).
    driver = iter([0, 9_000, 20_000, 23_000, 40_000, 47_000])
    reads = iter([1_000 - 5_000_000_000, 21_000 - 5_000_000_000, 41_000 - 5_000_000_000])
    clock = ClockOffset.measure(lambda: next(reads), samples=3, now=lambda: next(driver))
    assert clock.accuracy_ns == 1_500
    assert clock.offset_ns == 5_000_000_000 + 500  # (20,000 + 23,000) / 2 - 21,000 + 5 s: off by 0.5 us
    assert abs(clock.offset_ns - 5_000_000_000) <= clock.accuracy_ns
    assert not clock.shared and clock.measured_ns == clock.offset_ns


def test_an_actor_on_the_drivers_kernel_gets_offset_zero_and_keeps_the_measurement() -> None:
    ticks = itertools.count(0, 1_000)
    clock = ClockOffset.measure(lambda: next(ticks), samples=4, now=lambda: next(ticks)).same_kernel()
    assert clock.shared and clock.offset_ns == 0 and clock.measured_ns == 0 and clock.accuracy_ns == 1_000


def test_shift_clock_moves_every_stamp_and_leaves_what_did_not_happen() -> None:
    record = RequestRecord(index=3, due_ns=100, connect_ns=7, sent_ns=110, first_byte_ns=120, first_token_ns=130,
                           last_token_ns=150, end_ns=160, event_ns=[130, 140, 150], event_tokens=[1, 1, 1])
    record.shift_clock(1_000)
    assert (record.due_ns, record.sent_ns, record.first_byte_ns, record.first_token_ns, record.last_token_ns,
            record.end_ns) == (1_100, 1_110, 1_120, 1_130, 1_150, 1_160)
    assert record.event_ns == [1_130, 1_140, 1_150]
    assert record.connect_ns == 7 and record.first_answer_ns == 0  # a duration, and a stamp that was never taken


def test_actor_and_node_are_saved_with_the_workload_actor_0_included() -> None:
    record = RequestRecord(index=0, actor=0, node="0fcdf43787e2")
    assert record.workload() == {"actor": 0, "node": "0fcdf43787e2"}
    restored = RequestRecord(index=0)
    restored.set_workload(record.workload())
    assert (restored.actor, restored.node) == (0, "0fcdf43787e2")
    assert RequestRecord(index=0).workload() is None
