"""How much load do 1, 2 and 4 Ray actors generate (``bench --ray``), against one local process?

Starts a local Ray cluster of two nodes (tests/ray_cluster.py: ``ray start`` in a private temp dir, each
node with ``--cpus`` logical CPUs so that 4 actors fit) and runs `tokometer bench` against bench/pacer.py
(an exactly paced server that records its own send times, as bench/client_ceiling.py does for processes):

1. token-bound: N streams of 300 tokens paced at 1 ms per token (TTFT 1 ms): tokens/s ingested;
2. request-bound: N streams of 4-token answers: requests/s sustained;

each by one local process (no --ray) and by 1, 2 and 4 actors, with the error of TTFT p50 and ITL p50
against the pacer's truth, the client lag p99, and tokometer's own verdict on whether it kept up.

    .venv/bin/python bench/ray_ceiling.py [--actors 1,2,4] [--streams 100,200] [--request-streams 50,100]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from tests.ray_cluster import start_local_cluster  # noqa: E402

from client_ceiling import pacer_trace, run_bench, start_pacer, truth  # noqa: E402


def one_run(how: str, extra: list[str], streams: int, tokens: int) -> dict[str, Any]:
    pacer, root = start_pacer("--ttft-ms", "1", "--itl-ms", "1")
    try:
        requests = streams * 3
        result = run_bench(root + "/v1", "-c", str(streams), "-n", str(requests), "--warmup", str(streams),
                           "--output-tokens", str(tokens), "--no-check", "--server-metrics", "off",
                           "--gpu-metrics", "off", *extra)
        measured = pacer_trace(root)[-requests:]
    finally:
        pacer.terminate()
        pacer.wait()
    step = result["steps"][0]
    s, client = step["summary"], step["health"]
    t_ttft, t_itl, _ = truth(measured)
    row = {
        "generator": how, "streams": streams, "tokens": tokens, "tok_s": s["output_throughput_tok_s"],
        "req_s": s["request_throughput_rps"], "ttft_err_ms": s["ttft_ms"]["p50"] - t_ttft,
        "itl_err_pct": 100 * (s["itl_ms"]["p50"] - t_itl) / t_itl if s["itl_ms"]["p50"] is not None else None,
        "client_lag_p99_ms": client["client_lag_p99_ms"], "cpu": client["cpu_fraction"],
        "kept_up": not client["saturated"], "problems": client["problems"],
        "nodes": len({a["node"] for a in client.get("actors") or []}) or None,
    }
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actors", default="1,2,4")
    parser.add_argument("--streams", default="100,200", help="token-bound case: streams of 300 tokens")
    parser.add_argument("--request-streams", default="50,100", help="request-bound case: streams of 4 tokens")
    parser.add_argument("--cpus", type=int, default=2, help="logical CPUs per node (4 actors on 2 nodes need 2)")
    args = parser.parse_args()
    actors = [int(x) for x in args.actors.split(",")]
    cases = [(int(n), 300) for n in args.streams.split(",")] + [(int(n), 4) for n in args.request_streams.split(",")]
    cluster = start_local_cluster(nodes=2, cpus_per_node=args.cpus, object_store_mb=200)
    rows = []
    try:
        for streams, tokens in cases:
            rows.append(one_run("1 process", [], streams, tokens))
            for a in actors:
                rows.append(one_run(f"{a} actor(s)", ["--ray", cluster.address, "-w", str(a)], streams, tokens))
    finally:
        cluster.stop()
    print("\n| generator | streams × tokens | tokens/s | requests/s | TTFT p50 err (ms) | ITL p50 err "
          "| client lag p99 (ms) | client CPU | kept up |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        itl = "-" if r["itl_err_pct"] is None else f"{r['itl_err_pct']:+.1f}%"
        kept = "yes" if r["kept_up"] else "no (" + ", ".join(r["problems"]) + ")"
        print(f"| {r['generator']} | {r['streams']} × {r['tokens']} | {r['tok_s']:,.0f} | {r['req_s']:,.0f} | "
              f"{r['ttft_err_ms']:+.2f} | {itl} | {r['client_lag_p99_ms']:.2f} | {100 * r['cpu']:.0f}% | {kept} |")


if __name__ == "__main__":
    main()
