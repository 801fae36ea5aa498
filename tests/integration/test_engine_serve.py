"""``tokometer serve`` as a user runs it: ready line, a real request, then Ctrl-C (or SIGTERM) stops everything."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import psutil
import pytest

from tests.conftest import require_llama_server

pytestmark = pytest.mark.engine


@pytest.fixture(autouse=True)
def _need_llama_server() -> None:
    require_llama_server()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_serve_until_interrupted(sig: signal.Signals) -> None:
    argv = [sys.executable, "-m", "tokometer", "serve", "--port", "0", "--parallel", "1", "--ctx-size", "2048",
            "--json"]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout is not None and proc.stderr is not None
            line = proc.stdout.readline()  # one JSON line once the engine has answered a 1-token request
            assert line, proc.stderr.read()
            ready = json.loads(line)
            assert ready["identity"]["engine"] == "llama.cpp"
            with urllib.request.urlopen(ready["openai_url"] + "/models", timeout=10) as response:
                assert json.loads(response.read())["data"][0]["id"] == ready["model"]
            engines = [p for p in psutil.Process(proc.pid).children(recursive=True) if "llama-server" in p.name()]
            assert len(engines) == 1
            proc.send_signal(sig)
            assert proc.wait(30) == 130
            assert "interrupted" in proc.stderr.read()
            time.sleep(0.1)
            assert not engines[0].is_running() or engines[0].status() == psutil.STATUS_ZOMBIE
        finally:
            if proc.poll() is None:
                proc.kill()


def test_serve_busy_port_is_one_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "tokometer", "serve", "--port", str(port)],
                              capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if line.startswith("tokometer: error")]
    assert len(errors) == 1
    assert errors[0].startswith(f"tokometer: error: port {port} on 127.0.0.1 is already in use")
    assert errors[0].endswith("choose another with --port (0 picks a free one) or stop what is listening there")
