"""`tokometer top` and `tokometer doctor` against a real vLLM (CPU build).

top's numbers are checked against a bench running at the same time; doctor must find nothing above
``info`` on a healthy vLLM, and name what is wrong when the model name, the key or the context is."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.vllm.conftest import MAX_MODEL_LEN, VllmServer
from tokometer.doctor import DoctorReport, DoctorSpec, run_doctor


@pytest.mark.timing  # its premise is a time: the bench's client sends its next request before top's last sample
def test_top_once_agrees_with_a_bench_running_meanwhile(vllm: VllmServer, tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    bench = subprocess.Popen([sys.executable, "-m", "tokometer", "bench", "--url", vllm.openai_url, "--model",
                              vllm.model, *vllm.key_args(), "-c", "2", "-n", "16", "--input-tokens", "32",
                              "--output-tokens", "64", "--ignore-eos", "--no-store", "-q", "--json", str(out)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _wait_running(vllm, 2)  # past the check request: both streams under way
        done = run_cli("top", vllm.root, "--once", "--json", "--interval", "4s", timeout=120)
        assert done.returncode == 0, done.stderr
        frame = json.loads(done.stdout)
        _, err = bench.communicate(timeout=900)
        assert bench.returncode == 0, err[-2000:]
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()
    result = json.loads(out.read_text())
    step = result["steps"][0]["summary"]
    assert frame["source"] == "vllm"
    # bench keeps two in flight (never more); its 16 answers of 64 tokens outlast top's start and 4 s window (with
    # 8 answers, on a busy CI host the bench had finished before top's last sample: 0 running)
    assert 1 <= frame["requests_running"] <= 2
    assert frame["requests_waiting"] == 0
    # vLLM counts generated tokens as it decodes: top's rate over a 4 s window is the bench's rate,
    # within what a short window and the check request can shift it
    assert 0.4 * step["output_throughput_tok_s"] <= frame["output_tok_s"] <= 2.0 * step["output_throughput_tok_s"]


def _wait_running(vllm: VllmServer, count: int, timeout_s: float = 120) -> None:
    """Until vLLM's own gauge says ``count`` requests are running."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        match = re.search(r"^vllm:num_requests_running\{[^}]*\} ([0-9.e+]+)$", vllm.metrics(), re.MULTILINE)
        if match and float(match.group(1)) >= count:
            return
        time.sleep(0.2)
    raise AssertionError(f"vLLM never ran {count} requests at once")


def _doctor(vllm: VllmServer, **values: object) -> DoctorReport:
    values.setdefault("api_key", vllm.api_key)
    values.setdefault("model", vllm.model)
    return asyncio.run(run_doctor(DoctorSpec(url=vllm.openai_url, **values)))


def _ids(report: DoctorReport) -> dict[str, str]:
    return {f.id: f.severity for f in report.findings}


def test_doctor_finds_nothing_wrong_with_a_healthy_vllm(vllm: VllmServer) -> None:
    # on a saturated host this client may go unscheduled while vLLM streams, then read what waited at once:
    # doctor watches its own stalls and says so (streaming.client_stalled, info) instead of calling it bursty
    report = _doctor(vllm)
    above = [f"{f.id} ({f.severity}): {f.title}" for f in report.findings if f.severity != "info"]
    assert not above, above
    found = _ids(report)
    window = next(f for f in report.findings if f.id == "context.window").to_json()["evidence"]
    assert window["context_tokens"] == MAX_MODEL_LEN or vllm.serve is None
    for expected in ("reach.ok", "context.overflow_refused", "context.token_count", "streaming.ok", "server.ok"):
        assert found.get(expected) == "info", (expected, found)


def test_doctor_names_a_wrong_model(vllm: VllmServer) -> None:
    report = _doctor(vllm, model=vllm.model + "-typo", quick=True)
    assert _ids(report)["reach.model_not_found"] == "error"
    closest = next(f for f in report.findings if f.id == "reach.model_not_found").to_json()["evidence"]["closest"]
    assert closest[0] == vllm.model


def test_doctor_names_a_missing_and_a_refused_key(vllm: VllmServer) -> None:
    if not vllm.api_key:
        pytest.skip("this vLLM was started without --api-key")
    assert _ids(_doctor(vllm, api_key=None, quick=True))["auth.missing_key"] == "error"
    assert _ids(_doctor(vllm, api_key="sk-not-the-key-000", quick=True))["auth.key_refused"] == "error"
