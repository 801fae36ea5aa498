"""The results store under real processes: SIGTERM, SIGKILL, readers that create nothing (SQLite; racing creators
and concurrent benches on SQLite and PostgreSQL: test_store_backends.py)."""

from __future__ import annotations

import importlib.util
import json
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import SimServer, run_cli


def _stored_requests(store: Path) -> int:
    try:
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
            return int(db.execute("SELECT count(*) FROM requests WHERE error IS NULL").fetchone()[0])
    except sqlite3.Error:
        return 0  # not created yet


def _start_slow_bench(sim: SimServer, store: Path) -> subprocess.Popen[str]:
    """A bench of ~50 s (200 ms answers, two at a time), once a few of its requests are stored."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tokometer", "bench", "--url", sim.openai_url, "-c", "2", "-n", "500",
         "--input-tokens", "4", "--output-tokens", "10", "--store", str(store)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 90  # its start (imports, tokenizer, preflight) took over 30 s beside the other lanes
    while _stored_requests(store) < 4:
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.05)
    return process


def _run(store: Path, run_id: int = 1) -> dict[str, object]:
    shown = run_cli("runs", "--store", str(store), "--id", str(run_id))
    assert shown.returncode == 0, shown.stderr
    run: dict[str, object] = json.loads(shown.stdout)
    return run


@pytest.mark.slow  # 40-70 s in the parallel lane
def test_sigterm_keeps_what_finished_and_prints_the_summary(sim_factory: Callable[..., SimServer],
                                                            store_path: Path) -> None:
    sim = sim_factory("--ttft-ms", "1", "--itl-ms", "20")
    process = _start_slow_bench(sim, store_path)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 143, (out, err)
    assert "(interrupted)" in out and "Run interrupted: saved as run 1" in out, out
    assert "Traceback" not in err
    run = _run(store_path)
    step = run["steps"][0]  # type: ignore[index]
    assert run["status"] == "interrupted" and step["interrupted"]
    assert step["summary"]["requests_completed"] == _stored_requests(store_path) >= 4


@pytest.mark.timing  # 30 s to see 4 stored requests: 7 s alone, 116-131 s and a failure beside the other lanes
def test_a_killed_run_is_marked_aborted_and_summarised(sim_factory: Callable[..., SimServer],
                                                       store_path: Path) -> None:
    sim = sim_factory("--ttft-ms", "1", "--itl-ms", "20")
    process = _start_slow_bench(sim, store_path)
    assert _run(store_path)["status"] == "running"  # its process is alive: left alone
    process.kill()
    process.communicate(timeout=30)
    listed = run_cli("runs", "--store", str(store_path))
    assert listed.returncode == 0 and "aborted" in listed.stdout, listed.stdout
    rows = run_cli("runs", "--store", str(store_path), "--json")  # the store's rows: the process that ran it
    assert rows.returncode == 0 and json.loads(rows.stdout)[0]["pid"] == process.pid, rows.stderr
    run = _run(store_path)
    step = run["steps"][0]  # type: ignore[index]
    assert run["status"] == "aborted" and step["interrupted"]
    assert step["summary"]["requests_completed"] == _stored_requests(store_path) >= 4


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


def test_reading_commands_create_nothing(tmp_path: Path) -> None:
    assert "no results store at" in _one_line(run_cli("runs", "--store", str(tmp_path / "typo.db")))
    missing = tmp_path / "no" / "such" / "dir" / "x.db"
    assert "no results store at" in _one_line(run_cli("estimate", "--run", "1", "--store", str(missing)))
    data = tmp_path / "data"
    empty = run_cli("runs", env={"XDG_DATA_HOME": str(data), "TOKOMETER_STORE": ""})
    assert empty.returncode == 0 and "No runs saved yet" in empty.stdout
    assert list(tmp_path.iterdir()) == []
    not_a_store = tmp_path / "other.db"
    sqlite3.connect(not_a_store).close()
    assert "not a tokometer results store" in _one_line(run_cli("runs", "--store", str(not_a_store)))


def test_a_database_url_without_its_driver_says_what_to_install() -> None:
    if importlib.util.find_spec("psycopg") is not None:
        return  # the driver is there: nothing to say
    line = _one_line(run_cli("runs", "--store", "postgresql+psycopg://me:hunter2@127.0.0.1:9/runs"))
    assert "pip install 'psycopg[binary]'" in line and "hunter2" not in line
