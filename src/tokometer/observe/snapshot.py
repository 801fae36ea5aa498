"""The shared shapes of server and GPU observations: one scrape, one GPU reading.

Normalised names (the vocabulary every engine's metrics are mapped into, `observe.vocabulary`):

- gauges: ``requests_running``, ``requests_waiting``, ``kv_cache_usage`` (0..1);
- counters (monotonic totals): ``prompt_tokens``, ``generation_tokens``, ``preemptions``,
  ``prefix_cache_queries``, ``prefix_cache_hits``, ``requests_finished``; speculative decoding's
  ``spec_drafts``, ``spec_draft_tokens``, ``spec_accepted_tokens`` and ``spec_accepted_at_<position>``
  (`observe.speculative`);
- histograms (seconds): ``ttft``, ``tpot`` (time per output token / inter-token latency),
  ``queue``, ``e2e``.

Where an engine exports a name per label set (per model, per engine index), the values are summed
(gauges and counters) or merged bucket by bucket (histograms).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["COUNTERS", "GAUGES", "HISTOGRAMS", "GpuSample", "Histogram", "Snapshot"]

GAUGES = ("requests_running", "requests_waiting", "kv_cache_usage")
COUNTERS = ("prompt_tokens", "generation_tokens", "preemptions", "prefix_cache_queries", "prefix_cache_hits",
            "requests_finished", "spec_drafts", "spec_draft_tokens", "spec_accepted_tokens")
HISTOGRAMS = ("ttft", "tpot", "queue", "e2e")


@dataclass(frozen=True, slots=True)
class Histogram:
    """A Prometheus histogram at one moment: cumulative counts per upper bound (``+Inf`` last)."""

    buckets: tuple[tuple[float, float], ...]
    """``(le, cumulative count)``, ascending ``le``, the last ``le`` being ``inf``."""
    count: float
    sum: float


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One scrape of a server's ``/metrics``, in tokometer's vocabulary, with every raw sample kept."""

    at_ns: int
    """``perf_counter_ns()`` when the answer had arrived (the clock the client stamps with)."""
    source: str
    """The metric family recognised: ``vllm``, ``vllm-v0``, ``sglang``, ``llamacpp``, ``tgi``,
    ``tokometer-gateway``, ``tokometer-sim``, or ``unknown`` (then only ``raw`` is filled)."""
    gauges: dict[str, float] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    histograms: dict[str, Histogram] = field(default_factory=dict)
    raw: dict[str, float] = field(default_factory=dict)
    """Every sample as ``name{label="value",...}`` -> value."""
    at_request_end: tuple[str, ...] = ()
    """Counters this server adds to only when a request ends (`observe.vocabulary.Family.at_request_end`)."""


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One reading of one GPU. ``None``: the source does not report it."""

    at_ns: int
    index: int
    name: str = ""
    utilization: float | None = None
    """0..1 of the time a kernel ran (NVML ``utilization.gpu``, DCGM ``DCGM_FI_DEV_GPU_UTIL``)."""
    memory_used_bytes: float | None = None
    memory_total_bytes: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    sm_clock_mhz: float | None = None
    memory_clock_mhz: float | None = None
    temperature_c: float | None = None
    throttle: tuple[str, ...] = ()
    """Active clock-throttle reasons in words (``power cap``, ``thermal``, ...)."""
    pcie_generation: int | None = None
    pcie_width: int | None = None
    pcie_rx_bytes_s: float | None = None
    pcie_tx_bytes_s: float | None = None
    energy_j: float | None = None
    """The energy counter since the driver loaded (joules): deltas over a step give its energy."""
    source: str = ""
    """``nvml`` or ``dcgm``."""
