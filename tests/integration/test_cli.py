"""The command line: bad input gets one clear line and exit status 2; runs are listed."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import SimServer, run_cli


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _one_line_error(args: list[str], must_contain: str) -> None:
    done = run_cli(*args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert must_contain in lines[0], lines[0]


def test_unknown_backend() -> None:
    _one_line_error(["bench", "--url", "http://127.0.0.1:9/v1", "--api", "grpc"], "'grpc' is not one of")


def test_url_that_answers_nothing() -> None:
    port = _free_port()
    _one_line_error(["bench", "--url", f"http://127.0.0.1:{port}/v1", "--no-store"], "nothing answers at")


@pytest.mark.parametrize("value", ["-4", "0", "1,x"])
def test_bad_concurrency(value: str) -> None:
    _one_line_error(["bench", "--url", "http://127.0.0.1:9/v1", f"--concurrency={value}"], "--concurrency")


def test_malformed_dataset(sim_factory: Callable[..., SimServer], tmp_path: Path) -> None:
    sim = sim_factory("--ttft-ms", "1", "--itl-ms", "1")
    data = tmp_path / "prompts.jsonl"
    data.write_text('{"prompt": "fine"}\n{"prompt": broken\n')
    _one_line_error(["bench", "--url", sim.openai_url, "--dataset", str(data), "--no-store"],
                    f"{data}:2: not valid JSON")
    binary = tmp_path / "model.bin"
    binary.write_bytes(b"\x00\x01\x02GGUF")
    _one_line_error(["bench", "--url", sim.openai_url, "--dataset", str(binary), "--no-store"], "binary file")
    _one_line_error(["bench", "--url", sim.openai_url, "--dataset", str(tmp_path / "missing.jsonl"), "--no-store"],
                    "cannot read dataset")


def test_bad_options_and_urls() -> None:
    _one_line_error(["bench", "--url", "127.0.0.1:8000"], "must start with http")
    _one_line_error(["bench", "--url", "http://x/v1", "-c", "1", "--rate", "5"], "not both")
    _one_line_error(["bench", "--url", "http://x/v1", "--duration", "soon"], "not a duration")
    _one_line_error(["bench", "--nonsense"], "No such option")
    _one_line_error(["sim", "--fault", "explode=0.5"], "unknown fault")


def test_debug_shows_the_traceback() -> None:
    done = run_cli("bench", "--url", "http://127.0.0.1:9/v1", "--api", "grpc", "--debug")
    assert done.returncode != 0
    assert "Traceback" in done.stderr


def test_runs_lists_saved_runs(sim_factory: Callable[..., SimServer], store_path: Path) -> None:
    sim = sim_factory("--ttft-ms", "1", "--itl-ms", "1")
    done = run_cli("bench", "--url", sim.openai_url, "-c", "1,2", "-n", "4", "--input-tokens", "4",
                   "--output-tokens", "4", "--store", str(store_path), "--label", "baseline")
    assert done.returncode == 0, done.stderr
    listed = run_cli("runs", "--store", str(store_path))
    assert listed.returncode == 0
    assert "baseline" in listed.stdout and "c=1" in listed.stdout and "c=2" in listed.stdout
    _one_line_error(["runs", "--store", str(store_path.parent / "other.db")], "there is no results store at")
    assert not (store_path.parent / "other.db").exists()
    _one_line_error(["runs", "--store", str(store_path), "--id", "99"], "no run 99")
