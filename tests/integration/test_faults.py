"""Faults are data: each failure is classified, the run completes, the exit status says so."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests.conftest import SimServer, run_cli, start_sim
from tokometer.store import ResultStore

SCHEDULE = "none,http_401,http_400_context_length,http_429,http_500,reset,malformed,stall,error_event,http_403"
EXPECTED = {
    "http_401": 1,
    "http_403": 1,
    "http_400_context_length": 1,
    "http_429": 1,
    "http_5xx": 1,
    "reset": 1,
    "malformed_stream": 1,
    "timeout": 1,
    "server_error_event": 1,
}


def test_each_fault_is_classified_and_the_run_completes(sim_factory: Callable[..., SimServer],
                                                        tmp_path: Path) -> None:
    sim = sim_factory("--ttft-ms", "5", "--itl-ms", "1", "--fault-schedule", SCHEDULE, "--stall-s", "30")
    out = tmp_path / "faults.json"
    done = run_cli("bench", "--url", sim.openai_url, "-c", "1", "-n", "10", "--input-tokens", "4",
                   "--output-tokens", "16", "--idle-timeout", "1s", "--json", str(out), "--no-store")
    assert done.returncode == 1, done.stderr  # the run completed, and some requests failed
    summary = json.loads(out.read_text())["steps"][0]["summary"]
    assert summary["requests_completed"] == 1
    assert summary["errors"] == EXPECTED
    assert "HTTP 401" in summary["error_examples"]["http_401"]
    assert "maximum context length" in summary["error_examples"]["http_400_context_length"]


def test_natural_context_length_error(sim_factory: Callable[..., SimServer], tmp_path: Path) -> None:
    sim = sim_factory("--ttft-ms", "1", "--itl-ms", "1", "--max-context", "64")
    out = tmp_path / "ctx.json"
    done = run_cli("bench", "--url", sim.openai_url, "-n", "2", "--input-tokens", "60", "--output-tokens", "16",
                   "--json", str(out), "--no-store")
    # The check before the run reads the advertised context and refuses: nothing is sent, nothing saved.
    assert done.returncode == 2 and not out.exists()
    assert "76 tokens, more than the server's context of 64 (max_model_len in /v1/models)" in done.stderr
    # Without the check, the server's own refusals are measured as what they are.
    done = run_cli("bench", "--url", sim.openai_url, "-n", "2", "--input-tokens", "60", "--output-tokens", "16",
                   "--json", str(out), "--no-store", "--no-check")
    assert done.returncode == 1
    assert json.loads(out.read_text())["steps"][0]["summary"]["errors"] == {"http_400_context_length": 2}


def test_server_going_away_mid_run_gives_connect_errors(tmp_path: Path) -> None:
    sim = start_sim("--ttft-ms", "5", "--itl-ms", "5")
    out = tmp_path / "gone.json"
    bench = subprocess.Popen(
        [sys.executable, "-m", "tokometer", "bench", "--url", sim.openai_url, "--rate", "20", "-n", "60",
         "--input-tokens", "4", "--output-tokens", "8", "--json", str(out), "--no-store", "-q"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60  # until the run is under way (not a fixed sleep: a busy host starts slowly)
    while len(sim.trace()) < 10 and time.monotonic() < deadline:
        time.sleep(0.1)
    sim.process.kill()
    sim.stop()
    _stdout, stderr = bench.communicate(timeout=60)
    assert bench.returncode == 1, stderr
    summary = json.loads(out.read_text())["steps"][0]["summary"]
    assert summary["requests_completed"] > 5
    assert summary["errors"].get("connect", 0) > 5
    assert summary["requests_completed"] + summary["requests_failed"] == 60
    assert "cannot connect" in summary["error_examples"]["connect"]


def test_ctrl_c_keeps_finished_requests_and_prints_a_partial_summary(sim_factory: Callable[..., SimServer],
                                                                     store_path: Path) -> None:
    sim = sim_factory("--ttft-ms", "10", "--itl-ms", "10")
    bench = subprocess.Popen(
        [sys.executable, "-m", "tokometer", "bench", "--url", sim.openai_url, "-c", "2", "-n", "40",
         "--input-tokens", "4", "--output-tokens", "30", "--store", str(store_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Ctrl-C once the simulator has taken 8 requests (its check request and at least 6 that finished at c=2), not
    # after a fixed 4 s: on a busy host the CLI's start alone has taken most of that (seen in a full run)
    deadline = time.monotonic() + 120
    while len(sim.trace()) < 8:
        assert time.monotonic() < deadline and bench.poll() is None, "the bench never got under way"
        time.sleep(0.1)
    bench.send_signal(signal.SIGINT)
    stdout, stderr = bench.communicate(timeout=30)
    assert bench.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert "(interrupted)" in stdout and "Run interrupted" in stdout
    store = ResultStore(f"sqlite:///{store_path}")
    try:
        run = store.list_runs()[0]
        records = store.load_records(run["id"])
    finally:
        store.close()
    assert run["status"] == "interrupted"
    finished = [r for r in records if r.ok]
    assert len(finished) >= 4
    assert all(r.output_tokens == 30 for r in finished)
    assert all(r.error == "cancelled" for r in records if not r.ok)
    assert run["steps"][0]["summary"]["requests_completed"] == len(finished)
