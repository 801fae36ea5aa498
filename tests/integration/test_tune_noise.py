"""The noise floor of a whole tune against real servers on loopback: each variant's "engine" is a `tokometer sim`
process (as in test_tune_sweep.py), measured by the real bench run, saved in a real SQLite store and judged from it.

The host's drift is what a test cannot order from a real machine, so it is made here, known: as the tune goes on,
the simulated machine slows (every token 10 % slower for the variant with the baseline's own settings, 12 %
for the baseline's second run, at the end). ``compare`` alone calls that variant worse (its interval is narrow: the
simulator paces tokens to microseconds); the tune does not, because the baseline itself moved as far. A variant
four times faster per token is still called better, and named best.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.test_tune_sweep import _Quiet, _SimEngines
from tokometer.store import ResultStore
from tokometer.tune.answer import judge
from tokometer.tune.launch import LaunchedVariant
from tokometer.tune.outcome import BASELINE_AGAIN, TuneRecord, Variant
from tokometer.tune.sweep import bench_workload, run_tune

_WORKLOAD = {"requests": 24, "concurrency": [1], "input_tokens": 16, "output_tokens": 24, "warmup": 2}
_ITL_MS = 8.0
_SLOWER = {"same settings": 1.10, BASELINE_AGAIN: 1.12}
"""How much slower the simulated machine is when each of these runs (the rest: as at the start)."""


class _DriftingMachine(_SimEngines):
    """`_SimEngines`, on a machine that slows as the tune goes on (`_SLOWER`)."""

    def __call__(self, variant: Variant) -> LaunchedVariant:
        slower = _SLOWER.get(variant.name, 1.0)
        itl = float(variant.settings["itl-ms"]) * slower
        drifted = Variant(variant.index, variant.name, {**variant.settings, "itl-ms": f"{itl:.3f}"},
                          variant.changed)
        return super().__call__(drifted)


@pytest.mark.timing  # its premise: the simulator's pacing holds a 10 % slower token apart from its own jitter
def test_a_drift_the_baseline_shows_itself_is_no_winner_and_a_real_effect_still_is(tmp_path: Path) -> None:
    base = {"ttft-ms": "20", "itl-ms": str(_ITL_MS)}
    variants = (Variant(0, "baseline", base), Variant(1, "same settings", {**base, "ttft-ms": "20"}, ("ttft-ms",)),
                Variant(2, "itl-ms=2", {**base, "itl-ms": "2"}, ("itl-ms",)))
    record = TuneRecord("drift", "sim", "f", 11, _WORKLOAD, variants)
    store = ResultStore(f"sqlite:///{tmp_path / 'runs.db'}")
    try:
        engines = _DriftingMachine()
        end = run_tune(record, launch=engines, run_workload=bench_workload(record, store=store), store=store,
                       observer=_Quiet())
        assert engines.started == ["baseline", "same settings", "itl-ms=2", BASELINE_AGAIN]
        assert end.record.baseline_again is not None and end.record.baseline_again.status == "finished"
        answer = judge(end.record, store)
    finally:
        store.close()
    assert answer.floor is not None and answer.floor.measured
    drift = answer.floor.headline["tpot_p50"]
    assert drift.change is not None and 0.07 < drift.change < 0.17  # the baseline's own move, measured
    same = answer.of(1).verdicts["tpot_p50"]
    assert same.compare_word == "worse", same  # compare alone would call it
    assert same.word == "cannot decide" and "baseline's own drift" in (same.reason or "")
    assert {x.word for x in answer.of(1).verdicts.values()} <= {"no change", "cannot decide"}
    fast = answer.of(2).verdicts
    assert fast["tpot_p50"].word == "better" and fast["output_throughput"].word == "better"
    best = {b.objective: b for b in answer.best}
    assert best["decode_speed"].winner == "itl-ms=2" and best["throughput"].winner == "itl-ms=2"
    memory = [o.peak_memory_bytes for o in end.record.outcomes]
    assert all(m is not None and m > 2**24 for m in memory)  # each sim process's own high-water mark: > 16 MiB
