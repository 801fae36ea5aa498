"""What a run's numbers multiply to (`tokometer.benchmark.volume`) and find-max's reached concurrency."""

from __future__ import annotations

from typing import Any

import pytest

from tokometer.benchmark import findmax
from tokometer.benchmark.spec import BenchSpec
from tokometer.benchmark.volume import record_bytes, step_cap
from tokometer.cli.options import build_spec
from tokometer.load.profiles import LoadStep
from tokometer.metrics.summary import StepSummary
from tokometer.util.errors import ConfigError
from tokometer.util.limits import MAX_STEP_RECORD_BYTES, MAX_STEP_REQUESTS

URL = "http://127.0.0.1:1/v1"
FLAGS = {"rate": "--rate", "duration_s": "--duration", "requests": "--requests", "warmup": "--warmup",
         "output_tokens": "--output-tokens", "input_tokens": "--input-tokens", "ramp_time_s": "--ramp-time",
         "ramp_from": "--ramp-from", "concurrency": "--concurrency", "find_max": "--find-max"}


@pytest.mark.parametrize(("values", "said"), [
    ({"rate": [1e8], "duration_s": 5.0}, "--rate 1e+08/s × --duration 5 s = 500,000,000 requests a step, more than "
     "the 5,000,000 a step may hold: lower --rate or --duration"),
    ({"rate": [1000.0], "duration_s": 5000.0, "warmup": 10}, "--rate 1000/s × --duration 5000 s + --warmup 10 = "
     "5,000,010 requests a step"),
    ({"requests": 1_000_000, "output_tokens": 4096}, "--requests 1000000 = 1,000,000 requests × (1024 B + "
     "--output-tokens 4096 × 88 B an answer token) = 337 GiB of records a step, more than the 2 GiB"),
    ({"rate": [1e-6]}, "--requests 100 ÷ --rate 1e-06/s = 1e+08 s a step, longer than the 604800 s (a week)"),
    ({"input_tokens": 1_000_000, "requests": 1000}, "1,000 distinct prompts × --input-tokens 1000000 = "
     "1e+09 prompt tokens made before the run"),
    ({"find_max": "rate", "slo": "ttft_p99=2s", "search": "ramp", "ramp": "exponential", "ramp_from": 1.0,
      "rate": [1e9], "ramp_time_s": 10.0}, "the exponential ramp from --ramp-from 1 to --rate 1e+09/s over "
     "--ramp-time 10 s (482,549,424 arrivals) = 482,549,424 requests a step"),
    ({"find_max": "concurrency", "slo": "ttft_p99=2s", "concurrency": [16], "requests": 8}, "--find-max "
     "concurrency starts at --concurrency 16, but a probe of --requests 8 (with --warmup 0) never has more than 8 "
     "in flight"),
])
def test_what_the_options_multiply_to_is_refused_with_the_arithmetic(values: dict[str, Any], said: str) -> None:
    with pytest.raises(ConfigError) as refused:
        build_spec(BenchSpec, flags=FLAGS, url=URL, **values)
    assert said in str(refused.value), str(refused.value)


def test_a_closed_loop_for_a_duration_stops_counting_where_its_records_would_outgrow_memory() -> None:
    spec = BenchSpec(url=URL, concurrency=[64], duration_s=3600.0, output_tokens=128, warmup=5)
    cap = step_cap(spec)
    assert cap is not None and (cap + 5) * record_bytes(spec) <= MAX_STEP_RECORD_BYTES
    assert cap + 5 <= MAX_STEP_REQUESTS
    assert step_cap(BenchSpec(url=URL, concurrency=[64], requests=10)) is None  # its count bounds it
    assert step_cap(BenchSpec(url=URL, rate=[5.0], duration_s=10.0)) is None  # its rate over its duration does
    assert record_bytes(BenchSpec(url=URL, api="openai-embeddings", output_tokens=4096)) == 1024  # no events


def _concurrency_summary(sent: int, in_flight: float) -> StepSummary:
    return StepSummary.from_json({"requests_completed": sent, "requests_failed": 0, "duration_s": 1.0,
                                  "achieved_concurrency": in_flight, "ttft_ms": {"p50": 10, "p99": 10}})


@pytest.mark.parametrize(("sent", "in_flight", "reached"), [(8, 7.5, False), (64, 3.0, False), (64, 12.0, True),
                                                            (16, 9.0, True)])
def test_a_concurrency_probe_is_judged_by_the_concurrency_it_reached(sent: int, in_flight: float,
                                                                     reached: bool) -> None:
    objectives = findmax.parse_objectives("ttft_p99=1s")
    probe = findmax.judge(_concurrency_summary(sent, in_flight), LoadStep("concurrency", concurrency=16),
                          objectives, 0, "concurrency")
    assert probe.passed is reached and probe.unreached is not reached, probe
    if not reached:
        assert any(m.startswith("not reached") for m in probe.misses)


def test_the_search_never_probes_above_what_its_requests_can_hold_in_flight() -> None:
    history: list[tuple[float, bool]] = []
    while (value := findmax.next_probe("concurrency", history, 1.0, ceiling=8)) is not None:
        history.append((value, True))
    assert [v for v, _ in history] == [1.0, 2.0, 4.0, 8.0]
    assert [v for v, _ in _grow(3.0, ceiling=20)] == [3.0, 6.0, 12.0, 20.0]


def _grow(start: float, ceiling: float) -> list[tuple[float, bool]]:
    history: list[tuple[float, bool]] = []
    while (value := findmax.next_probe("concurrency", history, start, ceiling=ceiling)) is not None:
        history.append((value, True))
    return history


def test_the_answer_says_the_search_stopped_at_its_ceiling() -> None:
    summary = _concurrency_summary(8, 6.0)
    steps = [(i, LoadStep("concurrency", concurrency=c), summary) for i, c in enumerate((1, 2, 4, 8))]
    found = findmax.outcome({"find_max": "concurrency", "slo": "ttft_p99=1s", "requests": 8}, steps)
    assert found is not None and found.best == 8 and found.ceiling == 8
    assert "the most its requests can hold in flight" in found.answer()
    # a run saved before the ceiling, which probed 16 with 8 requests: 16 was never reached, and says so
    steps.append((4, LoadStep("concurrency", concurrency=16), _concurrency_summary(8, 7.0)))
    old = findmax.outcome({"find_max": "concurrency", "slo": "ttft_p99=1s", "requests": 8, "duration_s": None,
                           "warmup": "x"}, steps)
    assert old is not None and old.best == 8 and old.failed_at == 16
    assert "16 was never reached" in old.answer()


@pytest.mark.parametrize(("values", "said"), [
    ({"sessions": 2, "turns": "1000000000", "concurrency": [2]}, "--turns 1e+09 is too many: a session takes at "
     "most 1000 turns"),
    ({"sessions": 2, "turns": "2-900", "concurrency": [2], "input_tokens": 100_000}, "--turns 900 × (--input-tokens "
     "100000 + --output-tokens 128) = 90,115,200 tokens of history"),
    ({"sessions": 2, "think_time": "99999999999s", "concurrency": [2]}, "--think-time 99999999999s is too long"),
    ({"sessions": 5_000_000, "turns": "exp:8", "concurrency": [2]}, "--sessions 5000000 × 8 turns = 40,000,000 "
     "requests a step"),
    ({"find_max": "rate", "slo": "ttft_p99=" + "9" * 400 + "s"}, "--slo: ttft_p99 is longer than a week"),
    ({"images": 16, "image_size": "4096x4096"}, "100 distinct prompts × --images 16 × --image-size 4096x4096 at "
     "about 0.05 B a pixel = 1.25 GiB of images made before the run"),
    ({"concurrency": [2], "duration_s": 10.0, "warmup": 5_000_000}, "--warmup 5000000 = 5,000,000 requests × "
     "(1024 B + --output-tokens 128 × 88 B an answer token) = 57.2 GiB of records a step"),
    ({"concurrency": [2], "duration_s": 10.0, "input_tokens": 100_000}, "8,192 distinct prompts × --input-tokens "
     "100000 = 819,200,000 prompt tokens made before the run"),
])
def test_sessions_images_and_duration_steps_are_bounded_too(values: dict[str, Any], said: str) -> None:
    flags = {**FLAGS, "sessions": "--sessions", "turns": "--turns", "think_time": "--think-time",
             "images": "--images", "image_size": "--image-size"}
    with pytest.raises(ConfigError) as refused:
        build_spec(BenchSpec, flags=flags, url=URL, **values)
    assert said in str(refused.value), str(refused.value)
