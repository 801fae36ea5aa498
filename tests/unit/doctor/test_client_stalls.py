"""Which bursts are the client's own doing (`tokometer.doctor.client_stalls.held_by_client`, through the stream's
shape): only those the client was stalled for most of the silence before. Stamps made by hand: the question is
arithmetic on them (the stall itself is made for real in tests/integration/test_doctor_client_stall.py)."""

from __future__ import annotations

from tokometer.doctor.client_stalls import held_by_client
from tokometer.doctor.streaming import stream_shape

MS = 1_000_000


def test_a_short_stall_just_before_a_buffered_answer_does_not_hide_the_buffering() -> None:
    # a proxy held the whole answer for 500 ms; the loaded client missed 25 ms just before it came
    shape = stream_shape(0, [500 * MS] * 30, 501 * MS, [(470 * MS, 495 * MS)])
    assert shape.client_held == 0 and shape.buffered


def test_a_stall_over_most_of_the_wait_is_the_clients_own() -> None:
    shape = stream_shape(0, [500 * MS] * 30, 501 * MS, [(100 * MS, 495 * MS)])
    assert shape.client_held == 29 and not shape.buffered


def test_a_proxys_blocks_stay_bursty_beside_short_stalls() -> None:
    stamps = [block * 200 * MS + k * 1000 for block in range(1, 5) for k in range(10)]
    stalls = [(block * 200 * MS - 30 * MS, block * 200 * MS - 2 * MS) for block in range(1, 5)]
    shape = stream_shape(0, stamps, 900 * MS, stalls)
    assert shape.client_held == 0 and shape.bursty


def test_events_waiting_through_a_long_stall_are_held() -> None:
    steady = [100 * MS + k * 10 * MS for k in range(20)]  # up to 290 ms
    after = [600 * MS + k * 1000 for k in range(30)]  # made from 300 to 590 ms, read together at 600
    shape = stream_shape(0, steady + after, 700 * MS, [(295 * MS, 599 * MS)])
    assert shape.client_held == 29 and not shape.bursty


def test_the_stall_must_end_just_before_the_burst() -> None:
    assert held_by_client(600 * MS, 300 * MS, [(290 * MS, 595 * MS)])
    assert not held_by_client(600 * MS, 300 * MS, [(290 * MS, 550 * MS)])  # it ended 50 ms before: read later
    assert not held_by_client(600 * MS, 300 * MS, [(590 * MS, 599 * MS)])  # 9 ms of a 300-ms silence
