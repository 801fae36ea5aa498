"""What does writing one Messages or Responses event cost, in the simulator and in the gateway?

Two measurements, each of the code on ``PYTHONPATH`` (run it once on each commit to compare them):

1. ``render``: CPU time per content event of an answer of ``--tokens`` one-word events, rendered by the
   simulator's server side (`tokometer.sim.servers.SERVERS`: read, every ``tokens``, ``last_tokens``)
   and by the gateway's client writer (`tokometer.protocols.gateway_clients.writer_for`: every ``content``,
   ``ending``), plain and with 32 reasoning tokens first; the best of ``--repeat`` rounds (the least
   disturbed by other work on the machine);
2. ``sim``: `tokometer sim` (TTFT 1 ms, ``--itl-ms`` per token) measured by `tokometer bench` at
   ``--concurrency`` streams of ``--tokens`` tokens over each API: output tokens/s and the client's
   verdict, the simulator's CPU time per token (its process's user + system time over the run).

    PYTHONPATH=src .venv/bin/python bench/writer_cost.py [--parts render,sim] [--tokens 512] [--concurrency 100]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

APIS = (("anthropic-messages", "/v1/messages"), ("openai-responses", "/v1/responses"))


def _sim_answer(path: str, api: str, n: int, reasoning: int) -> int:
    """Render one simulated answer; returns the bytes written."""
    from tokometer.prompt import Prompt
    from tokometer.protocols.common.base import GenerationParams
    from tokometer.protocols.common.server import StreamTiming
    from tokometer.protocols.registry import create_client
    from tokometer.sim.servers import SERVERS, count_words

    server = SERVERS[path]
    body = create_client(api).build(Prompt.from_text("one two three"), GenerationParams(model="m", max_tokens=n)).body
    info = server.read(body, "m", count_words)
    info.id, info.created = "cmpl-sim-1", 1
    info.reasoning_tokens = reasoning or None
    size = 0
    for i in range(n - 1):
        text, thought = ("", " word") if i < reasoning else (" word", "")
        size += len(server.tokens(info, [i], text, i, thought))
    size += len(server.last_tokens(info, [n - 1], " word", n - 1, "length", StreamTiming(1.0, 1.0, 2.0)))
    return size


def _gateway_answer(api: str, n: int, reasoning: int) -> int:
    from tokometer.protocols.gateway_clients import writer_for

    writer = writer_for(api, True, "m", False, 3, n)  # type: ignore[arg-type]
    size = 0
    for i in range(n):
        size += len(writer.content("", " word") if i < reasoning else writer.content(" word", ""))
    size += len(writer.ending("length", 3, n, reasoning or None))
    return size


def render(tokens: int, repeat: int, answers: int) -> list[dict[str, Any]]:
    rows = []
    for api, path in APIS:
        for reasoning in (0, 32):
            for side in ("sim", "gateway"):
                _sim_answer(path, api, 8, 2) if side == "sim" else _gateway_answer(api, 8, 2)  # imports, warm-up
                best = float("inf")
                size = 0
                for _ in range(repeat):
                    start = time.process_time_ns()
                    for _ in range(answers):
                        size = (_sim_answer(path, api, tokens, reasoning) if side == "sim"
                                else _gateway_answer(api, tokens, reasoning))
                    best = min(best, (time.process_time_ns() - start) / (answers * tokens))
                rows.append({"api": api, "reasoning": reasoning, "side": side, "ns_per_event": round(best),
                             "bytes_per_answer": size})
    return rows


def _start_sim(itl_ms: float) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen([sys.executable, "-m", "tokometer", "sim", "--port", "0", "--ttft-ms", "1",
                                "--itl-ms", str(itl_ms)], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    while True:
        line = process.stdout.readline()
        if not line:
            raise RuntimeError("the simulator did not start")
        if "http://" in line:
            url = line[line.index("http://"):].split()[0].rstrip("/")
            return process, url + ("" if url.endswith("/v1") else "/v1")


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sim(tokens: int, concurrency: int, itl_ms: float, requests: int) -> list[dict[str, Any]]:
    rows = []
    for api, _ in APIS:
        process, url = _start_sim(itl_ms)
        try:
            with tempfile.TemporaryDirectory() as tmp:
                out = Path(tmp) / "r.json"
                before = _cpu_s(process.pid)
                subprocess.run([sys.executable, "-m", "tokometer", "bench", "--url", url, "--api", api,
                                "--tokenizer", "none", "--no-store", "-q", "--no-check", "--model", "sim-model",
                                "-c", str(concurrency), "-n", str(requests), "--input-tokens", "16",
                                "--output-tokens", str(tokens), "--json", str(out)], check=False,
                               capture_output=True)
                cpu = _cpu_s(process.pid) - before
                data = json.loads(out.read_text())
        finally:
            process.terminate()
            process.wait(10)
        step = data["steps"][0]
        summary = step["summary"]
        health = step.get("client") or {}
        rows.append({"api": api, "output_tok_s": round(summary["output_throughput_tok_s"]),
                     "failed": summary["requests_failed"],
                     "sim_cpu_us_per_token": round(cpu / max(1, summary["output_tokens"]["total"]) * 1e6, 2),
                     "client": health.get("verdict"), "client_cpu": health.get("cpu_fraction")})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="render,sim")
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--answers", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--itl-ms", type=float, default=1.0)
    args = parser.parse_args()
    resource.setrlimit(resource.RLIMIT_NOFILE, (4096, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    parts = args.parts.split(",")
    result: dict[str, Any] = {}
    if "render" in parts:
        result["render"] = render(args.tokens, args.repeat, args.answers)
    if "sim" in parts:
        result["sim"] = sim(args.tokens, args.concurrency, args.itl_ms, args.requests)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
