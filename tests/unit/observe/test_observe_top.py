"""`tokometer top`'s view model on hand-made scrapes and GPU readings, its sparklines, and one rendered frame."""

from __future__ import annotations

import json
import math

import pytest
from rich.console import Console

from tokometer.observe.sampler import Gap
from tokometer.observe.snapshot import GpuSample, Histogram, Snapshot
from tokometer.observe.top import top_view
from tokometer.observe.watch import is_local, metrics_url
from tokometer.report.top import render_top, sparkline

S = 1_000_000_000
URL = "http://127.0.0.1:8000/metrics"
INF = math.inf
GIB = 2.0**30


def _snap(t_s: float, running: float, waiting: float, kv: float, gen: float, prompt: float, finished: float,
          preempted: float, ttft: tuple[float, float, float], ttft_sum: float, source: str = "vllm") -> Snapshot:
    le_50ms, le_100ms, total = ttft
    return Snapshot(
        at_ns=int(t_s * S), source=source,
        gauges={"requests_running": running, "requests_waiting": waiting, "kv_cache_usage": kv},
        counters={"generation_tokens": gen, "prompt_tokens": prompt, "requests_finished": finished,
                  "preemptions": preempted},
        histograms={"ttft": Histogram(buckets=((0.05, le_50ms), (0.1, le_100ms), (INF, total)), count=total,
                                      sum=ttft_sum)},
        raw={"a": 1.0, "b": 2.0})


SNAPS = [
    _snap(5, 9, 9, 0.9, 0, 0, 0, 0, (0, 0, 0), 0.0),  # before the window: left out
    _snap(10, 2, 0, 0.1, 1000, 500, 10, 1, (10, 10, 10), 0.3),
    _snap(12, 4, 1, 0.2, 1400, 700, 12, 1, (12, 14, 14), 0.5),
    _snap(14, 3, 2, 0.3, 2000, 900, 14, 3, (14, 18, 18), 0.7),
]


def _gpu(t_s: float, utilization: float, memory_gib: float, power: float) -> GpuSample:
    return GpuSample(at_ns=int(t_s * S), index=0, name="H200", utilization=utilization,
                     memory_used_bytes=memory_gib * GIB, memory_total_bytes=141 * GIB, power_w=power,
                     power_limit_w=700.0, temperature_c=60.0, source="nvml")


GPUS = [_gpu(4, 0.0, 1, 50), _gpu(10, 0.5, 10, 100), _gpu(12, 0.7, 20, 200), _gpu(14, 0.9, 30, 300)]


def test_the_window_gives_gauges_now_rates_percentiles_and_history() -> None:
    view = top_view(URL, SNAPS, [], [], now_ns=20 * S, window_s=10)
    assert view.source == "vllm"
    assert (view.server.samples, view.server.gaps, view.server.duration_s) == (3, 0, 4.0)
    assert (view.running, view.waiting, view.kv_cache_usage) == (3, 2, 0.3)
    assert view.output_tok_s == 250.0  # (2000 - 1000) / 4 s
    assert view.prompt_tok_s == 100.0
    assert view.requests_s == 1.0
    assert view.preemptions == 2.0
    assert view.running_history == (2, 4, 3)
    assert view.waiting_history == (0, 1, 2)
    assert view.kv_history == (0.1, 0.2, 0.3)
    assert view.output_tok_s_history == (200.0, 300.0)
    ttft = view.latency_ms("ttft")
    assert ttft is not None
    # the window's increase: 4 observations <= 50 ms, 4 more <= 100 ms, sum 0.4 s
    assert ttft["count"] == 8
    # rank 4: the top of the first bucket, so at most 50 ms (no number); rank 7.92 in (50, 100]: a range
    assert ttft["p50"] is None and ttft["quantiles"]["p50"] == {"kind": "below", "lower": 0.0, "upper": 50.0,
                                                                 "estimate": pytest.approx(50.0)}
    assert ttft["p99"] is None and ttft["quantiles"]["p99"] == {"kind": "range", "lower": 50.0, "upper": 100.0,
                                                                 "estimate": pytest.approx(99.0)}
    assert ttft["mean"] == pytest.approx(50.0)
    assert view.latency_ms("tpot") is None
    assert view.no_answer_s is None
    assert view.raw_samples == 2 and view.raw == {}


def test_gpus_show_their_newest_reading_window_and_history() -> None:
    view = top_view(URL, SNAPS, GPUS, [], now_ns=20 * S, window_s=10)
    (gpu,) = view.gpus
    assert gpu.latest.utilization == 0.9
    assert gpu.utilization_history == (0.5, 0.7, 0.9)
    assert gpu.memory_history == (10 * GIB, 20 * GIB, 30 * GIB)
    assert gpu.power_history == (100.0, 200.0, 300.0)
    assert gpu.window.samples == 3
    assert gpu.window.utilization_mean == pytest.approx(0.7)
    assert gpu.window.energy_j == pytest.approx(800.0)  # trapezoids: (100+200)/2*2 + (200+300)/2*2
    data = json.loads(json.dumps(view.to_json()))
    assert data["gpus"][0]["now"]["utilization"] == 0.9
    assert data["gpus"][0]["history"]["power_w"] == [100.0, 200.0, 300.0]


def test_a_failed_scrape_after_the_newest_answer_says_how_long_there_was_none() -> None:
    gaps = [Gap(11 * S, "server", "earlier, answered since"), Gap(15 * S, "gpu", "not the server"),
            Gap(16 * S, "server", "connection refused")]
    view = top_view(URL, SNAPS, [], gaps, now_ns=20 * S, window_s=10)
    assert view.no_answer_s == 6.0  # since the answer at 14 s
    assert view.no_answer_reason == "connection refused"
    assert view.server.gaps == 2
    assert view.running == 3  # the last answer's gauges are still shown
    answered_again = top_view(URL, [*SNAPS, _snap(17, 0, 0, 0, 2000, 900, 14, 3, (14, 18, 18), 0.7)], [], gaps,
                              now_ns=20 * S, window_s=10)
    assert answered_again.no_answer_s is None


def test_a_window_without_scrapes_shows_nothing_but_the_silence() -> None:
    view = top_view(URL, SNAPS, [], [Gap(30 * S, "server", "timed out")], now_ns=40 * S, window_s=10)
    assert view.source == "none" and view.running is None and view.output_tok_s is None
    assert view.no_answer_s == 26.0
    never = top_view(URL, [], [], [Gap(3 * S, "server", "refused")], now_ns=5 * S, window_s=10, started_ns=1 * S)
    assert never.no_answer_s == 4.0


def test_a_counter_reset_in_the_history_counts_the_new_value() -> None:
    snaps = [_snap(10, 1, 0, 0, 1000, 0, 0, 0, (0, 0, 0), 0.0), _snap(11, 1, 0, 0, 100, 0, 0, 0, (0, 0, 0), 0.0)]
    view = top_view(URL, snaps, [], [], now_ns=12 * S, window_s=10)
    assert view.output_tok_s_history == (100.0,)
    assert view.output_tok_s == 100.0


def test_the_simulator_names_the_engine_it_speaks_for() -> None:
    base = _snap(10, 1, 0, 0, 0, 0, 0, 0, (0, 0, 0), 0.0, source="tokometer-sim")
    marked = Snapshot(at_ns=base.at_ns, source=base.source, gauges=base.gauges,
                      raw={'tokometer_sim_info{metrics_names="sglang"}': 1.0})
    assert top_view(URL, [marked], [], [], now_ns=11 * S, window_s=10).source == "tokometer-sim (sglang names)"
    unknown = Snapshot(at_ns=base.at_ns, source="unknown", raw={"my_metric": 4.0})
    view = top_view(URL, [unknown], [], [], now_ns=11 * S, window_s=10)
    assert view.raw == {"my_metric": 4.0}


def test_sparklines_scale_from_zero_to_the_highest_value() -> None:
    assert sparkline([0, 1, 2, 3, 4, 5, 6, 7]) == "▁▂▃▄▅▆▇█"
    assert sparkline([0.5, 1.0], hi=1.0) == "▅█"
    assert sparkline([10, 11, 12], lo=None) == "▁▅█"
    assert sparkline([3, 3, 3]) == "███"
    assert sparkline([0, 0]) == "▁▁"
    assert sparkline([]) == ""
    assert sparkline([0, 7, 0, 7, 7], width=2) == "██"  # the last 2 values, scaled among themselves
    assert sparkline([0, 1, 2], width=0) == ""
    assert sparkline([1.0, math.nan, 2.0]) == "▅█"


def test_one_frame_shows_the_numbers() -> None:
    view = top_view(URL, SNAPS, GPUS, [Gap(16 * S, "server", "connection refused")], now_ns=20 * S, window_s=10)
    console = Console(width=120, record=True, color_system=None)
    console.print(render_top(view, interval_s=1.0))
    screen = console.export_text()
    assert "tokometer top" in screen and URL in screen and "vllm" in screen
    assert "(no answer for 6 s: connection refused)" in screen
    lines = {line.split("  ")[0].strip(): line for line in screen.splitlines() if line.strip()}
    assert lines["requests running"].split()[2:5] == ["3", "3.0", "4"]
    assert "▅█▆" in lines["requests running"]  # 2, 4, 3 against 0..4
    assert lines["output tok/s"].split()[2:4] == ["250.0", "300.0"]
    # p50 in the first bucket is a bound; p90/p99 in (50, 100] a range; the mean (exact) a number
    assert lines["TTFT"].split()[1:] == ["≤", "50", "50–100", "50–100", "50.0", "8"]
    assert "0 H200" in screen and "90%" in screen and "30.0 / 141.0 GiB" in screen and "300 / 700 W" in screen


@pytest.mark.parametrize(("given", "read"), [
    ("http://127.0.0.1:8000", "http://127.0.0.1:8000/metrics"),
    ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/metrics"),
    ("127.0.0.1:8000", "http://127.0.0.1:8000/metrics"),
    ("https://host:9400/metrics", "https://host:9400/metrics"),
    ("http://host/prefix/metrics/", "http://host/prefix/metrics/"),
])
def test_the_url_is_a_server_or_its_metrics(given: str, read: str) -> None:
    assert metrics_url(given) == read


def test_local_servers_are_recognised() -> None:
    assert is_local("http://127.0.0.1:1/metrics") and is_local("http://localhost/metrics")
    assert is_local("http://[::1]:8/metrics") and not is_local("http://10.0.0.1/metrics")


def test_speculative_decoding_shows_when_the_engine_drafted() -> None:
    def drafted(t_s: float, drafts: float, accepted: float) -> Snapshot:
        return Snapshot(at_ns=int(t_s * S), source="vllm", gauges={"requests_running": 2.0},
                        counters={"generation_tokens": 10 * t_s, "spec_drafts": drafts,
                                  "spec_draft_tokens": 3 * drafts, "spec_accepted_tokens": accepted})

    view = top_view(URL, [drafted(10, 100, 150), drafted(12, 300, 450)], [], [], now_ns=13 * S, window_s=10)
    frame = view.to_json()["speculative"]
    assert frame["acceptance_rate"] == pytest.approx(0.5) and frame["acceptance_length"] == pytest.approx(2.5)
    console = Console(width=120, record=True, color_system=None)
    console.print(render_top(view, interval_s=1.0))
    lines = {line.split("  ")[0].strip(): line for line in console.export_text().splitlines() if line.strip()}
    assert "50%" in lines["spec acceptance"] and "2.50" in lines["spec tokens/step"]
    plain = top_view(URL, SNAPS, GPUS, [], now_ns=20 * S, window_s=10)
    assert plain.to_json()["speculative"] is None
    console = Console(width=120, record=True, color_system=None)
    console.print(render_top(plain, interval_s=1.0))
    assert "spec" not in console.export_text()
