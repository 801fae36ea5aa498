"""llama.cpp's live token count (its /slots beside /metrics) and what `top` says of counts added at request ends.

The /slots answers are shaped as llama-server b11434 writes them (``server_slot::to_json``); the windows are
hand-made scrapes whose true token rate is known.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from tokometer.observe.llamacpp_slots import IN_PROGRESS, in_progress, slots_url, with_in_progress
from tokometer.observe.server_window import live_increase, server_window
from tokometer.observe.snapshot import Snapshot
from tokometer.observe.top import MIN_ENDS, top_view

S = 1_000_000_000


def _slot(i: int, processing: bool, decoded: int) -> dict[str, object]:
    return {"id": i, "n_ctx": 4096, "speculative": False, "is_processing": processing, "id_task": 7 + i,
            "next_token": [{"has_next_token": True, "has_new_line": False, "n_remain": 10, "n_decoded": decoded}]}


def test_in_progress_sums_the_busy_slots() -> None:
    text = json.dumps([_slot(0, True, 12), _slot(1, False, 0), _slot(2, True, 30)])
    assert in_progress(text) == 42
    assert in_progress("[]") == 0
    for bad in ("<html>", '{"error": "not supported"}', "[1]", json.dumps([{"is_processing": True}])):
        with pytest.raises(ValueError, match="/slots"):
            in_progress(bad)


def test_slots_url_is_beside_metrics() -> None:
    assert slots_url("http://127.0.0.1:8080/metrics") == "http://127.0.0.1:8080/slots"
    assert slots_url("http://h/prefix/metrics/") == "http://h/prefix/slots"


def test_live_increase_adds_the_running_requests_tokens() -> None:
    # 4 streams at 5 tok/s each; the counter moves only when a request ends (at t=3: +30 tokens)
    readings = [(100.0, 40.0), (100.0, 60.0), (100.0, 80.0), (130.0, 70.0), (130.0, 90.0)]
    assert live_increase(readings) == 80.0  # 220 - 140: 20 tokens per second over 4 s
    assert live_increase([(100.0, 50.0), (100.0, 49.0)]) == 0.0  # a skewed reading: no negative increase
    assert live_increase([(500.0, 10.0), (20.0, 5.0)]) == 25.0  # the counter reset: the server restarted


def _llama(t_s: float, predicted: float, running: float, decoded: float | None) -> Snapshot:
    snap = Snapshot(at_ns=int(t_s * S), source="llamacpp", gauges={"requests_running": running},
                    counters={"generation_tokens": predicted}, at_request_end=("generation_tokens",))
    return snap if decoded is None else with_in_progress(snap, decoded)


def test_top_reads_llamacpp_live_where_slots_answer() -> None:
    # 4 requests of 60 tokens generating 15 tok/s in all; none ends in the window
    snaps = [_llama(t, 1000.0, 4, 15.0 * t) for t in range(0, 5)]
    view = top_view("u", snaps, [], [], now_ns=4 * S, window_s=4)
    assert view.output_tok_s == pytest.approx(15.0)
    assert view.output_tok_s_history == pytest.approx((15.0, 15.0, 15.0, 15.0))
    assert (view.output_counted, view.output_in_progress, view.output_too_short) == ("live", True, False)
    assert view.server.live == ["generation_tokens"] and IN_PROGRESS in view.server.gauges


def test_a_count_added_at_request_ends_over_too_short_a_window_says_so() -> None:
    # the same load without /slots: the counter stands still for 4 s, then one request's 60 tokens at once
    snaps = [_llama(t, 1000.0, 4, None) for t in range(0, 4)] + [_llama(4, 1060.0, 4, None)]
    view = top_view("u", snaps, [], [], now_ns=4 * S, window_s=4)
    assert view.output_counted == "at request end" and not view.output_in_progress
    assert view.output_moved == 1 < MIN_ENDS and view.output_too_short
    assert view.output_tok_s == pytest.approx(15.0)  # 60 tokens / 4 s: right here by luck, 0 a second earlier
    earlier = top_view("u", snaps[:4], [], [], now_ns=3 * S, window_s=3)
    assert earlier.output_tok_s == 0.0 and earlier.output_too_short
    # idle: nothing ran, so 0 tok/s is a measurement, not a window too short
    idle = [_llama(t, 1060.0, 0, None) for t in range(0, 3)]
    assert not top_view("u", idle, [], [], now_ns=2 * S, window_s=2).output_too_short
    # the server's own count of finished requests, where it has one, says how many ended: 1 here, too few
    counted = [dataclasses.replace(sn, counters={**sn.counters, "requests_finished": 10.0 + (t == 4)})
               for t, sn in enumerate(snaps)]
    view = top_view("u", counted, [], [], now_ns=4 * S, window_s=4)
    assert view.output_request_ends == 1 and view.output_too_short
    many = [dataclasses.replace(sn, counters={**sn.counters, "requests_finished": 10.0 + 8 * (t == 4)})
            for t, sn in enumerate(snaps)]
    view = top_view("u", many, [], [], now_ns=4 * S, window_s=4)
    assert view.output_request_ends == 8 and view.output_moved == 1 and not view.output_too_short
    # many request ends in the window: a rate
    steady = [_llama(t, 1000.0 + 15.0 * t, 4, None) for t in range(0, 10)]
    view = top_view("u", steady, [], [], now_ns=9 * S, window_s=9)
    assert view.output_moved == 9 and not view.output_too_short
    window = server_window(steady)
    assert window.at_request_end == ["generation_tokens"] and window.moved == {"generation_tokens": 9}


def test_the_frame_says_when_the_window_is_too_short() -> None:
    from rich.console import Console

    from tokometer.report.top import render_top

    snaps = [_llama(t, 1000.0, 4, None) for t in range(0, 4)] + [_llama(4, 1060.0, 4, None)]
    console = Console(width=160, record=True, color_system=None)
    console.print(render_top(top_view("u", snaps, [], [], now_ns=4 * S, window_s=4)))
    screen = console.export_text()
    row = next(line for line in screen.splitlines() if line.startswith("output tok/s "))
    assert row.split()[2:4] == ["15.0", "-"]  # no per-scrape max: one scrape interval got the whole request
    assert ("llamacpp adds a request's tokens when it ends and the count moved in 1 of 4 scrape intervals: the "
            "window is too short for a rate") in " ".join(screen.split())
    live = [_llama(t, 1000.0, 4, 15.0 * t) for t in range(0, 5)]
    console = Console(width=160, record=True, color_system=None)
    console.print(render_top(top_view("u", live, [], [], now_ns=4 * S, window_s=4)))
    screen = console.export_text()
    row = next(line for line in screen.splitlines() if line.startswith("output tok/s "))
    assert row.split()[2:4] == ["15.0", "15.0"] and "too short" not in screen and "/slots" in screen
