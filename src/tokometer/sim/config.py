"""`SimConfig`: how the simulated server behaves (timing, lengths, faults)."""

from __future__ import annotations

from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tokometer.inbound.request_limits import DEFAULT_LIMITS

__all__ = ["FAULTS", "METRICS_NAMES", "Fault", "MetricsNames", "SimConfig", "parse_fault_rates"]

Fault = Literal[
    "none",
    "http_400",
    "http_401",
    "http_403",
    "http_400_context_length",
    "http_429",
    "http_500",
    "http_503",
    "reset",
    "malformed",
    "error_event",
    "stall",
    "slow_first_byte",
]

FAULTS: Final[tuple[str, ...]] = Fault.__args__  # type: ignore[attr-defined]

MetricsNames = Literal["vllm", "vllm-v0", "sglang", "llamacpp", "tgi"]
"""Whose Prometheus names ``/metrics`` speaks (`tokometer.sim.prometheus`)."""

METRICS_NAMES: Final[tuple[str, ...]] = MetricsNames.__args__  # type: ignore[attr-defined]


_DAY_S = 86_400.0
_DAY_MS = _DAY_S * 1000
_TOKENS = 2**31 - 1
"""Upper bounds of the settings (a start-up option or ``PATCH /sim/config``): a day of any wait, 2^31 - 1 tokens;
with no infinity nor NaN anywhere, a setting can never overflow a timer or a count."""


class SimConfig(BaseModel):
    """Scripted timing of the simulator: every request follows the same script.

    Event ``k`` (0-based) of a request is due at ``received + ttft + k * itl *
    tokens_per_event``; each event carries ``tokens_per_event`` tokens (the last
    may carry fewer). Timing is absolute, so a late event never delays the next.
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    model: str = "sim-model"
    ttft_ms: float = Field(100.0, ge=0, le=_DAY_MS)
    itl_ms: float = Field(5.0, ge=0, le=_DAY_MS)
    tokens_per_event: int = Field(1, ge=1, le=_TOKENS)
    output_tokens: int | None = Field(None, ge=0, le=_TOKENS,
                                       description="natural answer length (EOS); None: until max_tokens")
    default_max_tokens: int = Field(128, ge=1, le=_TOKENS)
    empty_first_event: bool = False
    max_context: int = Field(32768, ge=1, le=_TOKENS)
    api_key: str | None = None
    max_body_bytes: int = Field(DEFAULT_LIMITS.max_body_bytes, ge=1024, le=1 << 30,
                                description="larger request bodies get 413 "
                                "(the gateway's limit; tokometer.inbound)")
    body_timeout_s: float = Field(DEFAULT_LIMITS.body_timeout_s, gt=0, le=_DAY_S,
                                  description="a request body must arrive "
                                  "whole within this of its head, else 408 (the gateway's limit)")
    body_idle_timeout_s: float = Field(DEFAULT_LIMITS.body_idle_timeout_s, gt=0, le=_DAY_S,
                                       description="nor pause longer "
                                       "than this between two reads, else 408 (the gateway's limit)")
    reject_stream_options: bool = False
    faults: dict[str, float] = Field(default_factory=dict, description="fault name -> probability per request")
    fault_schedule: list[str] = Field(default_factory=list, description="fault per request, cycled in order")
    fault_after_tokens: int = Field(3, ge=0, le=_TOKENS, description="mid-stream faults strike after this many tokens")
    stall_s: float = Field(3600.0, ge=0, le=_DAY_S)
    slow_first_byte_ms: float = Field(2000.0, ge=0, le=_DAY_MS)
    seed: int = 0
    precise: bool = False
    trace_size: int = Field(100_000, ge=0, le=10_000_000)
    trace_bodies: bool = False
    max_output_tokens: int | None = Field(None, ge=1, le=_TOKENS,
                                          description="the server's own cap on one answer's length")
    metrics_names: MetricsNames = Field("vllm", description="whose metric names /metrics speaks (read at start)")
    metrics_buckets: tuple[float, ...] | None = Field(
        None, description="upper bounds (seconds, ascending) of every latency histogram's buckets instead of the "
        "simulator's own, e.g. (0.3, 1.0) to put every fast request in a first bucket too wide to locate it")
    reasoning_tokens: int = Field(0, ge=0, description="reasoning mode: the first N tokens of every answer are "
                                  "reasoning (tokometer.sim.reasoning)")
    reasoning_format: Literal["reasoning_content", "reasoning", "think"] = Field(
        "reasoning_content", description="how reasoning is sent: in the chat delta's reasoning_content or reasoning "
        "field, or inline between <think> tags")

    # Misbehaviours a real deployment shows (what ``tokometer doctor`` looks for).
    buffer_stream: bool = Field(False, description="hold every event and send them all when the answer ends, as a "
                                "buffering proxy does")
    truncate_context: bool = Field(False, description="cut a prompt that does not fit max_context silently (usage "
                                   "reports the cut count) instead of answering 400")
    load_slowdown: float = Field(0.0, ge=0, description="scripted timing: TTFT and ITL grow by this factor for each "
                                 "other request in flight (1 + F x (in flight - 1))")
    prefix_cache_speedup: float = Field(1.0, ge=1, description="scripted timing: a request body seen before gets its "
                                        "first token this many times sooner (a prefix cache)")

    # The performance model: with ``hardware`` set, `model` names a model `tokometer.perf` knows
    # and requests are served by a continuous-batching engine whose steps take as long as the
    # roofline at typical efficiencies says (see `tokometer.sim.engine`).
    hardware: str | None = None
    dtype: str = "bf16"
    kv_dtype: str = "bf16"
    tp: int = Field(1, ge=1)
    max_num_seqs: int = Field(256, ge=1)
    max_batched_tokens: int = Field(8192, ge=1)
    prefix_caching: bool = Field(True, description="modelled engine: vLLM's automatic prefix caching "
                                 "(tokometer.sim.prefixcache)")
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1)
    time_scale: float = Field(1.0, gt=0, description="stretch every modelled time by this factor")
    jitter: float = Field(0.0, ge=0, le=1, description="relative standard deviation of step times")

    @property
    def modelled(self) -> bool:
        return self.hardware is not None

    @field_validator("metrics_buckets")
    @classmethod
    def _check_buckets(cls, value: tuple[float, ...] | None) -> tuple[float, ...] | None:
        if value is not None and (not value or any(not 0 < b < float("inf") for b in value)
                                  or list(value) != sorted(set(value))):
            raise ValueError("bucket bounds must be positive, finite seconds in ascending order, e.g. 0.3,1,10")
        return value

    @field_validator("faults")
    @classmethod
    def _known_rates(cls, value: dict[str, float]) -> dict[str, float]:
        for name, rate in value.items():
            _check_fault(name)
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"fault {name!r}: rate {rate} is not between 0 and 1")
        if sum(value.values()) > 1.0 + 1e-9:
            raise ValueError("fault rates add up to more than 1")
        return value

    @field_validator("fault_schedule")
    @classmethod
    def _known_schedule(cls, value: list[str]) -> list[str]:
        for name in value:
            _check_fault(name)
        return value


def _check_fault(name: str) -> None:
    if name not in FAULTS:
        raise ValueError(f"unknown fault {name!r}; known: {', '.join(FAULTS)}")


def parse_fault_rates(items: list[str]) -> dict[str, float]:
    """``["http_500=0.1", "reset=0.05"]`` -> ``{"http_500": 0.1, "reset": 0.05}``."""
    rates: dict[str, float] = {}
    for item in items:
        name, sep, rate = item.partition("=")
        if not sep:
            raise ValueError(f"fault {item!r}: write NAME=RATE, e.g. http_500=0.1")
        try:
            rates[name.strip()] = float(rate)
        except ValueError:
            raise ValueError(f"fault {item!r}: {rate!r} is not a number") from None
    return rates
