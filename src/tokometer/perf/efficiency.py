"""How close a measured run came to the roofline, step by step, and what most likely held it back.

For each step of a saved run (measured requests that completed, warm-up left out):

    decode batch   time-weighted mean number of requests between their first and last token, over
                   the time at least one was there (sequential requests: exactly 1)
    context        mean input tokens + mean output tokens / 2 (each cache mid-answer)
    bytes per step W_read(batch) / TP + the matmuls' activations (`roofline.matmul_bytes`) + KV per token ×
                   batch × context
    MBU (decode)   bytes per step / TPOT p50 / peak bandwidth
    decode MFU     decode FLOPs(batch, batch × context) / TPOT p50 / peak FLOP/s
    MFU (prefill)  prefill FLOPs(n) × prompts prefilled at once / prefill time / peak FLOP/s, with the
                   medians of n = the server's prompt token count (else the input tokens) and of the
                   prefill time = the server's prompt time where it reports one for every request, else
                   TTFT; "at once" = the time-weighted overlap of the requests' prefill intervals
    wait           TTFT − the server's prompt time (queueing for a slot + network), median

The likely bottleneck, first rule that holds:

    1. client      the step's client self-check says it could not keep up
    2. network     the server's own decode time per token is < 80 % of the client-seen TPOT
    3. queueing    TTFT p50 > 2 × prefill time (the server's; without it, the roofline's expected
                   prefill) and TTFT is ≥ 1/3 of E2E: requests waited for a slot or behind other
                   prompts (scheduling)
    4. bandwidth   MBU ≥ 50 %
    5. compute     decode MFU ≥ 50 %, or prefill MFU ≥ 40 % and TTFT ≥ 1/3 of E2E
    6. engine      neither is near its peak: kernels, threading or per-step overhead (scheduling)

An efficiency above 100 % is not an efficiency: the peak it was judged against is wrong (too low for what
the run did: a host's measured matmul that the engine's kernels beat, a theoretical clock below the turbo
one, a datasheet row that is not this device) or the run did less work than counted (prefix-cache hits
skip prefill). Such a figure is left out (None, null in JSON) and kept in ``over_peak`` with a message that
names the peak used and how to give a better one; the rule above still reads it as "at least 100 %".
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tokometer.metrics.request import e2e_ns, tpot_ns, ttft_ns
from tokometer.perf.host import TORCH_PYTHON_ENV
from tokometer.perf.roofline import Deployment, Efficiency, decode_flops, matmul_bytes, prefill_flops, prefill_s
from tokometer.records import RequestRecord

if TYPE_CHECKING:  # not imported at run time: rendering an estimate needs neither the store nor the load generator
    from tokometer.load.profiles import LoadStep
    from tokometer.load.selfcheck import ClientHealth
    from tokometer.perf.measuredloop import LoopBeside
    from tokometer.store.runs import StoredRun

__all__ = ["BOTTLENECK_RULE", "OverPeak", "RunEfficiency", "StepEfficiency", "decode_batch", "measured_batch",
           "over_peak_message", "run_efficiency"]

BOTTLENECK_RULE = ("first that holds: client saturated → client; server decode time/token < 80% of client TPOT → "
                   "network; TTFT > 2 × prefill and ≥ 1/3 of E2E → queueing/scheduling; MBU ≥ 50% → bandwidth; "
                   "decode MFU ≥ 50% or (prefill MFU ≥ 40% and TTFT ≥ 1/3 of E2E) → compute; else engine overhead")


_NAMES = {"mbu": "MBU", "decode_mfu": "decode MFU", "prefill_mfu": "prefill MFU"}


@dataclass(frozen=True)
class OverPeak:
    """A utilisation above 100 %: the ratio measured and the message saying the peak it was judged against is wrong."""

    ratio: float
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"ratio": self.ratio, "message": self.message}


def over_peak_message(name: str, ratio: float, d: Deployment) -> str:
    """``prefill MFU 118 % — above 100 %: the host peak used (bf16, theoretical …) is too low for this run; …``."""
    hw = d.hardware
    if name == "mbu":
        used = f"bandwidth, {'measured' if hw.name == 'host' else 'datasheet'} {hw.bandwidth_gbs:,.4g} GB/s"
        extra = "or the engine read fewer bytes per step than counted"
    else:
        peak = d.compute_peak
        used = peak.label() if peak else "none"
        extra = ("or the engine did less work than counted (prefix-cache hits skip prefill)" if name == "prefill_mfu"
                 else "or the engine did less work than counted")
    if hw.name == "host":
        fix = (f"measure it (--remeasure; bf16/fp16 with torch: {TORCH_PYTHON_ENV}=<a Python with torch>) or pass "
               "--hardware with a TOML row (--hardware-file)")
    else:
        fix = "pass --hardware with the device this ran on, or a TOML row with its figures (--hardware-file)"
    return (f"{_NAMES.get(name, name)} {ratio:,.0%} — above 100 %: the {hw.name} peak used ({used}) is too low for "
            f"this run, {extra}; {fix}")


@dataclass(frozen=True)
class StepEfficiency:
    """One step's utilisation figures and verdict."""

    step: int
    load: str
    requests: int
    decode_batch: float
    context_tokens: float
    tpot_s: float | None
    bytes_per_step: float
    mbu: float | None
    decode_mfu: float | None
    prefill_tokens: float | None
    prefill_s: float | None
    prefill_source: str
    prefill_concurrency: float
    prefill_mfu: float | None
    ttft_s: float | None
    wait_s: float | None
    e2e_s: float | None
    server_tpot_s: float | None
    bottleneck: str
    why: str
    over_peak: dict[str, OverPeak] = field(default_factory=dict)
    """MBU / MFU figures above 100 % (left out of the fields above), by field name."""

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "over_peak": {k: v.to_json() for k, v in self.over_peak.items()}}


@dataclass(frozen=True)
class RunEfficiency:
    """Every step's `StepEfficiency` for one saved run, with the deployment judged against and the rule used."""

    run_id: int
    deployment: Deployment
    steps: list[StepEfficiency]
    rule: str = BOTTLENECK_RULE
    closed_loop: tuple[LoopBeside, ...] = ()
    """Each step beside the closed-loop estimate of its concurrency and lengths (`tokometer.perf.measuredloop`)."""

    def to_json(self) -> dict[str, Any]:
        d = self.deployment
        return {"run_id": self.run_id, "model": d.model.name, "hardware": d.hardware.name,
                "hardware_source": d.hardware.source, "weight_dtype": d.weight_dtype, "kv_dtype": d.kv_dtype,
                "weight_bytes": d.weight_bytes, "bandwidth_gbs": d.hardware.bandwidth_gbs,
                "peak_flops": d.compute_flops, "compute_dtype": d.compute_dtype,
                "peak": d.compute_peak.to_json() if d.compute_peak else None, "rule": self.rule,
                "steps": [s.to_json() for s in self.steps],
                "closed_loop": [c.to_json() for c in self.closed_loop]}


def _overlap(intervals: list[tuple[float, float]]) -> float:
    """Time-weighted mean number of open intervals, over the time at least one is open. Empty or reversed
    intervals (a one-token answer; stamps out of order) are not open at all."""
    intervals = [(start, end) for start, end in intervals if end > start]
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    busy = weighted = 0.0
    level, previous = 0, None
    for stamp, change in events:
        if previous is not None and level > 0:
            busy += stamp - previous
            weighted += (stamp - previous) * level
        level += change
        previous = stamp
    return weighted / busy if busy else 1.0


def decode_batch(records: list[RequestRecord]) -> float:
    """Mean number of requests in decode (first..last token) over the time at least one was."""
    return _overlap([(float(r.first_token_ns), float(r.last_token_ns)) for r in records])


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _prefill(records: list[RequestRecord]) -> tuple[float | None, float | None, float, bool]:
    """(median prompt tokens, median prefill seconds, prompts prefilled at once, from the server's timings)."""
    times, tokens, spans = [], [], []
    for r in records:
        s = r.server
        if s is not None and s.prompt_ms:
            times.append(s.prompt_ms / 1e3)
            tokens.append(float(s.prompt_tokens or r.input_tokens or 0))
            spans.append((r.first_token_ns - s.prompt_ms * 1e6, float(r.first_token_ns)))
    if len(times) == len(records):
        return _median(tokens), _median(times), _overlap(spans), True
    times = [(r.first_token_ns - r.sent_ns) / 1e9 for r in records]
    spans = [(float(r.sent_ns), float(r.first_token_ns)) for r in records]
    return _median([float(r.input_tokens or 0) for r in records]), _median(times), _overlap(spans), False


def measured_batch(server: Mapping[str, Any] | None) -> float | None:
    """The server's own mean of requests running during the step (its /metrics), when it was scraped."""
    running = ((server or {}).get("gauges") or {}).get("requests_running") or {}
    mean = running.get("mean")
    return float(mean) if isinstance(mean, (int, float)) and mean > 0 else None


def _step(d: Deployment, index: int, load: str, records: list[RequestRecord], health: ClientHealth | None,
          eff: Efficiency, server: Mapping[str, Any] | None = None) -> StepEfficiency:
    m = d.model
    # Measured by the server beats inferred; its gauge is averaged over the whole step, idle gaps between
    # requests too, while a decode batch is counted over the time one runs: never below 1.
    batch = max(1.0, measured_batch(server) or decode_batch(records))
    context = (statistics.fmean(float(r.input_tokens or 0) for r in records)
               + statistics.fmean(float(r.output_tokens or 0) for r in records) / 2)
    tpot = _median([t / 1e9 for r in records if (t := tpot_ns(r)) is not None])
    read = matmul_bytes(d, batch) + d.kv_read_bytes(batch, batch * context)
    flops = d.compute_flops
    mbu = read / tpot / d.hardware.bandwidth if tpot else None
    decode_mfu = decode_flops(m, batch, batch * context) / tpot / (d.tp * flops) if tpot and flops else None
    n, prefill_time, together, from_server = _prefill(records)
    prefill_mfu = None
    if n and prefill_time and flops:
        prefill_mfu = prefill_flops(m, n) * together / prefill_time / (d.tp * flops)
    ttft = _median([t / 1e9 for r in records if (t := ttft_ns(r)) is not None])
    e2e = _median([t / 1e9 for r in records if (t := e2e_ns(r)) is not None])
    waits = [t / 1e9 - r.server.prompt_ms / 1e3 for r in records
             if r.server and r.server.prompt_ms and (t := ttft_ns(r)) is not None]
    server_tpot = _median([r.server.decode_ms / 1e3 / r.server.decode_tokens for r in records
                           if r.server and r.server.decode_ms and r.server.decode_tokens])
    reference = prefill_time if from_server else (prefill_s(d, int(n), 0, eff) if n else None)
    source = "server prompt time" if from_server else "TTFT (includes waiting and network)"
    verdict, why = _verdict(health, tpot, server_tpot, ttft, reference, from_server, e2e, mbu, decode_mfu,
                            prefill_mfu)
    raw = {"mbu": mbu, "decode_mfu": decode_mfu, "prefill_mfu": prefill_mfu}
    over = {k: OverPeak(v, over_peak_message(k, v, d)) for k, v in raw.items() if v is not None and v > 1}
    shown = {k: None if k in over else v for k, v in raw.items()}
    return StepEfficiency(index, load, len(records), batch, context, tpot, read, shown["mbu"], shown["decode_mfu"], n,
                          prefill_time, source, together, shown["prefill_mfu"], ttft, _median(waits), e2e, server_tpot,
                          verdict, why, over)


def _pct(x: float | None) -> str:
    if x is not None and x > 1:
        return f"above 100 % ({x:,.0%}: the peak used is too low)"
    return "n/a" if x is None else f"{x:.0%}"


def _of(x: float, what: str) -> str:
    """``at 54% of peak FLOP/s``, or, above 100 %, that the peak is wrong."""
    return f"above the {what} used ({x:,.0%}: that peak is too low)" if x > 1 else f"at {x:.0%} of {what}"


def _verdict(health: ClientHealth | None, tpot: float | None, server_tpot: float | None, ttft: float | None,
             prefill: float | None, from_server: bool, e2e: float | None, mbu: float | None, decode_mfu: float | None,
             prefill_mfu: float | None) -> tuple[str, str]:
    if health is not None and health.saturated:
        return "client", f"the load generator could not keep up: {health.verdict}"
    if tpot and server_tpot and server_tpot < 0.8 * tpot:
        return "network", (f"the engine spent {server_tpot * 1e3:.2f} ms per token but tokens arrived every "
                           f"{tpot * 1e3:.2f} ms: delay between engine and client")
    ttft_share = ttft / e2e if ttft and e2e else 0.0
    if ttft and prefill and ttft > 2 * prefill and ttft_share >= 1 / 3:
        what = "the server's prefill time" if from_server else "the expected prefill"
        return "queueing", (f"TTFT {ttft * 1e3:.0f} ms is {ttft / prefill:.1f}× {what} "
                            f"({prefill * 1e3:.0f} ms) and {ttft_share:.0%} of E2E: requests waited for a slot or "
                            "behind other prompts")
    if mbu is not None and mbu >= 0.5:
        return "bandwidth", f"decode moves weights and KV {_of(mbu, 'peak bandwidth')} (MBU)"
    if decode_mfu is not None and decode_mfu >= 0.5:
        return "compute", f"decode runs {_of(decode_mfu, 'peak FLOP/s')}"
    if prefill_mfu is not None and prefill_mfu >= 0.4 and ttft_share >= 1 / 3:
        return "compute", f"prefill runs {_of(prefill_mfu, 'peak FLOP/s')} and TTFT is {ttft_share:.0%} of E2E"
    shares = {"bandwidth": mbu, "compute": decode_mfu}
    near = max((k for k, v in shares.items() if v is not None), key=lambda k: shares[k] or 0.0, default=None)
    nearest = f"; decode is closest to its {near} limit" if near else ""
    return "engine overhead", (f"MBU {_pct(mbu)}, decode MFU {_pct(decode_mfu)}, prefill MFU {_pct(prefill_mfu)}: "
                               f"neither bandwidth nor compute is near its peak (kernels, threads, per-step overhead)"
                               f"{nearest}")


def _load_label(load: LoadStep | None) -> str:
    if load is None:
        return "-"
    return f"{load.rate}/s" if load.mode == "rate" else f"c={load.concurrency}"


def run_efficiency(run: StoredRun, records: list[RequestRecord], d: Deployment,
                   efficiency: Efficiency | None = None) -> RunEfficiency:
    """Utilisation and likely bottleneck of every step of a saved run (``ResultStore.run`` + its records)."""
    steps = []
    for step in run.steps:
        done = [r for r in records if r.step == step.index and not r.warmup and r.ok and r.first_token_ns]
        if not done:
            continue
        steps.append(_step(d, step.index, _load_label(step.load), done, step.health, efficiency or Efficiency(),
                           step.server))
    return RunEfficiency(run.id, d, steps)
