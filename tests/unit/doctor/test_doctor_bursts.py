"""The decode speed read from a stream's bursts (`burst_decode_tok_s`), on hand-computed stamps."""

from __future__ import annotations

import pytest

from tokometer.doctor.streaming import burst_decode_tok_s

MS = 1_000_000


def test_blocks_of_a_stream_made_at_50_tokens_per_second() -> None:
    """24 one-token events made every 20 ms from t=100 ms; a proxy passes the complete events 0-20 when event
    21 (cut by the block's end) is made, at 100 + 21 * 20 = 520 ms, and the rest at the end, 560 ms. Made
    between the two arrivals: events 22 and 23, 2 tokens in 40 ms = 50 tok/s. The per-event figure reads 23
    tokens after the first in 560 - 520 ms: 575 tok/s."""
    stamps = [520 * MS] * 21 + [560 * MS] * 3
    assert burst_decode_tok_s(stamps, [1.0] * 24) == pytest.approx(50.0)


def test_separate_events_give_the_per_event_speed() -> None:
    stamps = [(100 + 20 * k) * MS for k in range(10)]  # 9 tokens after the first in 180 ms
    assert burst_decode_tok_s(stamps, [1.0] * 10) == pytest.approx(50.0)


def test_a_whole_answer_at_once_has_no_speed() -> None:
    assert burst_decode_tok_s([700 * MS] * 32, [1.0] * 32) is None
    assert burst_decode_tok_s([], []) is None
