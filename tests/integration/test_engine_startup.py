"""Start-up time against the truth: an engine whose start is delayed by a known time, and the real llama.cpp.

The delayed engine is the real simulator (``tokometer sim``) started by a Python process that first sleeps
`DELAY_S`: its measured start-up cannot be shorter than that sleep (a lower bound, which a loaded host cannot
make fail), and the warm start is timed from its own process start, not from the first one's.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import require_llama_server, run_cli
from tokometer.engines.handle import EngineHandle
from tokometer.engines.process import EngineProcess, free_port
from tokometer.engines.ready import wait_ready
from tokometer.engines.startup import STARTUP_KEY, EngineStartup, startup_of, timed_start

DELAY_S = 1.5
"""How long the delayed engine sleeps before it starts serving."""


def _delayed_sim() -> EngineHandle:
    port = free_port()
    code = (f"import runpy, sys, time; time.sleep({DELAY_S!r}); sys.argv = ['tokometer', 'sim', '--port', "
            f"'{port}', '--model', 'slow-start']; runpy.run_module('tokometer', run_name='__main__')")
    process = EngineProcess([sys.executable, "-c", code], "sim")
    root = f"http://127.0.0.1:{port}"
    try:
        model = wait_ready(root, process, 60.0)
    except BaseException:
        process.stop()
        raise
    return EngineHandle(root, model, {"engine": "sim"}, process)


def test_a_start_delayed_by_a_known_time_is_timed_from_the_process_start() -> None:
    handle, startup = timed_start(_delayed_sim, "sim", warm=True)
    with handle:
        assert startup is not None
        assert startup.cold_s >= DELAY_S and startup.warm_s is not None and startup.warm_s >= DELAY_S
        assert startup.cold_s < DELAY_S + 60 and startup.warm_s < DELAY_S + 60  # the readiness deadline
        assert handle.startup_s == startup.warm_s  # the engine handed back is the second one
        assert startup_of(handle.identity) == startup


def test_an_engine_not_started_here_has_no_startup() -> None:
    with _delayed_sim() as running:
        outside = EngineHandle(running.root_url, running.model, {"engine": "sim"}, None)
        handle, startup = timed_start(lambda: outside, "sim", warm=True)
        assert handle is outside and startup is None and STARTUP_KEY not in outside.identity


@pytest.mark.engine
def test_serve_and_the_embedded_bench_report_llamacpps_startup(tmp_path: Path) -> None:
    require_llama_server()
    store = tmp_path / "runs.db"
    done = run_cli("bench", "--requests", "2", "-c", "1", "--input-tokens", "16", "--output-tokens", "4",
                   "--store", str(store), "--json", str(tmp_path / "run.json"), timeout=300)
    assert done.returncode == 0, done.stderr
    assert "the embedded engine started in" in done.stderr and "Engine started in" in done.stdout
    saved = json.loads((tmp_path / "run.json").read_text())
    startup = EngineStartup.from_json(saved["engine"][STARTUP_KEY])
    assert startup is not None and startup.engine == "llamacpp" and startup.warm_s is not None
    assert 0 < startup.cold_s < 120 and 0 < startup.warm_s < 120  # llama.cpp's readiness deadline
    shown = run_cli("runs", "--id", "1", "--store", str(store))
    assert shown.returncode == 0, shown.stderr
    assert EngineStartup.from_json(json.loads(shown.stdout)["engine"][STARTUP_KEY]) == startup
    assert "engine start-up: started in" in shown.stderr
