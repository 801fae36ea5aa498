"""A run of a real vLLM (CPU build) started by `tokometer serve`: the run keeps the engine's identity, so
`estimate --run` needs no --model (issue 31), and vLLM's histogram percentiles show as what their buckets
can say (a range or bound; a number only within a bucket 10 % wide)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.vllm.conftest import VllmServer
from tokometer.observe.buckets import NUMBER_MAX_RATIO


def test_the_run_keeps_vllms_identity_and_estimate_reads_it(vllm: VllmServer, tmp_path: Path) -> None:
    if vllm.serve is None:
        pytest.skip("a vLLM started elsewhere (TOKOMETER_TEST_VLLM_URL) publishes no identity")
    store, out = tmp_path / "runs.db", tmp_path / "run.json"
    done = run_cli("bench", "--url", vllm.openai_url, "--model", vllm.model, *vllm.key_args(), "--store", str(store),
                   "-q", "--json", str(out), "-c", "2", "-n", "4", "--input-tokens", "32", "--output-tokens", "16",
                   "--ignore-eos", timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    engine = result["engine"]
    assert engine["engine"] == "vllm" and engine["device"] == "cpu" and engine["model_file"], engine
    for name, histogram in (result["steps"][0].get("server") or {}).get("histograms", {}).items():
        for q, located in (histogram.get("quantiles") or {}).items():
            if located["kind"] == "value":
                assert located["upper"] <= NUMBER_MAX_RATIO * located["lower"], (name, q, located)
            else:
                assert histogram[q] is None, (name, q, histogram)
    estimated = run_cli("estimate", "--run", str(result["run_id"]), "--store", str(store), timeout=600)
    assert estimated.returncode == 0, estimated.stdout[-2000:] + estimated.stderr[-2000:]
    assert "--model" not in estimated.stderr and "Traceback" not in estimated.stderr
