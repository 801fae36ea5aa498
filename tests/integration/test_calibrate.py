"""``estimate --calibrate``: efficiencies fitted to measured runs recover what the server was made to do.

The modelled simulator plays Llama-3.1-8B (AWQ) on an H100-SXM at the typical efficiencies (decode at 60 % of
peak bandwidth), ten times slower (--time-scale 10): measured against the real H100's peak, its decode runs
at 6 % of it. Calibrating from a run must find 6 %, store it, and every later estimate for the H100 must
expect it (and say so) until --no-calibration.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import SimServer, run_cli
from tokometer.perf import Deployment, Efficiency, decode_step_s, resolve_hardware, resolve_model
from tokometer.perf.roofline import BOUND

SCALE = 10.0
DEPLOYMENT = ("--model", "llama-3.1-8b", "--hardware", "H100-SXM", "--dtype", "awq")


@pytest.mark.timing
def test_calibration_recovers_the_servers_efficiency_and_is_reused(sim_factory: Callable[..., SimServer],
                                                                     tmp_path: Path) -> None:
    sim = sim_factory(*DEPLOYMENT, "--time-scale", str(SCALE))
    store, env = tmp_path / "runs.db", {"TOKOMETER_CALIBRATION": str(tmp_path / "calibration.json")}
    # 4 requests a step: each decodes 64 steps of 34-41 ms, and the simulator's steps are alike, so the fit is as
    # close as with 8 (measured on the 2-core AMD EPYC VM: decode bandwidth 1.3-1.6 % from the truth and the expected
    # step 1.3-1.7 % from the measured TPOT, 1.2-1.5 % with 8 requests; 10 % asserted) in half the time
    done = run_cli("bench", "--url", sim.openai_url, "-c", "1,2", "-n", "4", "--input-tokens", "512",
                   "--output-tokens", "64", "--ignore-eos", "--store", str(store), "-q")
    assert done.returncode == 0, done.stderr
    out = tmp_path / "cal.json"
    done = run_cli("estimate", "--calibrate", "1", "--store", str(store), *DEPLOYMENT, "--json", str(out), env=env)
    assert done.returncode == 0, done.stderr
    calibration = json.loads(out.read_text())["calibration"]
    typical = Efficiency()
    # The simulator plays the typical efficiency, its fixed per-layer cost included, SCALE times slower: the
    # MBU it shows is the bound step (its bytes at full bandwidth) over its step, / SCALE (5.3 %)
    d = Deployment(resolve_model("llama-3.1-8b"), resolve_hardware("H100-SXM"), "awq")
    shown = decode_step_s(d, 1, 544, BOUND) / decode_step_s(d, 1, 544, typical) / SCALE
    assert calibration["efficiency"]["decode_bandwidth"] == pytest.approx(shown, rel=0.1)
    # Each step is a sample unless its own judgement says it measured something else (on two loaded cores
    # the client can be the limiter of one step): then it is listed as skipped, with the reason. The client's
    # loop may lag by 10% of TTFT p50 before it is called the limiter: 512-token prompts make that 13 ms at c=1
    # (64-token ones made it 3 ms, which other processes on two cores exceed), and at c=1 and c=2 neither step
    # queues (TTFT is under a third of E2E).
    judged = calibration["samples"]["decode_bandwidth"]
    assert judged >= 1 and judged + len(calibration["skipped"]) == 2 and calibration["runs"] == [1]
    assert all(s.startswith("run 1 step ") and s.split(": ")[1] in ("client", "network", "queueing")
               for s in calibration["skipped"]), calibration["skipped"]
    assert calibration["efficiency"]["decode_compute"] == typical.decode_compute  # no compute-bound step: kept
    fitted = calibration["efficiency"]["decode_bandwidth"]
    assert f"calibrated from run 1 on H100-SXM: decode bandwidth {fitted:.0%}" in done.stdout
    # Reused: an estimate for the H100 now expects the measured speed, and says where that comes from.
    est = tmp_path / "est.json"
    done = run_cli("estimate", *DEPLOYMENT, "--batch", "1", "--input-tokens", "512", "--output-tokens", "64",
                   "--json", str(est), env=env)
    row = json.loads(est.read_text())["estimate"]
    assert "calibrated from run 1" in row["efficiency"]["source"] and "calibrated from run 1" in done.stdout
    measured_tpot_ms = _tpot_p50(store)
    expected_step_ms = row["batches"][0]["decode_step_ms"]["expected"]
    assert expected_step_ms == pytest.approx(measured_tpot_ms, rel=0.1)
    # A number given on the command line wins; --no-calibration goes back to typical.
    given = run_cli("estimate", *DEPLOYMENT, "--bw-efficiency", "0.3", "--json", str(est), env=env)
    assert json.loads(est.read_text())["estimate"]["efficiency"]["decode_bandwidth"] == 0.3, given.stderr
    plain = run_cli("estimate", *DEPLOYMENT, "--no-calibration", "--json", str(est), env=env)
    assert json.loads(est.read_text())["estimate"]["efficiency"]["source"] == "typical", plain.stderr
    other = run_cli("estimate", "--model", "llama-3.1-8b", "--hardware", "H200", "--json", str(est), env=env)
    assert json.loads(est.read_text())["estimate"]["efficiency"]["source"] == "typical", other.stderr


def _tpot_p50(store: Path) -> float:
    from tokometer.store import ResultStore

    results = ResultStore(f"sqlite:///{store}", read_only=True)
    try:
        run = results.run(1)
    finally:
        results.close()
    assert run is not None and run.steps[0].summary is not None
    p50 = run.steps[0].summary.tpot_ms.p50
    assert p50 is not None
    return p50


def test_calibrating_nothing_is_a_clear_error(tmp_path: Path) -> None:
    done = run_cli("estimate", "--calibrate", "7", "--store", str(tmp_path / "none.db"), *DEPLOYMENT,
                   env={"TOKOMETER_CALIBRATION": str(tmp_path / "c.json")})
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "no results store" in done.stderr, done.stderr
