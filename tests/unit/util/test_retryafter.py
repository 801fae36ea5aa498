"""`retry_after_s`: RFC 9110's two forms of Retry-After, OpenAI's retry-after-ms, and nonsense refused."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tokometer.util.retryafter import MAX_RETRY_AFTER_S, retry_after_s

NOW = 1445412470.0  # 2015-10-21 07:27:50 GMT


def test_delay_seconds_and_an_http_date() -> None:
    assert retry_after_s({"retry-after": "120"}) == 120.0
    assert retry_after_s({"retry-after": " 0 "}) == 0.0
    assert retry_after_s({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, now=NOW) == 10.0
    assert retry_after_s({"retry-after": "Wed, 21 Oct 2015 07:20:00 GMT"}, now=NOW) == 0.0  # past: now


def test_milliseconds_are_read_first() -> None:
    assert retry_after_s({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after_s({"retry-after-ms": "soon", "retry-after": "9"}) == 9.0


def test_what_is_not_a_wait_is_none() -> None:
    for text in ("", "-1", "1.5", "１２", "soon", "Wed, 21 Oct 2015 07:28:00", "9" * 30, "86401", "x" * 10_000):
        assert retry_after_s({"retry-after": text}, now=NOW) is None, text
    assert retry_after_s({}) is None
    assert retry_after_s({"retry-after": "Wed, 21 Oct 2099 07:28:00 GMT"}, now=NOW) is None  # decades: broken


@given(st.text(max_size=80), st.text(max_size=80))
def test_any_header_gives_none_or_a_bounded_wait(seconds: str, millis: str) -> None:
    wait = retry_after_s({"retry-after": seconds, "retry-after-ms": millis}, now=NOW)
    assert wait is None or 0 <= wait <= MAX_RETRY_AFTER_S
