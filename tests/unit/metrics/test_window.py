"""Time slices and steady state (`tokometer.metrics.window`) on hand-built `RequestRecord` lists, whose
in-flight counts and windows are worked out by hand in each test."""

from __future__ import annotations

import pytest

from tokometer.metrics.window import steady_state, time_slices
from tokometer.records import RequestRecord

S = 1_000_000_000  # ns a second
T0 = 10 * S  # the records' clock starts somewhere; times in the tests are from the step's start


def _req(index: int, sent: float, end: float, tokens: int = 10, ttft: float = 0.1, warmup: bool = False,
         due: float | None = None) -> RequestRecord:
    """A completed request sent at ``sent`` s and ended at ``end`` s, its ``tokens`` in one-token events spread
    evenly from ``sent + ttft`` to ``end``."""
    first = sent + ttft
    stamps = [int(T0 + (first + k * (end - first) / (tokens - 1)) * S) for k in range(tokens)]
    return RequestRecord(index=index, warmup=warmup, due_ns=int(T0 + (sent if due is None else due) * S),
                         sent_ns=int(T0 + sent * S), first_byte_ns=stamps[0], first_token_ns=stamps[0],
                         last_token_ns=stamps[-1], end_ns=int(T0 + end * S), event_ns=stamps,
                         event_tokens=[1.0] * tokens, output_tokens=tokens, output_tokens_source="usage",
                         status=200, finish_reason="length")


def _closed_loop() -> list[RequestRecord]:
    """Two slots, each request 1 s long: slot A sends at 0, 1, 2, 3; slot B at 0.5, 1.5, 2.5, then nothing (the
    drain begins when B's last request ends at 3.5)."""
    a = [_req(i, t, t + 1) for i, t in enumerate((0.0, 1.0, 2.0, 3.0))]
    b = [_req(4 + i, t, t + 1) for i, t in enumerate((0.5, 1.5, 2.5))]
    return a + b


def test_steady_state_of_a_closed_loop_leaves_out_the_first_wave_and_the_drain() -> None:
    state = steady_state(_closed_loop(), lambda t: 2.0, 2.0, 0.0, closed_loop=True, tolerance=0.1)
    # 2 in flight from B's first send (0.5 s) until B's last request ends (3.5 s).
    assert state["found"] and state["basis"] == "concurrency"
    assert (state["start_s"], state["end_s"]) == (0.5, 3.5)
    # Sent after 0.5 s and ended by 3.5 s: A's at 1 and 2, B's at 1.5 and 2.5; not the first wave (0, 0.5), not
    # A's last (3 -> 4, into the drain).
    assert state["requests"] == 4
    assert state["achieved_concurrency"] == pytest.approx(2.0)
    assert state["at_target"] is True
    # Completions in [0.5, 3.5): at 1, 1.5, 2, 2.5 and 3 (B's last, at 3.5, closes the window).
    assert state["request_throughput_rps"] == pytest.approx(5 / 3.0)
    assert state["ttft_ms"]["p50"] == pytest.approx(100.0)


def test_a_ramp_opens_the_steady_state_at_its_end() -> None:
    records = _closed_loop()
    state = steady_state(records, lambda t: min(2.0, 1 + t), 2.0, 1.2, closed_loop=True, tolerance=0.1)
    # At 1.2 s two are in flight already: the window opens at the ramp's end.
    assert state["start_s"] == pytest.approx(1.2)
    assert state["requests"] == 3  # sent at 1.5, 2 and 2.5, ended by 3.5


def test_a_load_that_never_reaches_its_target_has_no_steady_state() -> None:
    state = steady_state(_closed_loop(), lambda t: 4.0, 4.0, 0.0, closed_loop=True, tolerance=0.1)
    assert state["found"] is False and "never reached 3.60" in state["reason"]


def test_steady_state_of_an_open_loop_closes_at_the_last_send() -> None:
    # One request a second, each 2.5 s long: in flight 1, 2, 3, 3, ... then the drain after the last send at 5 s.
    records = [_req(i, float(i), i + 2.5) for i in range(6)]
    state = steady_state(records, lambda t: 1.0, 1.0, 0.0, closed_loop=False, tolerance=0.1)
    # In flight over [0, 5] s: requests 0-2 for 2.5 s each, 3 for 2 s, 4 for 1 s, 5 for 0 s: 10.5 / 5 = 2.1,
    # threshold 1.89, first reached at 1 s (the second send).
    assert state["threshold"] == pytest.approx(0.9 * 2.1)
    assert (state["start_s"], state["end_s"]) == (1.0, 5.0)
    assert state["requests"] == 1  # only the one sent at 2 s ends (4.5 s) before the last send


def test_open_loop_steady_state_counts_requests_finished_before_the_last_send() -> None:
    records = [_req(i, 0.5 * i, 0.5 * i + 0.6) for i in range(20)]  # 2/s, in flight 1 or 2
    state = steady_state(records, lambda t: 2.0, 2.0, 0.0, closed_loop=False, tolerance=0.1)
    # Mean in flight over [0, 9.5]: 19 requests x 0.6 s / 9.5 s = 1.2, threshold 1.08: first 2 in flight at the
    # second send (0.5 s; the first ends at 0.6 s).
    assert state["found"] and (state["start_s"], state["end_s"]) == (0.5, 9.5)
    assert state["send_rate_rps"] == pytest.approx(18 / 9.0) and state["at_target"]  # sends at 0.5 .. 9 s
    assert state["requests"] == 16  # sent after 0.5 s and ended by 9.5 s: those sent at 1 .. 8.5 s


def test_time_slices_place_requests_by_send_time_and_add_up_to_the_step() -> None:
    records = [*_closed_loop(), _req(99, 0.0, 0.2, warmup=True)]
    out = time_slices(records, 1.0, lambda t: 2.0)
    slices = out["slices"]
    assert out["requests_by"] == "sent" and out["slice_s"] == 1.0
    assert [s["start_s"] for s in slices] == [0.0, 1.0, 2.0, 3.0, 4.0]  # the last end, at 4 s, is in the last
    assert [s["requests"] for s in slices] == [2, 2, 2, 1, 0]  # sends 0, 0.5 | 1, 1.5 | 2, 2.5 | 3; no warm-up
    assert sum(s["requests"] for s in slices) == 7
    # The warm-up request loaded the server: in flight over [0, 1): A 1 s + B 0.5 s + warm-up 0.2 s.
    assert slices[0]["achieved_concurrency"] == pytest.approx(1.7)
    assert slices[3]["achieved_concurrency"] == pytest.approx(1.5)  # A 1 s, B's last 0.5 s
    # Tokens by arrival: every request's 10 tokens arrive evenly over its last 0.9 s; all 70 are counted once.
    assert sum(s["output_throughput_tok_s"] * 1.0 for s in slices) == pytest.approx(70.0)
    assert [s["target"] for s in slices] == [2.0] * 5


def test_a_ramps_slices_carry_its_mean_target() -> None:
    out = time_slices(_closed_loop(), 1.0, lambda t: min(4.0, 1 + 2 * t))
    assert [s["target"] for s in out["slices"]] == pytest.approx([2.0, 3.75, 4.0, 4.0, 4.0], abs=1e-3)


def test_too_many_slices_are_widened() -> None:
    out = time_slices(_closed_loop(), 0.001, lambda t: 2.0)
    assert len(out["slices"]) == 1000 and out["slice_s"] == pytest.approx(0.004, abs=1e-8)
    assert "more than 1000 slices" in out["note"]


def test_a_slice_under_the_shortest_is_held_to_it() -> None:
    """A width of 0.1 ns (int() of it is 0 ns) once divided by zero; slices are at least `MIN_SLICE_S` long."""
    from tokometer.metrics.window import slice_ns
    from tokometer.util.limits import MAX_SLICE_S, MIN_SLICE_S

    assert slice_ns(1e-10) == slice_ns(MIN_SLICE_S) == 1_000_000
    assert slice_ns(1e300) == slice_ns(float("inf")) == int(MAX_SLICE_S * 1e9)
    short = [_req(0, 0.0, 0.0005, tokens=2, ttft=0.0001)]
    out = time_slices(short, 1e-10, lambda t: 1.0)
    assert out["slice_s"] == 0.001 and len(out["slices"]) == 1 and out["slices"][0]["requests"] == 1
    assert len(time_slices(_closed_loop(), 1e300, lambda t: 2.0)["slices"]) == 1
