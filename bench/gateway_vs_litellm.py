"""tokometer's gateway beside LiteLLM's proxy: added TTFT and streams per second, the same upstream, one run.

Against bench/pacer.py (an exactly paced OpenAI upstream), with `tokometer bench` as the client, three
ways to the same upstream one after another: directly, through `tokometer gateway` (one process) and
through LiteLLM's proxy (`litellm --config`, one worker, the upstream as an ``openai/`` model):

1. latency: one stream at a time, 200 tokens at 1 ms each: TTFT p50/p99, and what each path adds;
2. throughput: a closed loop of 32 streams of 16-token answers (TTFT 1 ms, 0.1 ms a token) for
   ``--requests`` requests: streams/s, and each proxy's CPU time per request (user + system).

LiteLLM lives in a venv of its own (it pins its own FastAPI, pydantic and uvicorn): made once by

    python3 -m venv ~/.cache/tokometer/litellm-venv && ~/.cache/tokometer/litellm-venv/bin/pip install 'litellm[proxy]'

and then

    .venv/bin/python bench/gateway_vs_litellm.py [--litellm ~/.cache/tokometer/litellm-venv/bin/litellm]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from client_ceiling import run_bench, start_pacer  # noqa: E402
from gateway_overhead import cpu_seconds, start_gateway, stop, summary  # noqa: E402

KEY = "sk-tokometer-bench-0123456789abcdef"
"""LiteLLM's proxy refuses to start without a master key; every path is sent it (the others ignore it)."""
_DEFAULT_LITELLM = Path.home() / ".cache/tokometer/litellm-venv/bin/litellm"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_litellm(binary: Path, upstream: str, tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    config = tmp / "litellm.yaml"
    config.write_text("model_list:\n  - model_name: pacer\n    litellm_params:\n      model: openai/pacer\n"
                      f"      api_base: {upstream}/v1\n      api_key: none\n"
                      "litellm_settings:\n  telemetry: false\n  drop_params: true\n")
    port = _free_port()
    env = {**os.environ, "LITELLM_LOG": "ERROR", "LITELLM_TELEMETRY": "False", "LITELLM_MASTER_KEY": KEY}
    process = subprocess.Popen([str(binary), "--config", str(config), "--host", "127.0.0.1", "--port", str(port),
                                "--num_workers", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    root = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(root + "/health/liveliness", timeout=2):  # no key needed
                return process, root
        except OSError:
            time.sleep(0.5)
    process.kill()
    raise SystemExit("LiteLLM's proxy did not start within 120 s")


def _measure(url: str, pid: int | None, args: tuple[str, ...]) -> dict[str, Any]:
    before = cpu_seconds(pid) if pid else 0.0
    s = summary(run_bench(url, *args))
    done = s["requests_completed"]
    cpu = cpu_seconds(pid) - before if pid else 0.0
    return {"requests": done, "failed": s["requests_failed"], "ttft_p50_ms": s["ttft_ms"]["p50"],
            "ttft_p99_ms": s["ttft_ms"]["p99"], "streams_per_s": s["request_throughput_rps"],
            "cpu_us_per_request": 1e6 * cpu / done if pid and done else None, "errors": s["errors"]}


def compare(litellm: Path, requests: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for part, pacer_args, load in (
            ("latency", ("--ttft-ms", "1", "--itl-ms", "1", "--varied"),
             ("-c", "1", "-n", "60", "--warmup", "3", "--output-tokens", "200")),
            ("throughput", ("--ttft-ms", "1", "--itl-ms", "0.1", "--varied"),
             ("-c", "32", "-n", str(requests), "--warmup", "32", "--output-tokens", "16"))):
        pacer, root = start_pacer(*pacer_args)
        try:
            with tempfile.TemporaryDirectory() as tmp:
                gateway, gw_root = start_gateway(root, Path(tmp))
                try:
                    lite, lite_root = start_litellm(litellm, root, Path(tmp))
                    try:
                        args = (*load, "--model", "pacer", "--api-key", KEY)
                        out[part] = {"direct": _measure(root + "/v1", None, args),
                                     "tokometer": _measure(gw_root + "/v1", gateway.pid, args),
                                     "litellm": _measure(lite_root + "/v1", lite.pid, args)}
                    finally:
                        lite.terminate()
                        lite.wait(30)
                finally:
                    stop(gateway)
        finally:
            pacer.terminate()
            pacer.wait()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--litellm", type=Path, default=_DEFAULT_LITELLM, help="the litellm command")
    parser.add_argument("--requests", type=int, default=1000, help="requests of the throughput part, per path")
    opts = parser.parse_args()
    if not opts.litellm.exists():
        raise SystemExit(f"{opts.litellm} not found: make LiteLLM's venv first (see this script's docstring)")
    result = compare(opts.litellm, opts.requests)
    print(json.dumps(result, indent=2))
    for part in ("latency", "throughput"):
        rows = result[part]
        base = rows["direct"]
        for name in ("tokometer", "litellm"):
            row = rows[name]
            if not row["requests"]:
                print(f"{part:10} {name:9} every request failed: {row['errors']}")
                continue
            print(f"{part:10} {name:9} TTFT p50 +{row['ttft_p50_ms'] - base['ttft_p50_ms']:.2f} ms, "
                  f"p99 +{row['ttft_p99_ms'] - base['ttft_p99_ms']:.2f} ms, {row['streams_per_s']:.0f} streams/s "
                  f"(direct {base['streams_per_s']:.0f}), CPU {row['cpu_us_per_request'] or 0:.0f} us/request, "
                  f"{row['failed']} failed")


if __name__ == "__main__":
    main()
