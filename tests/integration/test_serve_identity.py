"""A run against ``tokometer serve`` keeps the engine's identity (issue 31): ``estimate --run`` needs no ``--model``.

A real ``tokometer serve`` (the embedded llama.cpp, one slot) publishes its identity while it runs; ``bench --url``
of its port saves it with the run; ``estimate --run`` reads the model file from it. When ``serve`` stops, the
published file is gone.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import require_llama_server, run_cli
from tokometer.engines.identity import published_identity
from tokometer.store import ResultStore

pytestmark = pytest.mark.engine


def test_a_run_against_serve_keeps_its_engine_for_estimate(tmp_path: Path) -> None:
    require_llama_server()
    argv = [sys.executable, "-m", "tokometer", "serve", "--port", "0", "--parallel", "1", "--ctx-size", "2048",
            "--json"]
    store = tmp_path / "runs.db"
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout is not None and proc.stderr is not None
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            ready = json.loads(line)
            assert published_identity(ready["openai_url"]) == ready["identity"]
            done = run_cli("bench", "--url", ready["openai_url"], "-n", "2", "--input-tokens", "8",
                           "--output-tokens", "4", "--store", str(store), "-q")
            assert done.returncode == 0, done.stderr
            proc.send_signal(signal.SIGINT)
            proc.wait(30)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert published_identity(ready["openai_url"]) is None
    results = ResultStore(f"sqlite:///{store}")
    try:
        (listed,) = results.list_runs()
        run = results.run(int(listed["id"]))
        assert run is not None and run.engine is not None and run.engine.model_file == ready["identity"]["model_file"]
    finally:
        results.close()
    estimated = run_cli("estimate", "--run", str(run.id), "--store", str(store), "--hardware", "H100-SXM")
    assert estimated.returncode == 0, estimated.stderr
    assert "--model" not in estimated.stderr
