"""From `SimConfig` to an engine model: the modelled deployment's step times, from `tokometer.perf`.

A step's time is the roofline of what it does at `perf.Efficiency`'s typical
fractions of peak: a decode step of B sequences reading K cached tokens takes
``decode_step_s(B, K)``; a step that also prefills P prompt tokens is
`tokometer.perf.roofline.mixed_step_s` (the decode's weight read is the prefill's
too, the prompt tokens' FLOPs are added to the decode roofline): the same step
``estimate``'s closed loop and maximum load are made of.
"""

from __future__ import annotations

from tokometer.sim.config import SimConfig
from tokometer.sim.engine import Engine, EngineLimits, StepTime
from tokometer.sim.speculative import draft_for
from tokometer.util.errors import ConfigError

__all__ = ["deployment_for", "engine_for", "step_time_for"]


def deployment_for(config: SimConfig) -> object:
    """The `tokometer.perf.Deployment` a modelled simulator plays."""
    from tokometer.perf import Deployment, resolve_hardware, resolve_model

    assert config.hardware is not None
    model = resolve_model(config.model)
    return Deployment(model, resolve_hardware(config.hardware), weight_dtype=config.dtype,
                      kv_dtype=config.kv_dtype or model.default_kv(config.dtype), tp=config.tp)


def step_time_for(config: SimConfig) -> tuple[StepTime, int]:
    """The step-time function and the KV capacity (tokens) of the modelled deployment."""
    from tokometer.perf import Deployment, Efficiency
    from tokometer.perf.roofline import mixed_step_s

    d = deployment_for(config)
    assert isinstance(d, Deployment)
    # tokens as the engine counts them, each in every layer (a window layer's too: an upper bound on its cache)
    capacity = max(0, int(d.kv_budget_bytes(config.gpu_memory_utilization) // d.kv_bytes_per_sequence_per_gpu(1)))
    if capacity <= 0:
        raise ConfigError(f"{d.describe()}: the weights do not fit in the GPU memory; use --tp, a lower-bit "
                          "--dtype or larger hardware")
    efficiency = Efficiency()

    def step_time(decode_seqs: int, kv_tokens_read: int, prefill_tokens: int) -> float:
        return mixed_step_s(d, decode_seqs, kv_tokens_read, prefill_tokens, 0, efficiency)

    return step_time, capacity


def engine_for(config: SimConfig) -> Engine | None:
    """The continuous-batching engine for ``--hardware`` mode; ``None`` for scripted timing."""
    if not config.modelled:
        return None
    step_time, capacity = step_time_for(config)
    limits = EngineLimits(config.max_num_seqs, config.max_batched_tokens, capacity, config.prefix_caching)
    draft = draft_for(config.spec_tokens, config.spec_acceptance, config.spec_draft_cost, config.seed)
    return Engine(step_time, limits, time_scale=config.time_scale, jitter=config.jitter, seed=config.seed,
                  precise=config.precise, draft=draft, lora=config.lora)
