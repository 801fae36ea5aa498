"""A tenant mix (``bench --mix``, `tokometer.datasets.mix`) against the rest of a `BenchSpec`.

The mix brings each tenant's prompts (a tenant's trace too), so the run's own prompt options stay out; it runs
on this event loop, worker processes and Ray alike; a mix of tenants with their own rates sets the run's rate
(their sum), and a mix with traces its step's timeline (`tokometer.benchmark.mixtrace`), so no other load is
given. The run's volume is checked with the largest prompt and answer any tenant asks for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from tokometer.datasets.mix import TenantMix, parse_mix
from tokometer.util.errors import ConfigError
from tokometer.util.specproblem import FieldProblem

__all__ = ["check_mix", "mix_is_traced", "mix_load"]


class _Spec(Protocol):
    """What `check_mix` reads of a `tokometer.benchmark.spec.BenchSpec` (which calls it: no import back)."""

    @property
    def mix(self) -> TenantMix | None: ...
    @property
    def api(self) -> str: ...
    @property
    def dataset(self) -> Path | None: ...
    @property
    def prompt(self) -> str | None: ...
    @property
    def prefix_tokens(self) -> int: ...
    @property
    def images(self) -> int: ...
    @property
    def sessions(self) -> int | None: ...
    @property
    def trace(self) -> Path | None: ...
    @property
    def agents(self) -> str | None: ...
    @property
    def workers(self) -> int: ...
    @property
    def ray(self) -> str | None: ...
    @property
    def concurrency(self) -> list[int]: ...
    @property
    def rate(self) -> list[float]: ...
    @property
    def synchronous(self) -> bool: ...
    @property
    def find_max(self) -> str | None: ...
    @property
    def input_tokens(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...
    def model_copy(self, *, update: dict[str, Any]) -> Any: ...


def mix_is_traced(value: Any) -> bool:
    """Whether a spec's ``mix`` value (a `TenantMix` or its dict) has a tenant replaying a trace: its step is
    then the trace's timeline, which counts its own requests."""
    if isinstance(value, TenantMix):
        return value.traced
    tenants = value.get("tenants") if isinstance(value, dict) else None
    return isinstance(tenants, list) and any(isinstance(t, dict) and t.get("trace") is not None for t in tenants)


def mix_load(data: Any) -> Any:
    """The spec's values with the load a mix of rates sets: ``rate`` their sum, when no load was given."""
    if not isinstance(data, dict) or data.get("mix") is None:
        return data
    mix = data["mix"]
    if not isinstance(mix, TenantMix):
        try:
            mix = parse_mix(mix, "mix")
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
    total = mix.total_rate
    if total is None or any(data.get(k) for k in ("rate", "concurrency", "synchronous", "find_max")):
        return {**data, "mix": mix}
    return {**data, "mix": mix, "rate": [total]}


def _check_sessions(spec: _Spec, mix: TenantMix) -> None:
    """A mix of sessions: conversations from each tenant, none from a trace; a tenant's turns only with them."""
    if spec.sessions is None:
        if shaped := next((t for t in mix.tenants if t.turns is not None or t.think_time is not None), None):
            raise FieldProblem("tenant {name!r} of {mix} gives turns or think_time, which shape sessions: give "
                               "{sessions} N too (each session is then a tenant's)", name=shaped.name)
        return
    if mix.traced:
        raise FieldProblem("a trace in {mix} sends single requests at its own times, not sessions: leave out "
                           "{sessions}")
    if fixed := next((t for t in mix.tenants if t.prompt is not None), None):
        raise FieldProblem("with {sessions}, tenant {name!r} of {mix} needs conversations: give it input_tokens "
                           "(synthetic turns) or a ShareGPT dataset instead of prompt", name=fixed.name)


def check_mix(spec: _Spec) -> None:
    """What a mix leaves out, said as a `FieldProblem`; nothing without one."""
    mix = spec.mix
    if mix is None:
        return
    if spec.dataset is not None or spec.prompt is not None or spec.prefix_tokens or spec.images:
        raise FieldProblem("{mix} gives each tenant its own prompts (input_tokens, dataset or prompt in its "
                           "table): leave out {dataset}, {prompt}, {prefix_tokens} and {images}")
    if spec.agents is not None:
        raise FieldProblem("{mix} and {agents}: a tenant's source is prompts, conversations or a trace, not agent "
                           "sessions yet: give one of them")
    if spec.trace is not None:
        raise FieldProblem("{mix}: give each tenant its own trace (trace = FILE in its table): {trace} would "
                           "belong to no tenant")
    _check_sessions(spec, mix)
    if mix.traced and (spec.concurrency or spec.rate or spec.synchronous or spec.find_max is not None):
        raise FieldProblem("the traces of {mix} set the step's times (each tenant's trace, and its rate beside "
                           "them): leave out {rate}, {concurrency}, {synchronous} and {find_max}")
    from tokometer.protocols.registry import PROTOCOLS

    if not PROTOCOLS[spec.api].streams:
        raise FieldProblem("{mix} tenants send generation requests: give a chat or completions {api}")
    if mix.total_rate is not None and (spec.concurrency or spec.synchronous or spec.find_max is not None
                                       or spec.rate != [mix.total_rate]):
        raise FieldProblem("the tenants of {mix} give their own rates, which set the run's (their sum, {total:g}/s): "
                           "leave out {rate}, {concurrency}, {synchronous} and {find_max}, or give the tenants "
                           "shares instead", total=mix.total_rate)
    from tokometer.benchmark.volume import check_volume

    inputs = max((t.input_tokens or spec.input_tokens for t in mix.tenants), default=spec.input_tokens)
    outputs = max((t.output_tokens or spec.output_tokens for t in mix.tenants), default=spec.output_tokens)
    if (inputs, outputs) != (spec.input_tokens, spec.output_tokens):
        check_volume(spec.model_copy(update={"input_tokens": inputs, "output_tokens": outputs}))
