"""The one bounded reader against floods that count no events (issue 31): through the real command line and a
real gateway process, every server a `tests.hostile_servers.Attack` on loopback.

The cases the issue was filed with: an SSE stream of comments that never ends (bench at 3 GB, its run left
``running``), events each prefixed by comments, a chunked trailer of a million fields (1.5 GB), the same floods
from a gateway's upstream (1 GB, other clients' first tokens stalled 3-5 s), and ``top --once`` on a
``/metrics`` whose trailer floods (an ``http.client.LineTooLong`` traceback). The generated suite
(``tests/fuzz/test_hostile_servers.py``) composes many more; these show the commands end, stay small and say
why.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import SimServer, run_cli
from tests.hostile_servers import Attack, gateway_beside_hostile, hostile

_RSS_LIMIT_KIB = 400 * 1024
"""The bench process's peak RSS allowed (about 90 MiB against these floods; 3 GB before the budget)."""

_MEASURED = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:]); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)")
"""Runs a command and prints its peak RSS (KiB) last on standard error: the child's alone."""

FLOODS = {
    "comments": Attack("close", "sse", "comments", 4),
    "comment-prefixed events": Attack("chunked", "sse", "prefixed_events", 40),
    "trailer fields": Attack("chunked", "sse", "trailers", 3),
}


@pytest.mark.parametrize("attack", FLOODS.values(), ids=FLOODS.keys())
def test_bench_cli_against_a_flood_ends_small_and_finishes_its_run(attack: Attack, tmp_path: Path) -> None:
    store = tmp_path / "runs.db"
    with hostile({"/v1/chat/completions": attack}) as server:
        args = ["bench", "--url", server.url, "--model", "m", "--requests", "3", "--timeout", "15s", "--tokenizer",
                "none", "--server-metrics", "off", "--no-check", "--store", str(store)]
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-c", _MEASURED, sys.executable, "-m", "tokometer", *args],
                              capture_output=True, text=True, timeout=120)
        elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert int(done.stderr.split()[-1]) < _RSS_LIMIT_KIB, done.stderr.split()[-1]
    assert "protocol: " in done.stdout
    assert elapsed < 60
    with sqlite3.connect(store) as db:
        assert db.execute("select status from runs").fetchall() == [("completed",)]


def test_bench_names_the_read_budget_and_how_to_raise_it() -> None:
    """One event that never ends under a raised ``--max-event-bytes``: the read budget stops it and names itself
    and the option that raises it."""
    with hostile({"/v1/chat/completions": Attack("close", "sse", "long_line", 8)}) as server:
        done = run_cli("bench", "--url", server.url, "--model", "m", "--requests", "1", "--tokenizer", "none",
                       "--server-metrics", "off", "--no-check", "--no-store", "--max-event-bytes", "64MiB",
                       "--max-response-bytes", "2MiB", timeout=120)
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr
    assert "protocol: the response passed its read budget of 2 MiB" in done.stdout
    assert "raise it with --max-response-bytes" in done.stdout


def test_top_once_on_a_metrics_page_whose_trailer_floods_says_one_line() -> None:
    """``/metrics`` chunked, then trailer fields without end: an ``http.client.LineTooLong`` traceback before."""
    with hostile({"/metrics": Attack("chunked", "ndjson", "trailers", 70000)}) as server:
        done = run_cli("top", server.root, "--once", "--gpu-metrics", "off", timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"tokometer: error: no server metrics at {server.root}/metrics")
    assert len(done.stderr.splitlines()) == 1


@pytest.mark.parametrize("attack", FLOODS.values(), ids=FLOODS.keys())
def test_gateway_a_flooding_upstream_fails_its_request_and_stalls_no_other_client(
        attack: Attack, sim_factory: Callable[..., SimServer], tmp_path: Path) -> None:
    """A real gateway process with two upstreams, one flooding, the simulator streaming a token every 20 ms:
    the flooded request fails (a protocol error, in the client's stream or status), the healthy stream sees no
    gap over half a second."""
    sim = sim_factory("--ttft-ms", "5", "--itl-ms", "20")
    with (hostile({"/v1/chat/completions": attack}) as bad,
          gateway_beside_hostile(sim.openai_url, bad.url, tmp_path) as gw):
        gaps, bad_answer = _healthy_beside_hostile(gw.root)
    assert bad_answer and (b"protocol" in bad_answer[0] or b"upstream" in bad_answer[0]), bad_answer[:1]
    assert len(gaps) > 60
    assert max(gaps[1:]) < 0.5, max(gaps[1:])


def _healthy_beside_hostile(root: str) -> tuple[list[float], list[bytes]]:
    """Stream 60 tokens of model ``m`` while, 0.3 s in, model ``bad`` is asked: the healthy stream's gaps
    between lines, and the hostile request's answer."""
    gaps: list[float] = []
    bad_answer: list[bytes] = []

    def healthy() -> None:
        last = time.monotonic()
        with urllib.request.urlopen(_stream_request(root, "m", 60), timeout=30) as response:
            for _ in response:
                now = time.monotonic()
                gaps.append(now - last)
                last = now

    def hostile_client() -> None:
        time.sleep(0.3)
        try:
            with urllib.request.urlopen(_stream_request(root, "bad", 8), timeout=30) as response:
                bad_answer.append(response.read(1 << 20))
        except urllib.error.HTTPError as error:
            bad_answer.append(error.read(1 << 20))

    threads = [threading.Thread(target=healthy), threading.Thread(target=hostile_client)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return gaps, bad_answer


def _stream_request(root: str, model: str, max_tokens: int) -> urllib.request.Request:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": max_tokens,
            "stream": True}
    return urllib.request.Request(root + "/v1/chat/completions", json.dumps(body).encode(),
                                  {"Content-Type": "application/json"})
