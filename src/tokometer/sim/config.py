"""`SimConfig`: how the simulated server behaves (timing, lengths, faults)."""

from __future__ import annotations

from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tokometer.inbound.request_limits import DEFAULT_LIMITS
from tokometer.sim.adapters import LoraConfig
from tokometer.util.limits import (
    MAX_BYTES,
    MAX_COUNT,
    MAX_FACTOR,
    MAX_GPUS,
    MAX_SECONDS,
    MAX_TOKENS,
    Concurrency,
    Delay,
    Factor,
    Millis,
    Seconds,
    Tokens,
)

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


MAX_BUCKETS: Final = 1000
"""Bucket bounds of ``metrics_buckets`` at most."""

MAX_SPEC_TOKENS: Final = 64
"""Drafted tokens per step at most (engines draft a handful: vLLM's EAGLE/MTP 1-8, n-gram up to ~10)."""


class SimConfig(BaseModel):
    """Scripted timing of the simulator: every request follows the same script.

    Event ``k`` (0-based) of a request is due at ``received + ttft + k * itl *
    tokens_per_event``; each event carries ``tokens_per_event`` tokens (the last
    may carry fewer). Timing is absolute, so a late event never delays the next.
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    model: str = "sim-model"
    lora: LoraConfig | None = Field(None, description="LoRA adapters served beside the model, their slots and "
                                    "switch cost (tokometer.sim.adapters); None: any model name is served")
    ttft_ms: Millis = 100.0
    itl_ms: Millis = 5.0
    tokens_per_event: Tokens = 1
    spec_tokens: int = Field(0, ge=0, le=MAX_SPEC_TOKENS, description="speculative decoding: tokens a draft proposes "
                             "per step (0: none); each event then carries one step's tokens "
                             "(tokometer.sim.speculative)")
    spec_acceptance: float = Field(0.7, ge=0, le=1, description="speculative decoding: chance each drafted token is "
                                   "accepted, the first rejection ending the step's run")
    spec_draft_cost: float = Field(0.0, ge=0, le=MAX_FACTOR,
                                   description="speculative decoding: a drafted token's "
                                   "cost, as a fraction of one step's time")
    spec_meta: bool = Field(False, description="speculative decoding: end each answer with its own counts in "
                            "SGLang's meta_info (tokometer.protocols.common.spec_meta)")
    output_tokens: int | None = Field(None, ge=0, le=MAX_TOKENS,
                                      description="natural answer length (EOS); None: until max_tokens")
    default_max_tokens: Tokens = 128
    empty_first_event: bool = False
    max_context: Tokens = 32768
    api_key: str | None = None
    max_body_bytes: int = Field(DEFAULT_LIMITS.max_body_bytes, ge=1024, le=MAX_BYTES,
                                description="larger request bodies get 413 "
                                "(the gateway's limit; tokometer.inbound)")
    body_timeout_s: Seconds = Field(DEFAULT_LIMITS.body_timeout_s, description="a request body must arrive "
                                  "whole within this of its head, else 408 (the gateway's limit)")
    body_idle_timeout_s: Seconds = Field(DEFAULT_LIMITS.body_idle_timeout_s, description="nor pause longer "
                                       "than this between two reads, else 408 (the gateway's limit)")
    reject_stream_options: bool = False
    faults: dict[str, float] = Field(default_factory=dict, description="fault name -> probability per request")
    fault_schedule: list[str] = Field(default_factory=list, description="fault per request, cycled in order")
    fault_after_tokens: int = Field(3, ge=0, le=MAX_TOKENS,
                                    description="mid-stream faults strike after this many tokens")
    stall_s: Delay = 3600.0
    slow_first_byte_ms: Millis = 2000.0
    retry_after_s: int | None = Field(None, ge=0, le=86_400, description="the Retry-After (seconds) its "
                                      "http_429 and http_503 faults send; None: no such header")
    seed: int = Field(0, ge=-(2**63), le=2**63 - 1)
    precise: bool = False
    trace_size: int = Field(100_000, ge=0, le=MAX_COUNT)
    trace_bodies: bool = False
    max_output_tokens: Tokens | None = Field(None, description="the server's own cap on one answer's length")
    metrics_names: MetricsNames = Field("vllm", description="whose metric names /metrics speaks (read at start)")
    metrics_buckets: tuple[float, ...] | None = Field(
        None, description="upper bounds (seconds, ascending) of every latency histogram's buckets instead of the "
        "simulator's own, e.g. (0.3, 1.0) to put every fast request in a first bucket too wide to locate it")
    reasoning_tokens: int = Field(0, ge=0, le=MAX_TOKENS,
                                  description="reasoning mode: the first N tokens of every answer are "
                                  "reasoning (tokometer.sim.reasoning)")
    reasoning_format: Literal["reasoning_content", "reasoning", "think"] = Field(
        "reasoning_content", description="how reasoning is sent: in the chat delta's reasoning_content or reasoning "
        "field, or inline between <think> tags")

    # Misbehaviours a real deployment shows (what ``tokometer doctor`` looks for).
    buffer_stream: bool = Field(False, description="hold every event and send them all when the answer ends, as a "
                                "buffering proxy does")
    truncate_context: bool = Field(False, description="cut a prompt that does not fit max_context silently (usage "
                                   "reports the cut count) instead of answering 400")
    load_slowdown: float = Field(0.0, ge=0, le=MAX_FACTOR,
                                 description="scripted timing: TTFT and ITL grow by this factor for each "
                                 "other request in flight (1 + F x (in flight - 1))")
    prefix_cache_speedup: float = Field(1.0, ge=1, le=MAX_FACTOR,
                                        description="scripted timing: a request body seen before gets its "
                                        "first token this many times sooner (a prefix cache)")

    # The performance model: with ``hardware`` set, `model` names a model `tokometer.perf` knows
    # and requests are served by a continuous-batching engine whose steps take as long as the
    # roofline at typical efficiencies says (see `tokometer.sim.engine`).
    hardware: str | None = None
    dtype: str = "bf16"
    kv_dtype: str | None = Field(None, description="the modelled KV-cache format; unset: the model's default for "
                                 "its weights (fp8 with fp8 or nvfp4 weights, or the one its checkpoint declares; "
                                 "else bf16)")
    tp: int = Field(1, ge=1, le=MAX_GPUS)
    max_num_seqs: Concurrency = 256
    max_batched_tokens: Tokens = 8192
    prefix_caching: bool = Field(True, description="modelled engine: vLLM's automatic prefix caching "
                                 "(tokometer.sim.prefixcache)")
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1)
    time_scale: Factor = Field(1.0, description="stretch every modelled time by this factor")
    jitter: float = Field(0.0, ge=0, le=1, description="relative standard deviation of step times")

    @property
    def modelled(self) -> bool:
        return self.hardware is not None

    @field_validator("metrics_buckets")
    @classmethod
    def _check_buckets(cls, value: tuple[float, ...] | None) -> tuple[float, ...] | None:
        if value is not None and (not value or len(value) > MAX_BUCKETS or any(not 0 < b <= MAX_SECONDS for b in value)
                                  or list(value) != sorted(set(value))):
            raise ValueError(f"bucket bounds must be positive seconds, at most {MAX_SECONDS:g} (a week), in ascending "
                             f"order, at most {MAX_BUCKETS} of them, e.g. 0.3,1,10")
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
