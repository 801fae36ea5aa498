"""The server's own account of every step: scraped from its /metrics during the run, stored, reported,
and cross-checked against what the client measured. Against real simulators (which know their truth)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import SimServer, run_cli
from tests.helpers import bench
from tests.http_servers import RawServer
from tokometer.store import ResultStore


def test_each_step_has_the_servers_account(sim_factory: Callable[..., SimServer], tmp_path: Path) -> None:
    sim = sim_factory("--ttft-ms", "30", "--itl-ms", "5")
    store = tmp_path / "runs.db"
    out = tmp_path / "run.json"
    done = run_cli("bench", "--url", sim.openai_url, "-c", "1,4", "-n", "12", "--input-tokens", "8",
                   "--output-tokens", "40", "--tokenizer", "none", "--scrape-interval", "0.2s",
                   "--store", str(store), "--json", str(out))
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    for step in result["steps"]:
        server, summary = step["server"], step["summary"]
        assert server is not None and server["source"] == "tokometer-sim" and server["samples"] >= 2
        # The simulator's own counter of generated tokens, over the step, agrees with the client's count.
        assert server["rates"]["generation_tokens"] == pytest.approx(summary["output_throughput_tok_s"],
                                                                           rel=0.15)
        # Its TTFT histogram (30 ms scripted) agrees within the histogram's bucket resolution.
        assert server["histograms"]["ttft"]["p50"] == pytest.approx(0.030, rel=0.5)
    assert "server (tokometer-sim" in done.stdout
    stored = ResultStore(f"sqlite:///{store}", read_only=True)
    try:
        run = stored.run(1)
    finally:
        stored.close()
    assert run is not None and all(step.server is not None for step in run.steps)
    assert run.steps[0].server == result["steps"][0]["server"]


def test_no_metrics_is_one_line_and_the_run_goes_on(tmp_path: Path) -> None:
    answer = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 61\r\n\r\n"
              b'data: {"choices":[{"delta":{"content":"a"}}]}\n\ndata: [DONE]\n\n')
    server = RawServer(lambda conn: conn.sendall(answer), close_after=False)
    server.start()
    try:
        result = bench(server.url, model="m", concurrency=[1], requests=2, input_tokens=4, output_tokens=4,
                       tokenizer="none")
    finally:
        server.stop()
    assert result.steps[0].summary.requests_completed == 2
    assert result.steps[0].server is None
    assert any(w.startswith(f"server metrics: none at http://127.0.0.1:{server.port}/metrics") for w in result.warnings)


@pytest.mark.parametrize("names", ["vllm", "vllm-v0", "sglang", "llamacpp", "tgi"])
def test_every_engines_metric_names_give_the_same_server_block(sim_factory: Callable[..., SimServer],
                                                               names: str) -> None:
    """The simulator speaks each engine's metric names over the same truth: the step's server block agrees
    with what the client counted, whichever names it came in."""
    sim = sim_factory("--ttft-ms", "20", "--itl-ms", "4", "--metrics-names", names)
    result = bench(sim.openai_url, concurrency=[2], requests=8, input_tokens=8, output_tokens=30, tokenizer="none",
                   scrape_interval_s=0.2)
    step = result.steps[0]
    assert step.server is not None and step.server["source"] == "tokometer-sim", step.server
    assert step.server["counters"]["generation_tokens"] == pytest.approx(step.summary.output_tokens_total, rel=0.1)
    assert step.server["rates"]["generation_tokens"] == pytest.approx(step.summary.output_throughput_tok_s,
                                                                      rel=0.15)
    assert not any("the server generated" in w for w in step.warnings), step.warnings


def test_another_client_on_the_server_is_noticed(sim_factory: Callable[..., SimServer]) -> None:
    """While a second client loads the same simulator, the server counts about twice the tokens this run
    received: the cross-check says so instead of passing the server's figures off as the run's."""
    sim = sim_factory("--ttft-ms", "5", "--itl-ms", "4")
    other = threading.Thread(target=bench, args=(sim.openai_url,),
                             kwargs={"concurrency": [2], "requests": 40, "input_tokens": 8, "output_tokens": 30,
                                     "tokenizer": "none", "server_metrics": "off", "gpu_metrics": "off"})
    other.start()
    try:
        result = bench(sim.openai_url, concurrency=[2], requests=16, input_tokens=8, output_tokens=30,
                       tokenizer="none", scrape_interval_s=0.2)
    finally:
        other.join(60)
    step = result.steps[0]
    assert any("the server generated" in w and "other clients on the server" in w for w in step.warnings), \
        step.warnings
