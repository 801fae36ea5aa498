"""A real move smaller than the threshold is "within threshold (+2.95%)", never "no change" (issue 26).

The fixture is hand-computed: NEW's requests are BASE's with every token gap 2.95 % longer, so TPOT and ITL
move by exactly +2.95 % and TTFT (20 ms in both) not at all.
"""

from __future__ import annotations

import io

import numpy as np
from rich.console import Console

from tokometer.compare.gate import Comparison, StepComparison, compare_samples
from tokometer.report.compare import render_compare, render_markdown

from .test_gate import _sample


def _comparison() -> Comparison:
    rng = np.random.default_rng(7)
    tpot = rng.normal(5.0, 0.02, 600)
    metrics = compare_samples(_sample(tpot), _sample(tpot * 1.0295))
    step = StepComparison(index=0, load={"concurrency": 1}, base_requests=600, new_requests=600, metrics=metrics)
    return Comparison(base_id=1, new_id=2, steps=[step])


def test_a_tight_move_under_the_threshold_is_within_threshold_not_no_change() -> None:
    by_key = {x.key: x for x in _comparison().steps[0].metrics}
    tpot = by_key["tpot_p50"]
    assert tpot.change is not None and tpot.ci_low is not None and tpot.ci_high is not None
    assert abs(tpot.change - 0.0295) < 1e-4  # the known truth, to the rounding of nanosecond stamps
    assert tpot.ci_low > 0 and tpot.ci_high < 0.05  # the interval excludes zero and lies under the threshold
    assert tpot.verdict == "within threshold"
    assert by_key["itl_p50"].verdict == "within threshold"
    assert by_key["ttft_p50"].verdict == "no change"  # unchanged: the interval holds zero
    assert _comparison().to_json()["counts"]["within threshold"] >= 2


def test_the_console_and_markdown_name_the_size_of_the_move() -> None:
    comparison = _comparison()
    out = io.StringIO()
    render_compare(Console(file=out, width=200, color_system=None), comparison)
    text = out.getvalue()
    tpot_row = next(line for line in text.splitlines() if line.lstrip().startswith("TPOT p50"))
    assert "within threshold (+2.95%)" in tpot_row and "no change" not in tpot_row
    assert "within threshold" in text.splitlines()[-1]  # the PASS line counts them apart from "no change"
    markdown = render_markdown(comparison)
    assert "| within threshold (+2.95%) |" in markdown
