"""The statistics of ``tokometer compare`` on synthetic samples of known difference, its verdict rule, its
threshold parsing and its test of whether two runs are alike."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from tokometer.compare.gate import (
    DEFAULT_THRESHOLDS,
    METRICS,
    StepSample,
    _resample_counts,
    _weighted_percentile,
    cliffs_delta,
    compare_samples,
    parse_thresholds,
    unlike_fields,
    verdict,
)
from tokometer.records import RequestRecord
from tokometer.store.runs import StoredRun
from tokometer.util.errors import ConfigError

_MS = 1_000_000


def _records(tpot_ms: np.ndarray, *, ttft_ms: float = 20.0, tokens: int = 32,
             failed: int = 0) -> list[RequestRecord]:
    """A closed-loop step of one request per TPOT value: each takes ttft + (tokens - 1) * tpot, one after
    another (so the duration is the sum of E2E and the achieved concurrency 1), plus ``failed`` failures."""
    records = []
    clock = 1_000_000_000
    for i, tpot in enumerate(tpot_ms):
        first = clock + int(ttft_ms * _MS)
        stamps = [first + int(k * tpot * _MS) for k in range(tokens)]
        records.append(RequestRecord(index=i, due_ns=clock, sent_ns=clock, first_token_ns=first,
                                     last_token_ns=stamps[-1], end_ns=stamps[-1] + 1, event_ns=stamps,
                                     event_tokens=[1.0] * tokens, output_tokens=tokens))
        clock = stamps[-1] + 1
    for j in range(failed):
        records.append(RequestRecord(index=len(tpot_ms) + j, due_ns=clock, sent_ns=clock, end_ns=clock + _MS,
                                     error="http_5xx"))
        clock += _MS
    return records


def _sample(tpot_ms: np.ndarray, failed: int = 0) -> StepSample:
    return StepSample.of(_records(tpot_ms, failed=failed))


def _by_key(sample_base: StepSample, sample_new: StepSample, **kwargs: Any) -> dict[str, Any]:
    return {x.key: x for x in compare_samples(sample_base, sample_new, **kwargs)}


def test_the_weighted_percentile_is_numpys_percentile_of_the_resample() -> None:
    rng = np.random.default_rng(7)
    values = np.sort(rng.lognormal(size=60))
    counts = _resample_counts(60, 50, rng)
    assert (counts.sum(axis=1) == 60).all()
    for q in (0.0, 37.5, 50.0, 99.0, 100.0):
        expected = [np.percentile(np.repeat(values, row), q) for row in counts]
        assert np.allclose(_weighted_percentile(values, counts, q), expected)


def test_cliffs_delta() -> None:
    assert cliffs_delta([1, 2, 3], [4, 5]) == 1.0
    assert cliffs_delta([4, 5], [1, 2, 3]) == -1.0
    assert cliffs_delta([1, 2], [1, 2]) == 0.0
    assert cliffs_delta([1, 3], [2]) == 0.0
    assert cliffs_delta([], [1]) is None


@pytest.mark.parametrize(("change", "ci", "higher_is_better", "expected"), [
    (0.10, (0.08, 0.12), False, "regression"),  # slower, sure, above 5 %
    (-0.10, (-0.12, -0.08), False, "improvement"),
    (-0.10, (-0.12, -0.08), True, "regression"),  # less throughput
    (0.04, (0.03, 0.05), False, "within threshold"),  # sure, but smaller than the threshold
    (0.01, (-0.02, 0.03), False, "no change"),
    (0.08, (-0.01, 0.15), False, "cannot tell"),  # large, but the interval holds zero
    (0.02, (0.01, 0.09), False, "cannot tell"),  # small, but could be above the threshold
    (None, None, False, "cannot tell"),
])
def test_the_verdict_rule(change: float | None, ci: tuple[float, float] | None, higher_is_better: bool,
                          expected: str) -> None:
    assert verdict(change, ci, 0.05, higher_is_better) == expected


def test_a_known_ten_percent_slower_decode_is_a_regression() -> None:
    rng = np.random.default_rng(1)
    base = _sample(rng.normal(5.0, 0.1, 200))
    new = _sample(rng.normal(5.5, 0.1, 200))
    result = _by_key(base, new)
    tpot = result["tpot_p50"]
    assert tpot.verdict == "regression"
    assert tpot.ci_low < 0.10 < tpot.ci_high
    assert abs(tpot.change - 0.10) < 0.02
    assert tpot.effect_size > 0.99  # nearly every NEW request is slower
    assert result["itl_p50"].verdict == "regression"
    assert result["output_throughput"].verdict == "regression"  # less throughput: the bad direction
    assert result["output_throughput"].change < 0
    assert result["ttft_p50"].verdict == "no change"
    assert result["error_rate"].verdict == "no change"
    assert "goodput" not in result  # no objectives given


def test_a_step_of_many_gaps_is_judged_on_a_thinned_bootstrap() -> None:
    rng = np.random.default_rng(9)
    base = StepSample.of(_records(rng.normal(5.0, 0.1, 200), tokens=128))
    new = StepSample.of(_records(rng.normal(5.5, 0.1, 200), tokens=128))
    assert len(base.gaps["itl_ms"][0]) > 20_000
    itl = _by_key(base, new, metrics=[d for d in METRICS if d.key == "itl_p50"])["itl_p50"]
    assert itl.verdict == "regression" and itl.ci_low < itl.change < itl.ci_high


def test_the_same_distribution_raises_no_alarm() -> None:
    rng = np.random.default_rng(2)
    alarms = 0
    for _ in range(20):
        base, new = _sample(rng.normal(5.0, 0.3, 100)), _sample(rng.normal(5.0, 0.3, 100))
        alarms += sum(x.verdict in ("regression", "improvement") for x in compare_samples(base, new))
    assert alarms == 0


def test_noise_wider_than_the_threshold_cannot_tell() -> None:
    rng = np.random.default_rng(3)
    base, new = _sample(rng.lognormal(1.5, 0.8, 12)), _sample(rng.lognormal(1.5, 0.8, 12))
    assert _by_key(base, new)["tpot_p50"].verdict == "cannot tell"


def test_a_tail_percentile_of_few_requests_cannot_tell() -> None:
    rng = np.random.default_rng(8)
    few = _by_key(_sample(rng.normal(5.0, 0.1, 100)), _sample(rng.normal(5.5, 0.1, 100)))
    assert few["tpot_p50"].verdict == "regression"
    assert few["tpot_p99"].verdict == "cannot tell"
    assert few["tpot_p99"].reason == "100 values in a run; a p99 is judged from 500 (at least 5 beyond it)"
    many = _by_key(_sample(rng.normal(5.0, 0.1, 500)), _sample(rng.normal(6.0, 0.1, 500)),
                   metrics=[d for d in METRICS if d.key == "tpot_p99"])
    assert many["tpot_p99"].verdict == "regression" and many["tpot_p99"].reason is None


def test_the_interval_is_the_same_every_time() -> None:
    rng = np.random.default_rng(4)
    base, new = _sample(rng.normal(5.0, 0.3, 50)), _sample(rng.normal(5.2, 0.3, 50))
    assert compare_samples(base, new) == compare_samples(base, new)
    assert compare_samples(base, new, seed=1) != compare_samples(base, new, seed=2)


def test_point_values_match_the_step_summary() -> None:
    from tokometer.metrics import summarize

    rng = np.random.default_rng(5)
    tpot = rng.normal(5.0, 0.3, 30)
    sample = _sample(tpot, failed=3)
    summary = summarize(_records(tpot, failed=3))
    by_key = {d.key: d for d in METRICS}
    assert sample.point(by_key["tpot_p50"]) == pytest.approx(summary.tpot_ms.p50)
    assert sample.point(by_key["e2e_p99"]) == pytest.approx(summary.e2e_ms.p99)
    assert sample.point(by_key["itl_p50"]) == pytest.approx(summary.itl_ms.p50)
    assert sample.point(by_key["output_throughput"]) == pytest.approx(summary.output_throughput_tok_s)
    assert sample.point(by_key["error_rate"]) == pytest.approx(3 / 33)


def test_the_error_rate_changes_in_points() -> None:
    rng = np.random.default_rng(6)
    base = _sample(rng.normal(5.0, 0.1, 100))
    new = _sample(rng.normal(5.0, 0.1, 100), failed=25)
    errors = _by_key(base, new)["error_rate"]
    assert errors.change == pytest.approx(0.2)
    assert errors.verdict == "regression"


def test_thresholds_parse() -> None:
    assert parse_thresholds(None) == DEFAULT_THRESHOLDS
    parsed = parse_thresholds("ttft_p50=3%, tpot_p99=12.5,error_rate=2%")
    assert parsed["ttft_p50"] == pytest.approx(0.03)
    assert parsed["tpot_p99"] == pytest.approx(0.125)
    assert parsed["error_rate"] == pytest.approx(0.02)
    assert parsed["tpot_p50"] == DEFAULT_THRESHOLDS["tpot_p50"]
    with pytest.raises(ConfigError, match="ttft_p50, ttft_p99"):
        parse_thresholds("ttft=5%")
    with pytest.raises(ConfigError, match="not a percentage"):
        parse_thresholds("ttft_p50=fast")


def _run(run_id: int, *, cache: float | None = None, prefix: float | None = None, concurrency: int = 4,
         **spec: Any) -> StoredRun:
    return StoredRun.from_json({
        "id": run_id, "status": "completed", "started_at": "", "target": "http://x/v1", "api": "openai-chat",
        "model": spec.pop("model", "m"), "spec": {"input_tokens": 16, "output_tokens": 32, **spec},
        "steps": [{"step": 0, "load": {"concurrency": concurrency}, "started_at": "",
                   "summary": {"prompt_cache_hit_rate": cache}, "server": {"prefix_cache_hit_rate": prefix}}]})


def test_unlike_runs_name_what_differs() -> None:
    assert unlike_fields(_run(1), _run(2)) == []
    differ = unlike_fields(_run(1), _run(2, model="other", output_tokens=64, concurrency=8))
    assert differ == ["model ('m' vs 'other')", "spec.output_tokens (32 vs 64)", "load 1 (c=4 vs c=8)"]


def test_prompt_cache_hit_rates_more_than_ten_points_apart_are_unlike() -> None:
    assert unlike_fields(_run(1, cache=0.0, prefix=0.30), _run(2, cache=0.05, prefix=0.35)) == []
    differ = unlike_fields(_run(1, cache=0.0, prefix=0.1), _run(2, cache=0.5, prefix=0.3))
    assert len(differ) == 2
    assert "prompt_cache_hit_rate (0% vs 50%" in differ[0]
    assert "prefix_cache_hit_rate (10% vs 30%" in differ[1]
    assert unlike_fields(_run(1, cache=None), _run(2, cache=0.9)) == []  # one run does not say: nothing to judge


def test_pooled_trials_are_one_sample_of_all_their_requests() -> None:
    rng = np.random.default_rng(3)
    trials = [_records(rng.normal(10, 0.5, 40), failed=k) for k in range(3)]
    pooled = StepSample.pooled([StepSample.of(t) for t in trials])
    alone = [StepSample.of(t) for t in trials]
    assert pooled.n == sum(s.n for s in alone) == 123
    assert pooled.duration_s == pytest.approx(sum(s.duration_s for s in alone))
    tpot = next(d for d in METRICS if d.key == "tpot_p50")
    expected = np.percentile(np.concatenate([s.values["tpot_ms"][~np.isnan(s.values["tpot_ms"])] for s in alone]), 50)
    assert pooled.point(tpot) == pytest.approx(expected)
    # ITL gaps keep pointing at their own request after pooling.
    itl, itl_request = pooled.gaps["itl_ms"]
    assert itl_request.max() < pooled.n and len(itl) == sum(len(s.gaps["itl_ms"][0]) for s in alone)
    assert set(itl_request[itl_request >= alone[0].n]) >= {alone[0].n}


def test_noise_between_trials_above_the_threshold_means_cannot_tell() -> None:
    from tokometer.compare.gate import trial_noise

    rng = np.random.default_rng(5)
    tpot = next(d for d in METRICS if d.key == "tpot_p50")
    steady = [StepSample.of(_records(rng.normal(10, 0.2, 60))) for _ in range(3)]
    drifting = [StepSample.of(_records(rng.normal(mean, 0.2, 60))) for mean in (9.0, 10.0, 11.0)]
    noise = trial_noise(drifting, tpot)
    assert noise == pytest.approx(np.std([9.0, 10.0, 11.0], ddof=1) / 10.0, rel=0.05)
    steady_noise = trial_noise(steady, tpot)
    assert steady_noise is not None and steady_noise < 0.01
    assert trial_noise(steady[:1], tpot) is None
    slower = [StepSample.of(_records(rng.normal(11.5, 0.2, 60))) for _ in range(3)]
    judged = {x.key: x for x in compare_samples(StepSample.pooled(steady), StepSample.pooled(slower),
                                                base_trials=steady, new_trials=slower)}
    p50 = judged["tpot_p50"]
    assert p50.verdict == "regression" and p50.noise is not None and p50.noise < 0.05
    noisy = {x.key: x for x in compare_samples(StepSample.pooled(drifting), StepSample.pooled(slower),
                                               base_trials=drifting, new_trials=slower)}
    assert noisy["tpot_p50"].verdict == "cannot tell"
    assert re.search(r"run-to-run noise (9\.\d|10\.\d)% exceeds the threshold 5%: the gate cannot decide",
                     str(noisy["tpot_p50"].reason))
