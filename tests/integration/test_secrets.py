"""No secret header is kept or shown anywhere, though the server receives it; --hash-key reads stdin."""

from __future__ import annotations

import hashlib
import os
import pty
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests.conftest import SimServer, run_cli

TOKEN = "sk-secret123"
OTHER = "abc-7f3e91"


def test_secret_headers_reach_the_server_but_nowhere_else(sim_factory: Callable[..., SimServer],
                                                          tmp_path: Path) -> None:
    sim = sim_factory("--ttft-ms", "1", "--itl-ms", "1", "--api-key", TOKEN, "--trace-bodies")
    store, json_path, csv_path = tmp_path / "runs.db", tmp_path / "out.json", tmp_path / "out.csv"
    done = run_cli("bench", "--url", sim.openai_url, "--model", "sim-model", "--tokenizer", "none", "-c", "2",
                   "-n", "6", "--input-tokens", "4", "--output-tokens", "4", "--store", str(store),
                   "--header", f"Authorization: Bearer {TOKEN}", "--header", f"X-Api-Key: {OTHER}",
                   "--header", "X-Trace: visible", "--json", str(json_path), "--csv", str(csv_path))
    assert done.returncode == 0, done.stderr
    # the simulator refuses requests without the key: all six (and any preflight) got through with the header
    statuses = [t["status"] for t in sim.trace()]
    assert set(statuses) == {200} and len(statuses) >= 6
    shown = run_cli("runs", "--store", str(store), "--id", "1")
    listed = run_cli("runs", "--store", str(store), "--json")
    assert shown.returncode == listed.returncode == 0
    assert '"Authorization": "<redacted>"' in shown.stdout and '"X-Trace": "visible"' in shown.stdout
    kept = [done.stdout, done.stderr, shown.stdout, listed.stdout, json_path.read_text(), csv_path.read_text()]
    kept += [path.read_bytes().decode("latin-1") for path in tmp_path.glob("runs.db*")]
    for text in kept:
        assert TOKEN not in text and OTHER not in text


def _hash_key(stdin: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tokometer", "gateway", "--hash-key", *args], input=stdin,
                          capture_output=True, text=True, timeout=30)


def test_hash_key_reads_the_secret_from_stdin_never_argv() -> None:
    expected = hashlib.sha256(TOKEN.encode()).hexdigest()
    for args in ((), ("-",)):
        done = _hash_key(f"{TOKEN}\n", *args)
        assert done.returncode == 0 and done.stdout.strip() == expected, done.stderr
    for stdin in ("", "\n", "   \n"):
        empty = _hash_key(stdin)
        assert empty.returncode == 2 and len(empty.stderr.strip().splitlines()) == 1
        assert "the secret is empty" in empty.stderr
    on_argv = _hash_key("", TOKEN)
    assert on_argv.returncode == 2 and TOKEN not in on_argv.stderr + on_argv.stdout
    assert "takes no value" in on_argv.stderr and len(on_argv.stderr.strip().splitlines()) == 1


def test_hash_key_prompts_without_echo_on_a_terminal() -> None:
    pid, fd = pty.fork()
    if pid == 0:  # the child: tokometer on the terminal
        os.execv(sys.executable, [sys.executable, "-m", "tokometer", "gateway", "--hash-key"])
    seen = b""
    deadline = time.monotonic() + 30
    answers = 0
    while time.monotonic() < deadline:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break  # the child closed the terminal
        if not chunk:
            break
        seen += chunk
        if seen.count(b":") > answers and answers < 2:  # "API key secret:", then "Repeat for confirmation:"
            os.write(fd, TOKEN.encode() + b"\n")
            answers += 1
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0, seen
    assert hashlib.sha256(TOKEN.encode()).hexdigest().encode() in seen
    assert TOKEN.encode() not in seen  # never echoed
