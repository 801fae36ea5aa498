"""How many streams per second does the gateway relay, next to the upstream alone, in the same run?

Against bench/pacer.py (TTFT 1 ms, 1 ms per token, no spinning, so that it leaves the CPU to the
others), with `tokometer bench` as the client, one command reports:

1. closed-loop streams/s of 16-token answers (``--concurrency`` streams at a time) straight to the
   pacer and through the gateway, alternated ``--rounds`` times in the same minutes; the ratio;
2. the gateway's CPU time per request: the user + system time of its processes (the supervisor and
   every worker under ``--workers N``) over each gateway step, divided by the requests it answered;
3. the TTFT the gateway adds as the client sees it: ``--pairs`` sequential requests (one at a time)
   direct and through the gateway, p50 of each, the difference.

``--pin`` puts the gateway alone on the last CPU, the client and the pacer on the others
(``taskset``); without it every process shares every CPU (what ``--workers N`` on 2 cores measures).
``--profile PY_SPY`` (the path of a ``py-spy`` binary) samples the gateway (one worker) through one more
gateway step and prints where its samples went, by part of the request's path (`PARTS`), and the
functions that spent most themselves.

    .venv/bin/python bench/gateway_throughput.py [--pin] [--workers 1] [--concurrency 32] [--requests 4000]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from statistics import median
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from client_ceiling import run_bench, start_pacer  # noqa: E402
from gateway_overhead import GATEWAY_PREFIX, pin  # noqa: E402  (--pin fills the one prefix both scripts use)


def start_gateway(upstream: str, tmp: Path, workers: int) -> tuple[subprocess.Popen[str], str]:
    config = tmp / "gateway.toml"
    config.write_text(f'[[upstreams]]\nname = "pacer"\nurl = "{upstream}/v1"\nmodel = "pacer"\n'
                      f'[[routes]]\nmodel = "pacer"\nupstreams = ["pacer"]\n[cache]\nenabled = false\n'
                      f'[log]\npath = "{tmp / "requests.jsonl"}"\n')
    process = subprocess.Popen([*GATEWAY_PREFIX, sys.executable, "-m", "tokometer", "gateway", "--config", str(config),
                                "--port", "0", "--workers", str(workers)], stdout=subprocess.PIPE, text=True,
                               env={**os.environ})
    assert process.stdout is not None
    return process, process.stdout.readline().split()[-1]


def stop(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None


def tree_cpu_seconds(root: int) -> float:
    """User + system CPU time so far of ``root`` and every live descendant (the gateway's workers)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat(int(entry.name))) is not None:
            parents[int(entry.name)] = int(fields[1])
    tree, changed = {root}, True
    while changed:
        changed = False
        for pid, ppid in parents.items():
            if ppid in tree and pid not in tree:
                tree.add(pid)
                changed = True
    total = 0
    for pid in tree:
        if (fields := _stat(pid)) is not None:
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def closed_loop(url: str, concurrency: int, requests: int, tokens: int) -> dict[str, Any]:
    result = run_bench(url + "/v1", "-c", str(concurrency), "-n", str(requests), "--output-tokens", str(tokens),
                       "--model", "pacer", "--timeout", "60s")
    s: dict[str, Any] = result["steps"][0]["summary"]
    return s


def ttft_p50(url: str, pairs: int, tokens: int) -> float:
    result = run_bench(url + "/v1", "-c", "1", "-n", str(pairs), "--warmup", "5", "--output-tokens", str(tokens),
                       "--model", "pacer")
    p50: float = result["steps"][0]["summary"]["ttft_ms"]["p50"]
    return p50


PARTS: list[tuple[str, tuple[str, ...]]] = [
    # (part, what a stack frame's text, "function (file:line)", contains), matched from the sample's innermost
    # frame outwards: the first frame that matches any part names the sample's part
    ("request log (and its writing thread)", ("requestlog.py", "log_entry (")),
    ("accounting and metrics", ("accounting.py", "prometheus", "Measurement.outcome", "Gateway.finish")),
    ("upstream events: split and parse", ("framing.py", "/wire/", "openai/chunks", "openai/client.py", ".parse (")),
    ("upstream reads and hand-over", ("http1.py", "upstream.py", "queues.py")),
    ("response writes (the client's socket)", ("ClientStream.", "RequestResponseCycle.send", "flow_control")),
    ("relay and reply per event", ("relay.py", "reply.py", "assemble.py", "openai_format.py")),
    ("router, opening the upstream", ("router.py", "hedge.py", "balance.py", "breaker.py")),
    ("admission: body, checks, prompt", ("stages.py", "jsonbody", "request_limits", "shapes.py", "inbound/body.py",
                                         "prompt.py", "Gateway.handle")),
    ("uvicorn/httptools: heads, connections", ("uvicorn/", "connections.py", "starlette/")),
    ("event loop (uvloop: epoll, socket reads; tasks)", ("asyncio/", "uvloop", "runners.py")),
]


def part_of(stack: list[str]) -> str:
    for frame in reversed(stack):
        for part, marks in PARTS:
            if any(mark in frame for mark in marks):
                return part
    return "other"


def profile(py_spy: str, pid: int, run: Any) -> None:
    """Sample ``pid`` with py-spy while ``run()`` runs; print the samples' shares by part and the top self time."""
    out = Path(tempfile.gettempdir()) / f"gateway-profile-{pid}.txt"
    spy = subprocess.Popen([py_spy, "record", "--pid", str(pid), "--rate", "250", "--format", "raw", "--nonblocking",
                            "--output", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # py-spy attaches
    run()
    spy.send_signal(signal.SIGINT)
    spy.wait(timeout=30)
    parts: Counter[str] = Counter()
    own: Counter[str] = Counter()
    for line in out.read_text().splitlines():
        stack_text, _, count = line.rpartition(" ")
        stack = stack_text.split(";")
        parts[part_of(stack)] += int(count)
        own[stack[-1]] += int(count)
    total = sum(parts.values()) or 1
    print(f"profile: {total} samples (the stacks: {out})", flush=True)
    for part, n in parts.most_common():
        print(f"  {100 * n / total:5.1f} %  {part}")
    print("  functions by own samples:")
    for frame, n in own.most_common(25):
        print(f"  {100 * n / total:5.1f} %  {frame[:150]}")


def measure(args: argparse.Namespace) -> dict[str, Any]:
    pacer, root = start_pacer("--ttft-ms", "1", "--itl-ms", "1", "--spin-us", "0", "--tokens", str(args.tokens))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            gateway, gw_root = start_gateway(root, Path(tmp), args.workers)
            try:
                closed_loop(gw_root, args.concurrency, 400, args.tokens)  # warm: connections, imports, caches
                closed_loop(root, args.concurrency, 400, args.tokens)
                direct, via, cpu_us = [], [], []
                for _ in range(args.rounds):
                    d = closed_loop(root, args.concurrency, args.requests, args.tokens)
                    before = tree_cpu_seconds(gateway.pid)
                    g = closed_loop(gw_root, args.concurrency, args.requests, args.tokens)
                    spent = tree_cpu_seconds(gateway.pid) - before
                    direct.append(d["request_throughput_rps"])
                    via.append(g["request_throughput_rps"])
                    cpu_us.append(1e6 * spent / max(1, g["requests_completed"]))
                    failed = d["requests_failed"] + g["requests_failed"]
                    print(json.dumps({"direct_rps": round(direct[-1]), "gateway_rps": round(via[-1]),
                                      "gateway_cpu_us_per_request": round(cpu_us[-1]), "failed": failed}),
                          flush=True)
                if args.profile:
                    profile(args.profile, gateway.pid,
                            lambda: closed_loop(gw_root, args.concurrency, args.requests, args.tokens))
                ttft_direct, ttft_via = [], []
                for _ in range(2):  # alternated, so that a busy moment of the machine hits both
                    ttft_direct.append(ttft_p50(root, args.pairs // 2, args.tokens))
                    ttft_via.append(ttft_p50(gw_root, args.pairs // 2, args.tokens))
            finally:
                stop(gateway)
    finally:
        pacer.terminate()
        pacer.wait()
    return {"workers": args.workers, "pinned": args.pin, "concurrency": args.concurrency, "tokens": args.tokens,
            "direct_rps": median(direct), "gateway_rps": median(via), "ratio": median(via) / median(direct),
            "gateway_cpu_us_per_request": median(cpu_us), "ttft_p50_direct_ms": median(ttft_direct),
            "ttft_p50_gateway_ms": median(ttft_via),
            "added_ttft_p50_ms": median(ttft_via) - median(ttft_direct)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pin", action="store_true", help="the gateway alone on one CPU (taskset)")
    parser.add_argument("--workers", type=int, default=1, help="gateway worker processes")
    parser.add_argument("--concurrency", type=int, default=32, help="streams at a time (closed loop)")
    parser.add_argument("--requests", type=int, default=4000, help="requests per step")
    parser.add_argument("--rounds", type=int, default=3, help="direct/gateway steps, alternated")
    parser.add_argument("--tokens", type=int, default=16, help="tokens per answer")
    parser.add_argument("--pairs", type=int, default=200, help="sequential requests each way for added TTFT")
    parser.add_argument("--profile", metavar="PY_SPY", help="sample the gateway with this py-spy through one more step")
    args = parser.parse_args()
    if args.pin:
        pin()
    out = measure(args)
    print(json.dumps(out, indent=1), flush=True)
    print(f"{args.tokens}-token streams/s: {out['direct_rps']:,.0f} direct, {out['gateway_rps']:,.0f} through "
          f"{args.workers} gateway worker(s) ({out['ratio']:.0%}); gateway CPU {out['gateway_cpu_us_per_request']:,.0f}"
          f" us/request; added TTFT p50 {out['added_ttft_p50_ms']:+.2f} ms")


if __name__ == "__main__":
    main()
