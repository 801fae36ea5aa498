"""What does the gateway cost? TTFT, end-to-end and per-chunk overhead, and its streaming ceiling.

Against bench/pacer.py (an exactly paced upstream), with `tokometer bench` as the client:

1. one stream at a time, 200 tokens at 1 ms each: TTFT and E2E p50/p99 direct vs through the gateway;
   the per-chunk cost is the E2E difference beyond the TTFT difference, over the chunks;
2. one stream paced at 14,000 tokens/s: does it pass through at full speed?
3. open-loop rates of short streams (16 tokens) through one gateway process: the highest rate it
   sustains (every request answered, achieved rate within 5% of offered, TTFT overhead p99 < 50 ms),
   and the gateway's CPU time per request (its process's user + system time over the step).

``--tracing`` turns on the gateway's OpenTelemetry traces (``[tracing]``), exported over OTLP/HTTP to a
receiver in this process that counts each export and drops it (a Collector's work is not the gateway's).

``--pin`` puts the gateway alone on the last CPU and the client and the upstream on the others
(``taskset``; the gateway's figure is then its own, not CPU contention with them).

    .venv/bin/python bench/gateway_overhead.py [--pin] [--tracing] [--parts latency,headline,ceiling] [--rates 400,800]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from client_ceiling import run_bench, start_pacer  # noqa: E402

GATEWAY_PREFIX: list[str] = []
"""Put before the gateway's command (``taskset -c N`` with ``--pin``)."""
TRACING: list[str] = []
"""The gateway config's ``[tracing]`` table (``--tracing``), or nothing."""
EXPORTS: list[int] = []
"""The sizes of the exports the OTLP receiver took (``--tracing``)."""


@contextlib.contextmanager
def otlp_receiver() -> Iterator[str]:
    """An OTLP/HTTP receiver on loopback that answers each export as a Collector does and keeps only its size;
    yields its URL."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return None

        def do_POST(self) -> None:
            EXPORTS.append(len(self.rfile.read(int(self.headers.get("Content-Length", "0")))))
            self.send_response(200)  # an empty ExportTraceServiceResponse is zero bytes of protobuf
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def start_gateway(upstream: str, tmp: Path) -> tuple[subprocess.Popen[str], str]:
    config = tmp / "gateway.toml"
    config.write_text(f'[[upstreams]]\nname = "pacer"\nurl = "{upstream}/v1"\nmodel = "pacer"\n'
                      f'[[routes]]\nmodel = "pacer"\nupstreams = ["pacer"]\n[cache]\nenabled = false\n'
                      f'[log]\npath = "{tmp / "requests.jsonl"}"\n' + "".join(TRACING))
    process = subprocess.Popen([*GATEWAY_PREFIX, sys.executable, "-m", "tokometer", "gateway", "--config", str(config),
                                "--port", "0"], stdout=subprocess.PIPE, text=True, env={**os.environ})
    assert process.stdout is not None
    return process, process.stdout.readline().split()[-1]


def stop(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def logged_overhead_ms(root: str) -> list[float]:
    """The gateway's own time on each request's first token so far (``overhead_ms`` of its request log)."""
    log = LOGS[root]
    for _ in range(50):  # the log is written by a background thread
        lines = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        if lines:
            break
        time.sleep(0.1)
    return [line["overhead_ms"] for line in lines if line.get("overhead_ms") is not None]


LOGS: dict[str, Path] = {}


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def pacer_and_gateway(*pacer_args: str) -> Iterator[tuple[str, str, int]]:
    """A paced upstream and a gateway in front of it: yields (upstream root, gateway root, gateway pid)."""
    pacer, root = start_pacer(*pacer_args)
    with tempfile.TemporaryDirectory() as tmp:
        gateway, gw_root = start_gateway(root, Path(tmp))
        LOGS[gw_root] = Path(tmp) / "requests.jsonl"
        try:
            yield root, gw_root, gateway.pid
        finally:
            stop(gateway)
            pacer.terminate()
            pacer.wait()


def summary(result: dict[str, Any]) -> dict[str, Any]:
    s: dict[str, Any] = result["steps"][0]["summary"]
    return s


def own_overhead_us(root: str) -> float:
    """The gateway's own time per request (its /metrics histogram), mean in microseconds."""
    with urllib.request.urlopen(root + "/metrics", timeout=10) as response:
        text = response.read().decode()
    values = {line.split("{")[0]: float(line.rpartition(" ")[2]) for line in text.splitlines()
              if line.startswith("tokometer_gateway_overhead_seconds_")}
    count = values.get("tokometer_gateway_overhead_seconds_count", 0.0)
    return 1e6 * values.get("tokometer_gateway_overhead_seconds_sum", 0.0) / count if count else float("nan")


def latency(tokens: int = 200, n: int = 60) -> dict[str, float]:
    with pacer_and_gateway("--ttft-ms", "1", "--itl-ms", "1") as (root, gw_root, _):
        args = ("-c", "1", "-n", str(n), "--warmup", "3", "--output-tokens", str(tokens), "--model", "pacer")
        direct = summary(run_bench(root + "/v1", *args))
        via = summary(run_bench(gw_root + "/v1", *args))
        own = own_overhead_us(gw_root)
        time.sleep(0.5)
        logged = sorted(logged_overhead_ms(gw_root))
    out = {
        "gateway_own_overhead_mean_us": own,
        "gateway_own_ttft_p50_ms": logged[len(logged) // 2] if logged else float("nan"),
        "gateway_own_ttft_p99_ms": logged[min(len(logged) - 1, int(0.99 * len(logged)))] if logged else float("nan"),
        "ttft_p50_direct_ms": direct["ttft_ms"]["p50"], "ttft_p50_gateway_ms": via["ttft_ms"]["p50"],
        "ttft_p99_direct_ms": direct["ttft_ms"]["p99"], "ttft_p99_gateway_ms": via["ttft_ms"]["p99"],
        "e2e_p50_direct_ms": direct["e2e_ms"]["p50"], "e2e_p50_gateway_ms": via["e2e_ms"]["p50"],
        "e2e_p99_direct_ms": direct["e2e_ms"]["p99"], "e2e_p99_gateway_ms": via["e2e_ms"]["p99"],
        "itl_p50_direct_ms": direct["itl_ms"]["p50"], "itl_p50_gateway_ms": via["itl_ms"]["p50"],
    }
    extra_e2e = out["e2e_p50_gateway_ms"] - out["e2e_p50_direct_ms"]
    extra_ttft = out["ttft_p50_gateway_ms"] - out["ttft_p50_direct_ms"]
    out["ttft_overhead_p50_ms"] = extra_ttft
    out["e2e_overhead_p50_ms"] = extra_e2e
    out["per_chunk_overhead_us"] = 1e3 * max(0.0, extra_e2e - extra_ttft) / tokens
    return out


def headline(tokens: int = 3000, n: int = 6) -> dict[str, float]:
    with pacer_and_gateway("--ttft-ms", "1", "--itl-ms", str(1000 / 14000)) as (root, gw_root, _):
        args = ("-c", "1", "-n", str(n), "--warmup", "1", "--output-tokens", str(tokens), "--model", "pacer")
        direct = summary(run_bench(root + "/v1", *args))
        via = summary(run_bench(gw_root + "/v1", *args))
    return {"decode_tok_s_direct": direct["decode_speed_tok_s"]["p50"],
            "decode_tok_s_gateway": via["decode_speed_tok_s"]["p50"]}


def ceiling(rates: list[float], tokens: int = 16) -> list[dict[str, Any]]:
    rows = []
    for rate in rates:
        with pacer_and_gateway("--ttft-ms", "1", "--itl-ms", "1") as (_, gw_root, pid):
            run_bench(gw_root + "/v1", "-c", "4", "-n", "200", "--output-tokens", str(tokens), "--model", "pacer")
            cpu = cpu_seconds(pid)
            s = summary(run_bench(gw_root + "/v1", "--rate", str(rate), "-n", str(int(rate * 5)), "--output-tokens",
                                  str(tokens), "--model", "pacer", "--timeout", "30s"))
            cpu = cpu_seconds(pid) - cpu
        ok = (s["requests_failed"] == 0 and s["request_throughput_rps"] >= 0.95 * rate
              and s["ttft_ms"]["p99"] is not None and s["ttft_ms"]["p99"] < 50)
        rows.append({"rate": rate, "completed": s["requests_completed"], "failed": s["requests_failed"],
                     "achieved_rps": s["request_throughput_rps"], "ttft_p50_ms": s["ttft_ms"]["p50"],
                     "ttft_p99_ms": s["ttft_ms"]["p99"], "sustained": ok,
                     "gateway_cpu_us_per_request": 1e6 * cpu / max(1, s["requests_completed"])})
        print(json.dumps(rows[-1]), flush=True)
        if not ok:
            break
    return rows


def pin() -> None:
    """The gateway alone on the last CPU; this process (and so the client and the upstream) on the others."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise SystemExit("--pin needs at least 2 CPUs")
    os.sched_setaffinity(0, set(cpus[:-1]))
    GATEWAY_PREFIX[:] = ["taskset", "-c", str(cpus[-1])]
    print(f"pinned: gateway on CPU {cpus[-1]}, client and upstream on CPUs {cpus[:-1]}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pin", action="store_true", help="the gateway alone on one CPU (taskset)")
    parser.add_argument("--parts", default="latency,headline,ceiling")
    parser.add_argument("--rates", default="50,100,200,300,400,600,800,1000,1200,1500,1800")
    parser.add_argument("--tracing", action="store_true", help="the gateway's OpenTelemetry traces on, exported to "
                        "an OTLP receiver in this process")
    args = parser.parse_args()
    if args.pin:
        pin()
    with contextlib.ExitStack() as stack:
        if args.tracing:
            TRACING[:] = [f'[tracing]\nendpoint = "{stack.enter_context(otlp_receiver())}"\n']
        run(args)
        if args.tracing:
            print(f"the OTLP receiver took {len(EXPORTS)} exports, {sum(EXPORTS):,} bytes", flush=True)


def run(args: argparse.Namespace) -> None:
    """The parts ``args.parts`` names, each printed as it ends."""
    parts = set(args.parts.split(","))
    if "latency" in parts:
        lat = latency()
        print(json.dumps(lat, indent=1), flush=True)
        print(f"gateway's own time per request (its metrics): {lat['gateway_own_overhead_mean_us']:.0f} us mean; "
              f"on the first token (its request log): p50 {lat['gateway_own_ttft_p50_ms']:.3f} ms, "
              f"p99 {lat['gateway_own_ttft_p99_ms']:.3f} ms")
        print(f"TTFT overhead p50 {lat['ttft_overhead_p50_ms']:+.2f} ms (p99 direct {lat['ttft_p99_direct_ms']:.2f} / "
              f"gateway {lat['ttft_p99_gateway_ms']:.2f} ms); E2E overhead p50 {lat['e2e_overhead_p50_ms']:+.2f} ms; "
              f"per chunk ~{lat['per_chunk_overhead_us']:.0f} us")
    if "headline" in parts:
        head = headline()
        print(json.dumps(head), flush=True)
        print(f"14,000 tok/s stream: {head['decode_tok_s_direct']:,.0f} direct, {head['decode_tok_s_gateway']:,.0f} "
              "through the gateway")
    if "ceiling" in parts:
        rows = ceiling([float(r) for r in args.rates.split(",")])
        best = max((r["rate"] for r in rows if r["sustained"]), default=None)
        print(f"highest sustained rate of 16-token streams through one gateway process: {best} req/s")


if __name__ == "__main__":
    main()
