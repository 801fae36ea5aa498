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


@pytest.mark.timing
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
        # Its TTFT histogram (30 ms scripted) puts p50 in (20 ms, 40 ms], too wide a bucket for a number: the
        # bucket is kept with it, and it holds the client's own p50.
        ttft = server["histograms"]["ttft"]
        assert ttft["p50"] is None and ttft["quantiles"]["p50"]["kind"] == "range"
        assert ttft["quantiles"]["p50"]["lower"] == 0.02 and ttft["quantiles"]["p50"]["upper"] == 0.04
        assert 0.02 < summary["ttft_ms"]["p50"] / 1e3 <= 0.04
    assert "server (tokometer-sim" in done.stdout
    # the server's TTFT as a range beside the client's own
    assert any(line.strip().startswith("server TTFT: p50 20–40 / p99 ") and "client TTFT p50 " in line
               for line in done.stdout.splitlines()), done.stdout
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


@pytest.mark.timing
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


@pytest.mark.timing  # the server's TTFT mean beside the client's: 24 against 83 ms read beside the other lanes
def test_a_first_bucket_too_wide_is_a_bound_beside_the_client_s_figure(sim_factory: Callable[..., SimServer],
                                                                         tmp_path: Path) -> None:
    """The simulator's histograms get vLLM's queue-time buckets' first edge (--metrics-buckets 0.3,1,10): every
    request (TTFT 20 ms, 6 tokens 4 ms apart) lands in ``le="0.3"``. Interpolation would call p50 150 ms; the
    step says "<= 300 ms" with the bucket, the exact mean, and the client's own figures beside it."""
    sim = sim_factory("--ttft-ms", "20", "--itl-ms", "4", "--metrics-buckets", "0.3,1,10")
    out = tmp_path / "run.json"
    done = run_cli("bench", "--url", sim.openai_url, "-c", "2", "-n", "10", "--input-tokens", "8",
                   "--output-tokens", "6", "--tokenizer", "none", "--scrape-interval", "0.2s", "--json", str(out))
    assert done.returncode == 0, done.stderr
    step = json.loads(out.read_text())["steps"][0]
    for name in ("ttft", "tpot", "e2e"):
        h = step["server"]["histograms"][name]
        assert h["count"] > 0 and h["p50"] is None and h["p99"] is None, h
        for q in ("p50", "p90", "p99"):
            assert h["quantiles"][q] == {"kind": "below", "lower": 0.0, "upper": 0.3,
                                         "estimate": pytest.approx(0.3 * {"p50": 0.5, "p90": 0.9, "p99": 0.99}[q])}
        assert 0 < h["mean"] < 0.3
    ttft = step["server"]["histograms"]["ttft"]
    assert ttft["mean"] == pytest.approx(step["summary"]["ttft_ms"]["mean"] / 1e3, rel=0.5)  # exact, unlike p50
    lines = [line.strip() for line in done.stdout.splitlines()]
    ttft_line = next(line for line in lines if line.startswith("server TTFT:"))
    assert ttft_line.startswith("server TTFT: p50 ≤ 300 / p99 ≤ 300 ms, mean ") and "client TTFT p50 " in ttft_line
    assert any(line.startswith("server ITL/TPOT: p50 ≤ 300 / p99 ≤ 300 ms") and "client ITL p50" in line
               for line in lines), lines
    assert "150.0" not in ttft_line and "297.0" not in ttft_line
    bad = run_cli("sim", "--metrics-buckets", "1,0.3")
    assert bad.returncode == 2 and bad.stderr.startswith("tokometer: error: ") and "Traceback" not in bad.stderr


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
