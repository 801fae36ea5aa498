"""How late does tokometer send a trace's requests on this host?

Replays the bundled example trace (60 requests, shared prefixes), its gaps compressed by ``--time-scale`` so that
requests come in bursts, against `tokometer sim` (5 ms to the first token, 1 ms a token) on loopback, several
times, and prints for each replay the client's send lag against the trace's times (p50, p99, max), the new
connections it opened and how long the slowest took, and how busy the host's CPUs were. The trace replay test
(tests/integration/test_trace_replay.py) only bounds the lag by a scheduler slice; this is where the figure is
measured, and the bench page records it with the machine.

    .venv/bin/python bench/trace_send_lag.py [--replays 8] [--time-scale 0.1]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from statistics import median


def start_sim() -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen([sys.executable, "-m", "tokometer", "sim", "--port", "0", "--ttft-ms", "5",
                                "--itl-ms", "1"], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    return process, process.stdout.readline().strip().split()[-1]


def replay(url: str, time_scale: float, out: Path) -> dict[str, float]:
    subprocess.run([sys.executable, "-m", "tokometer", "bench", "--url", url + "/v1", "--trace", "example",
                    "--time-scale", str(time_scale), "--server-metrics", "off", "--gpu-metrics", "off",
                    "--no-store", "--json", str(out)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    step = json.loads(out.read_text())["steps"][0]
    lag, connect = step["summary"]["client_lag_ms"], step["summary"].get("connect_ms") or {}
    return {"p50": lag["p50"], "p99": lag["p99"], "max": lag["max"], "connects": connect.get("count", 0),
            "connect_max": connect.get("max", 0.0), "busy": 100 * (step["health"].get("host_cpu_busy") or 0.0)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replays", type=int, default=8)
    parser.add_argument("--time-scale", type=float, default=0.1)
    args = parser.parse_args()
    sim, url = start_sim()
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for _ in range(args.replays):
                rows.append(replay(url, args.time_scale, Path(tmp) / "run.json"))
    finally:
        sim.terminate()
        sim.wait(10)
    print("| replay | send lag p50 (ms) | p99 | max | connections opened | slowest (ms) | host CPUs busy |")
    print("|---|---|---|---|---|---|---|")
    for i, r in enumerate(rows, 1):
        print(f"| {i} | {r['p50']:.2f} | {r['p99']:.2f} | {r['max']:.2f} | {r['connects']:.0f} | "
              f"{r['connect_max']:.2f} | {r['busy']:.0f} % |")
    print(f"\nmedian over replays: p50 {median(r['p50'] for r in rows):.2f} ms, "
          f"p99 {median(r['p99'] for r in rows):.2f} ms")


if __name__ == "__main__":
    main()
