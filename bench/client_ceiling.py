"""How much can one tokometer load generator ingest before it, not the server, is measured?

Runs `tokometer bench` against bench/pacer.py (an exactly paced server that
records its own send times) and prints, per configuration, what the client
reported next to the server's truth:

1. N streams paced at 1 ms per token (TTFT 1 ms), 1 and 2 worker processes:
   ingested tokens/s, TTFT p50 error, ITL p50 error, client lag p99 and
   event-loop lag p99, and tokometer's own verdict on whether it kept up.
2. One stream paced at 14,000 tokens/s (the article's headline): TPOT error.

    .venv/bin/python bench/client_ceiling.py [--streams 25,50,100,200] [--workers 1,2]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path
from statistics import median
from typing import Any

HERE = Path(__file__).resolve().parent


def start_pacer(*args: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen([sys.executable, str(HERE / "pacer.py"), "--port", "0", *args],
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    return process, line.split()[-1]


def pacer_trace(root: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(root + "/trace", timeout=30) as response:
        data: list[dict[str, Any]] = json.loads(response.read())
    return data


BENCH_EXTRA: list[str] = []
"""Options added to every bench run (``--scrape``: sample a /metrics page through the run)."""


def run_bench(url: str, *args: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "r.json"
        subprocess.run([sys.executable, "-m", "tokometer", "bench", "--url", url, "--tokenizer", "none",
                        "--no-store", "-q", "--json", str(out), *args, *BENCH_EXTRA], check=False,
                       capture_output=True, env={**os.environ})
        result: dict[str, Any] = json.loads(out.read_text())
    return result


def truth(traces: list[dict[str, Any]]) -> tuple[float, float, float]:
    """TTFT p50 (ms), ITL p50 (ms) and TPOT p50 (ms) as the server sent them."""
    ttft = [(t["event_ns"][0] - t["received_ns"]) / 1e6 for t in traces]
    itl: list[float] = []
    tpot: list[float] = []
    for t in traces:
        ev = t["event_ns"]
        itl.extend((b - a) / 1e6 for a, b in itertools.pairwise(ev))
        if len(ev) > 1:
            tpot.append((ev[-1] - ev[0]) / (len(ev) - 1) / 1e6)
    return median(ttft), median(itl), median(tpot)


def streams_table(streams: list[int], workers: list[int], tokens: int) -> list[dict[str, Any]]:
    rows = []
    for w in workers:
        for n in streams:
            pacer, root = start_pacer("--ttft-ms", "1", "--itl-ms", "1")
            try:
                requests = n * 3
                result = run_bench(root + "/v1", "-c", str(n), "-n", str(requests), "--warmup", str(n),
                                   "--output-tokens", str(tokens), "-w", str(w))
                measured = pacer_trace(root)[-requests:]
            finally:
                pacer.terminate()
                pacer.wait()
            s = result["steps"][0]["summary"]
            client = result["steps"][0]["health"]
            t_ttft, t_itl, _ = truth(measured)
            rows.append({
                "workers": w, "streams": n, "tok_s": s["output_throughput_tok_s"],
                "ttft_p50_ms": s["ttft_ms"]["p50"], "ttft_err_ms": s["ttft_ms"]["p50"] - t_ttft,
                "itl_p50_ms": s["itl_ms"]["p50"], "itl_err_pct": 100 * (s["itl_ms"]["p50"] - t_itl) / t_itl,
                "client_lag_p99_ms": client["client_lag_p99_ms"], "loop_lag_p99_ms": client["loop_lag_p99_ms"],
                "cpu": client["cpu_fraction"], "kept_up": not client["saturated"],
            })
            print(json.dumps(rows[-1]), flush=True)
    return rows


def headline(requests: int, tokens: int) -> dict[str, Any]:
    pacer, root = start_pacer("--ttft-ms", "1", "--itl-ms", str(1000 / 14000))
    try:
        result = run_bench(root + "/v1", "-c", "1", "-n", str(requests), "--warmup", "1",
                           "--output-tokens", str(tokens))
        measured = pacer_trace(root)[-requests:]
    finally:
        pacer.terminate()
        pacer.wait()
    s = result["steps"][0]["summary"]
    t_ttft, _, t_tpot = truth(measured)
    row = {"server_tok_s": 1000 / t_tpot, "measured_decode_tok_s_p50": s["decode_speed_tok_s"]["p50"],
           "tpot_err_pct": 100 * (s["tpot_ms"]["p50"] - t_tpot) / t_tpot,
           "ttft_err_ms": s["ttft_ms"]["p50"] - t_ttft}
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", default="25,50,100,200")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--tokens", type=int, default=300)
    parser.add_argument("--scrape", default=None, metavar="URL",
                        help="sample this Prometheus /metrics every 0.2 s through each run (default: the pacer has "
                             "none, so nothing is sampled), to see what sampling costs the client")
    args = parser.parse_args()
    if args.scrape:
        BENCH_EXTRA.extend(["--server-metrics", args.scrape, "--scrape-interval", "0.2s"])
    rows = streams_table([int(x) for x in args.streams.split(",")], [int(x) for x in args.workers.split(",")],
                         args.tokens)
    head = headline(10, 2000)
    print("\n| workers | streams | tok/s ingested | TTFT p50 err (ms) | ITL p50 err | client lag p99 (ms) "
          "| loop lag p99 (ms) | client CPU | kept up |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['workers']} | {r['streams']} | {r['tok_s']:,.0f} | {r['ttft_err_ms']:+.2f} | "
              f"{r['itl_err_pct']:+.1f}% | {r['client_lag_p99_ms']:.2f} | {r['loop_lag_p99_ms']:.2f} | "
              f"{100 * r['cpu']:.0f}% | {'yes' if r['kept_up'] else 'no'} |")
    ok = [r for r in rows if r["kept_up"]]
    if ok:
        best = max(ok, key=lambda r: r["tok_s"])
        print(f"\nceiling while the client kept up: {best['tok_s']:,.0f} tok/s "
              f"({best['streams']} streams, {best['workers']} worker(s))")
    print(f"14,000 tok/s single stream: measured {head['measured_decode_tok_s_p50']:,.0f} tok/s, "
          f"TPOT error {head['tpot_err_pct']:+.2f}%, TTFT error {head['ttft_err_ms']:+.2f} ms")


if __name__ == "__main__":
    main()
