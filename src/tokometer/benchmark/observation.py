"""What the server and its GPUs did during each step of a run, beside what the client measured.

Before the first step the server's ``/metrics`` is read once: if there is none, the report says
so in one line ("server metrics: none at URL") and the run goes on without. The sources are then
sampled on a thread of their own (`tokometer.observe.sampler`) through the whole run; after each
step, the readings taken during it become the step's ``server`` block (requests running and
waiting, KV-cache use, the server's own token rates and TTFT/TPOT percentiles: `observe.server_window`)
and ``gpu`` blocks (`observe.gpu_window`), and the client's figures are cross-checked against the
server's (`crosscheck`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from tokometer.benchmark.spec import BenchSpec
from tokometer.metrics import StepSummary
from tokometer.observe.buckets import describe, from_json
from tokometer.observe.sampler import Sampler
from tokometer.observe.snapshot import GpuSample, Snapshot
from tokometer.observe.watch import is_local, metrics_url
from tokometer.util.shown import clipped

__all__ = ["SERVER_LATENCIES", "SETTLE_S", "RunObservation", "StepObservation", "client_counterpart", "crosscheck",
           "server_metrics_url"]

SERVER_LATENCIES = (("ttft", "TTFT"), ("tpot", "ITL/TPOT"), ("queue", "queue"), ("e2e", "E2E"))
"""The server's latency histograms (`observe.snapshot.HISTOGRAMS`) as the step report names them, in order."""
SETTLE_S: Final = 1.0
"""The longest a step's closing reading waits for the server's count of finished requests to reach the client's
(`RunObservation.close_window`): an engine counts a request once its output is processed, which can come after
the client has the last token (vLLM beside a busy host: 3 of 4 in one reading); a wait capped so that a server
that counts otherwise costs a step at most this."""
_SETTLE_POLL_S: Final = 0.05

PER_REQUEST_TPOT = ("tgi", "tokometer-gateway")
"""Sources whose ``tpot`` histogram has one observation per request (its mean decode time per token: the
client's TPOT); the others observe every gap between tokens (the client's ITL)."""


def client_counterpart(histogram: str, source: str) -> tuple[str, str] | None:
    """The client's own distribution of the quantity a server histogram measures: (`StepSummary` field, label);
    None for one the client cannot see (the server's queue time)."""
    if histogram == "ttft":
        return "ttft_ms", "TTFT"
    if histogram == "e2e":
        return "e2e_ms", "E2E"
    if histogram == "tpot":
        return ("tpot_ms", "TPOT") if source in PER_REQUEST_TPOT else ("itl_ms", "ITL")
    return None

TOKENS_TOLERANCE = 0.10
"""Client and server output tokens/s may differ by this share before the report says so."""
TTFT_TOLERANCE = 0.25
"""The server's TTFT p50 may exceed the client's by this share (histogram buckets are coarse) before the
report says the two disagree; below the client's, the difference is what happened outside the engine."""


def server_metrics_url(spec: BenchSpec) -> str | None:
    """Where the server's Prometheus exposition is, or None (``--server-metrics off``)."""
    choice = spec.server_metrics.strip()
    if choice == "off":
        return None
    return metrics_url(spec.url) if choice == "auto" else choice


@dataclass(frozen=True, slots=True)
class StepObservation:
    """A step's ``server`` block, its ``gpu`` blocks, and sentences for the report."""

    server: dict[str, Any] | None
    gpu: list[dict[str, Any]] | None
    findings: list[str]


def crosscheck(summary: StepSummary, server: dict[str, Any]) -> list[str]:
    """Sentences where the client's and the server's accounts of the step disagree beyond the tolerances."""
    out: list[str] = []
    rates = server.get("rates") or {}
    server_tok_s = rates.get("generation_tokens")
    client_tok_s = summary.output_throughput_tok_s
    if server_tok_s and client_tok_s and abs(server_tok_s - client_tok_s) > TOKENS_TOLERANCE * client_tok_s:
        out.append(f"the server generated {server_tok_s:,.1f} tok/s, the client received {client_tok_s:,.1f} "
                   f"tok/s ({100 * (server_tok_s / client_tok_s - 1):+.0f}%, tolerance ±{TOKENS_TOLERANCE:.0%}): "
                   "other clients on the server, or tokens that never reach the client (e.g. speculative or "
                   "aborted ones)")
    located = from_json((server.get("histograms") or {}).get("ttft"), "p50")
    server_ttft = located.scaled(1e3) if located is not None else None
    # the least the server's p50 can be: its number, or its bucket's lower edge
    least = None if server_ttft is None else (server_ttft.value if server_ttft.kind == "value" else server_ttft.lower)
    client_ttft_ms = summary.ttft_ms.p50
    if least is not None and client_ttft_ms and least > (1 + TTFT_TOLERANCE) * client_ttft_ms:
        out.append(f"the server's TTFT p50 ({describe(server_ttft)} ms) is above the client's ({client_ttft_ms:,.1f} "
                   f"ms) by more than {TTFT_TOLERANCE:.0%}: the server counts TTFT differently, or other "
                   "clients' requests dominate its histogram")
    return out


class RunObservation:
    """The sampling of one run: started before the first step, read after each, stopped at the end."""

    def __init__(self, sampler: Sampler, summarize_server: Callable[[Sequence[Snapshot], int], dict[str, Any]],
                 summarize_gpu: Callable[[Sequence[GpuSample], int, int | None, int, int],
                                         tuple[dict[str, Any] | None, list[str]]]) -> None:
        self.sampler = sampler
        self._server = summarize_server
        self._gpu = summarize_gpu

    @classmethod
    def start(cls, spec: BenchSpec, warnings: list[str]) -> RunObservation | None:
        """Check the sources once and start sampling them; None when there is nothing to sample."""
        from tokometer.observe.gpu_source import gpu_reader
        from tokometer.observe.scrape import scraper
        from tokometer.observe.summaries import gpu_summary, server_summary

        server: Callable[[], Snapshot] | None = None
        first: Snapshot | None = None
        url = server_metrics_url(spec)
        if url is not None:
            context = spec.tls().context() if url.startswith("https://") else None
            scrape = scraper(url, min(5.0, spec.connect_timeout_s), context)  # with llama.cpp's /slots
            try:
                first = scrape()
                server = scrape
            except (OSError, ValueError) as exc:
                warnings.append(f"server metrics: none at {url} ({clipped(' '.join(str(exc).split()))}); "
                                "give --server-metrics URL, or off")
            if first is not None and first.source == "unknown":
                warnings.append(f"server metrics at {url}: not an engine tokometer knows; its samples are kept raw")
        gpus, note = gpu_reader(spec.gpu_metrics, local=is_local(spec.url))
        if note:
            warnings.append(note)
        if server is None and gpus is None:
            return None
        sampler = Sampler(server, gpus, spec.scrape_interval_s)
        if first is not None:
            sampler.snapshots.append(first)
        if gpus is not None:
            sampler.sample()  # a first reading of every GPU, before the first step
        sampler.start()
        return cls(sampler, server_summary, gpu_summary)

    def close_window(self, start_ns: int, end_ns: int, finished: int) -> None:
        """A reading taken now, which closes the window of the step that ran from ``start_ns`` to ``end_ns``: after
        its summary (`tokometer.runs.finish`), as the server's counters of the last answers may land a moment
        after them, and before the text check, whose tokenizer may take a while over every answer
        (`tokometer.runs.finish.check_step_text`). While the server's count of requests finished since
        ``start_ns`` (where it keeps one) is below the ``finished`` the client saw, read again every 50 ms, for at
        most `SETTLE_S`; the last reading is the one that closes the window (`Sampler.close_with_newest`)."""
        self.sampler.sample()
        deadline = time.monotonic() + SETTLE_S
        while self._behind(start_ns, finished) and time.monotonic() < deadline:
            time.sleep(_SETTLE_POLL_S)
            self.sampler.sample()
        self.sampler.close_with_newest(end_ns)

    def _behind(self, start_ns: int, finished: int) -> bool:
        """Whether the server's readings since ``start_ns`` count fewer finished requests than ``finished``;
        False where it counts none (no such counter, or fewer than two readings)."""
        readings, _ = self.sampler.server_window(start_ns, time.perf_counter_ns())
        first = readings[0].counters.get("requests_finished") if readings else None
        last = readings[-1].counters.get("requests_finished") if readings else None
        return len(readings) >= 2 and first is not None and last is not None and last - first < finished

    def step(self, start_ns: int, end_ns: int, summary: StepSummary) -> StepObservation:
        """The server's and the GPUs' account of the step that ran from ``start_ns`` to ``end_ns`` (its window
        closed by `close_window`)."""
        server_block = None
        findings: list[str] = []
        if self.sampler.server is not None:
            snapshots, gaps = self.sampler.server_window(start_ns, end_ns)
            if len(snapshots) >= 2:
                server_block = self._server(snapshots, gaps)
                findings += crosscheck(summary, server_block)
        gpu_blocks = None
        if self.sampler.gpus is not None:
            per_gpu, gaps = self.sampler.gpu_window(start_ns, end_ns)
            gpu_blocks = []
            for samples in per_gpu.values():
                block, said = self._gpu(samples, gaps, summary.output_tokens_total, start_ns, end_ns)
                if block is not None:
                    gpu_blocks.append(block)
                findings += said
        return StepObservation(server_block, gpu_blocks, findings)

    def stop(self) -> None:
        self.sampler.stop()
