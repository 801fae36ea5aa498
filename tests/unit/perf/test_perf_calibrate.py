"""``fit``: which steps become samples, and the ones that say nothing about the engine are listed as skipped."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from tokometer.perf import Deployment, HardwareSpec, resolve_model
from tokometer.perf.calibrate import Calibration, fit, load_calibration
from tokometer.perf.efficiency import RunEfficiency, StepEfficiency

HW = HardwareSpec(name="test", kind="cpu", memory_gb=16, bandwidth_gbs=100, bf16_tflops=1, source="made up")
D = Deployment(resolve_model("gemma-3-270m"), HW)
STEP = StepEfficiency(step=1, load="c=1", requests=8, decode_batch=1.0, context_tokens=100.0, tpot_s=0.02,
                      bytes_per_step=5e8, mbu=0.25, decode_mfu=0.01, prefill_tokens=100.0, prefill_s=0.05,
                      prefill_source="server", prefill_concurrency=1.0, prefill_mfu=0.1, ttft_s=0.05, wait_s=0.0,
                      e2e_s=0.3, server_tpot_s=0.02, bottleneck="engine overhead", why="")


def test_steps_limited_elsewhere_are_skipped_and_named() -> None:
    steps = [STEP, replace(STEP, step=2, mbu=0.35), replace(STEP, step=3, mbu=0.9, bottleneck="client"),
             replace(STEP, step=4, mbu=0.9, bottleneck="queueing")]
    calibration = fit([RunEfficiency(7, D, steps)])
    assert calibration.samples["decode_bandwidth"] == 2
    assert calibration.efficiency.decode_bandwidth == pytest.approx(0.30)  # the median of 25 % and 35 %
    assert calibration.skipped == ("run 7 step 3: client", "run 7 step 4: queueing")
    again = Calibration.from_json(calibration.to_json())
    assert again.skipped == calibration.skipped and again.samples == calibration.samples
    # a measured MBU already holds the engine's fixed per-layer costs: they are not added again
    assert calibration.efficiency.layer_overhead_s == 0 == again.efficiency.layer_overhead_s


def test_only_skipped_steps_is_a_clear_error() -> None:
    from tokometer.util.errors import ConfigError

    with pytest.raises(ConfigError, match="no step of these runs measures the engine"):
        fit([RunEfficiency(7, D, [replace(STEP, bottleneck="network")])])


@pytest.mark.timeout(60)  # a read that waits for a FIFO's writer fails here instead of hanging
def test_the_calibrations_file_is_read_within_a_bound(tmp_path: Path) -> None:
    """``TOKOMETER_CALIBRATION=/dev/zero`` had read until memory ran out, a FIFO waited for a writer forever, and a
    deeply nested file was a RecursionError's traceback: each is one error saying how to start over."""
    from tokometer.util.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^/dev/zero is larger than 4 MiB: .*; delete the file to start over$"):
        load_calibration("h", Path("/dev/zero"))
    fifo = tmp_path / "calibration.json"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match=r"^the calibrations in .*: not valid JSON: .*delete the file to start over"):
        load_calibration("h", fifo)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000, encoding="utf-8")
    with pytest.raises(ConfigError, match=r"not valid JSON: nested too deep; delete the file"):
        load_calibration("h", deep)
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"caf\xe9": 1}')
    with pytest.raises(ConfigError, match=r"not UTF-8 text \(byte 5\); delete the file"):
        load_calibration("h", latin)
