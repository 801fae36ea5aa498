"""Routing under uneven load: TTFT through the gateway with each routing policy, one upstream kept busy.

Two simulators each modelling a continuous-batching engine (Llama 3.1 8B on an L4, at most
``--max-num-seqs`` sequences in a batch: more wait in its queue); one of them also serves a steady outside load
the gateway never sees (``--busy N`` streams sent to it directly, each replaced as it ends), enough to fill its
batch and queue the rest. `tokometer bench` then sends the same closed-loop load through the gateway under each routing
policy, and the table shows TTFT p50/p99 and the share of the gateway's requests the busy upstream got.

    .venv/bin/python bench/gateway_routing.py [--busy 6] [--concurrency 4] [--requests 120]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from client_ceiling import run_bench  # noqa: E402

POLICIES = ("round-robin", "least-outstanding", "least-load", "prefix-affinity")
MAX_NUM_SEQS = 4


def _start(*args: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen([sys.executable, "-m", "tokometer", *args, "--port", "0"], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    return process, process.stdout.readline().strip().split()[-1]


def _stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _outside_load(url: str, streams: int, stop: threading.Event) -> list[threading.Thread]:
    body = json.dumps({"model": "llama-3.1-8b", "max_tokens": 200, "stream": True,
                       "messages": [{"role": "user", "content": "outside load"}]}).encode()

    def loop() -> None:
        while not stop.is_set():
            request = urllib.request.Request(url + "/v1/chat/completions", body, {"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=60) as response:
                    response.read()
            except OSError:
                time.sleep(0.1)

    threads = [threading.Thread(target=loop, daemon=True) for _ in range(streams)]
    for thread in threads:
        thread.start()
    return threads


def _served(root: str) -> int:
    with urllib.request.urlopen(root + "/sim/trace", timeout=10) as response:
        return len(json.loads(response.read()))


def measure(policy: str, busy: int, concurrency: int, requests: int, max_num_seqs: int) -> dict[str, Any]:
    sim_args = ("sim", "--hardware", "L4", "--model", "llama-3.1-8b", "--max-num-seqs", str(max_num_seqs))
    (a, a_url), (b, b_url) = _start(*sim_args), _start(*sim_args)
    stop = threading.Event()
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "gateway.toml"
        config.write_text(f'[[upstreams]]\nname = "busy"\nurl = "{a_url}/v1"\nmodel = "llama-3.1-8b"\n'
                          f'[[upstreams]]\nname = "idle"\nurl = "{b_url}/v1"\nmodel = "llama-3.1-8b"\n'
                          f'[[routes]]\nmodel = "chat"\nupstreams = ["busy", "idle"]\nrouting = "{policy}"\n'
                          'scrape_interval_s = 0.1\n[cache]\nenabled = false\n')
        gw, gw_url = _start("gateway", "--config", str(config))
        threads = _outside_load(a_url, busy, stop)
        try:
            time.sleep(1.0)
            before = _served(a_url)
            result = run_bench(gw_url + "/v1", "--model", "chat", "-c", str(concurrency), "-n", str(requests),
                               "--warmup", str(concurrency), "--input-tokens", "32", "--output-tokens", "16",
                               "--prefix-tokens", "16", "--prefix-groups", "8")
            on_busy = _served(a_url) - before
        finally:
            stop.set()
            _stop(gw)
            for thread in threads:
                thread.join(30)
            _stop(a)
            _stop(b)
    s = result["steps"][0]["summary"]
    gateway_requests = requests + concurrency
    outside = on_busy - min(on_busy, gateway_requests)  # an estimate: the busy sim served both
    return {"policy": policy, "ttft_p50_ms": s["ttft_ms"]["p50"], "ttft_p99_ms": s["ttft_ms"]["p99"],
            "tpot_p50_ms": s["tpot_ms"]["p50"], "completed": s["requests_completed"],
            "busy_share": None if not on_busy else round(max(0, on_busy - outside) / gateway_requests, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--busy", type=int, default=6)
    parser.add_argument("--max-num-seqs", type=int, default=MAX_NUM_SEQS)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--requests", type=int, default=120)
    parser.add_argument("--policies", default="round-robin,least-outstanding,least-load",
                        help=f"comma-separated, of {', '.join(POLICIES)}")
    args = parser.parse_args()
    print(f"{'policy':<20} {'TTFT p50':>9} {'TTFT p99':>9} {'TPOT p50':>9} {'done':>5}")
    for policy in args.policies.split(","):
        row = measure(policy, args.busy, args.concurrency, args.requests, args.max_num_seqs)
        print(f"{row['policy']:<20} {row['ttft_p50_ms']:>7.1f}ms {row['ttft_p99_ms']:>7.1f}ms "
              f"{row['tpot_p50_ms']:>7.2f}ms {row['completed']:>5}", flush=True)


if __name__ == "__main__":
    main()
