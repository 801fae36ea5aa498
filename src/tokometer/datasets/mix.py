"""Tenant mixes (``bench --mix FILE``): named tenants sharing one run, each with its own model or LoRA adapter,
share of the traffic (or rate), prompts, SLO and headers.

The file is TOML, a list of ``[[tenant]]`` tables (docs/reference/mix.md)::

    [[tenant]]
    name = "chat"
    share = 0.7
    input_tokens = 256
    slo_ttft_ms = 500

    [[tenant]]
    name = "summarise"
    share = 0.3
    model = "summary-lora"        # sent as the request's model: a LoRA adapter the server serves
    dataset = "long.jsonl"
    slo_e2e_ms = 8000
    headers = { "x-tenant" = "acme" }

`read_mix` reads it within `MAX_MIX_FILE_BYTES` (`tokometer.util.readlimit`) and checks it with pydantic
(`TenantMix`): unknown keys, duplicate names, more than `MAX_TENANTS` tenants, shares that do not add up to
1 (or 100, as percentages), shares mixed with rates are each one line naming the file and the tenant.

Each request goes to one tenant, drawn by the shares from a generator seeded by the run's seed, so one seed
gives one assignment (`MixSource`), also when ``--workers`` processes (or Ray actors) share a step: they get
the step's marked prompts as a list (`MixSource.prompt_list`) and request ``g`` is the list's ``g``-th.
A tenant given its own ``rate`` (every tenant then gives one) is the same
draw with shares in proportion to the rates while the step runs at their sum: for Poisson arrivals the
superposition of the tenants' own Poisson streams is exactly that.
"""

from __future__ import annotations

import itertools
import math
import random
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_serializer,
    field_validator,
    model_validator,
)

from tokometer.datasets.base import PromptSource
from tokometer.datasets.synthetic import SyntheticSource
from tokometer.datasets.trace import TraceSource
from tokometer.prompt import Prompt
from tokometer.util.errors import ConfigError
from tokometer.util.limits import MAX_RATE, Millis, Rate, Tokens
from tokometer.util.secrets import header_problem, redact_headers

__all__ = ["MAX_MIX_FILE_BYTES", "MAX_TENANTS", "MixSource", "Tenant", "TenantMix", "drawn_tenants", "mark_prompt",
           "parse_mix", "read_mix", "tenant_seed"]

MAX_TENANTS: Final = 64
"""Tenants one mix holds at most."""
MAX_MIX_FILE_BYTES: Final = 1 << 20
"""A mix file is a short list of tables: read at most this much of it."""
MAX_NAME_CHARS: Final = 64
MAX_MODEL_CHARS: Final = 256
MAX_TENANT_HEADERS: Final = 32
_RESERVED_HEADERS: Final = frozenset({"content-length", "content-type", "transfer-encoding", "host", "connection",
                                      "accept"})
"""Headers the client itself writes to frame the request: a tenant may not replace them."""
_SHARE_TOTALS: Final = ((1.0, 1e-3), (100.0, 0.1))
"""What shares may add up to, with the slack allowed: fractions (1) or percentages (100)."""


class Tenant(BaseModel):
    """One tenant of a mix: who it is, how much of the traffic it sends, what and to which model, and its SLO."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)

    name: str = Field(min_length=1, max_length=MAX_NAME_CHARS)
    share: float | None = Field(None, gt=0, le=sum(_SHARE_TOTALS[-1]))  # one tenant's 100 %, with the sum's slack
    """Its part of the traffic: fractions that add up to 1, or percentages that add up to 100."""
    rate: Rate | None = None
    """Its own requests a second, instead of a share (every tenant then gives one)."""
    model: str | None = Field(None, min_length=1, max_length=MAX_MODEL_CHARS)
    """Sent as the request's ``model``: a model or LoRA adapter name; None: the run's model."""
    input_tokens: Tokens | None = None
    """Synthetic prompts of this many tokens; None: the run's ``--input-tokens``."""
    output_tokens: Tokens | None = None
    """Answers of this many tokens (``max_tokens``, kept with ``--ignore-eos``); None: the run's."""
    dataset: Path | None = None
    dataset_kind: Literal["auto", "jsonl", "sharegpt"] = "auto"
    prompt: str | None = Field(None, min_length=1)
    turns: str | None = Field(None, max_length=64)
    """With ``--sessions``: its sessions' turns (``4``, ``2-6``, ``exp:4``); None: the run's ``--turns``."""
    think_time: str | None = Field(None, max_length=64)
    """With ``--sessions``: its users' think time (``2s``, ``1s-3s``, ``exp:2s``); None: the run's."""
    trace: Path | None = None
    """A request trace (Mooncake JSONL, `tokometer.datasets.trace`): its requests at their own times are this
    tenant's traffic, merged with the other tenants' (`tokometer.benchmark.mixtrace`); no share or rate."""
    slo_ttft_ms: Millis | None = Field(None, gt=0)
    slo_tpot_ms: Millis | None = Field(None, gt=0)
    slo_e2e_ms: Millis | None = Field(None, gt=0)
    headers: dict[str, str] = Field(default_factory=dict, max_length=MAX_TENANT_HEADERS, repr=False)
    """Sent with each of its requests, over the run's own (a tenant header, its own API key)."""

    @field_serializer("headers")
    def _redacted_headers(self, headers: dict[str, str]) -> dict[str, str]:
        return redact_headers(headers)

    @field_validator("turns", "think_time")
    @classmethod
    def _sampled(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None:
            from tokometer.datasets.sampled import Sampled

            name = info.field_name or ""
            try:
                Sampled.parse(value, name, whole=name == "turns")
            except ConfigError as exc:
                raise ValueError(str(exc).removeprefix(f"{name}: ")) from None
        return value

    @field_validator("name", "model")
    @classmethod
    def _one_line(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or not value.isprintable()):
            raise ValueError("give one line of printable text")
        return value

    @model_validator(mode="after")
    def _check(self) -> Tenant:
        if self.trace is not None and (self.share is not None or self.rate is not None):
            raise ValueError("a trace sends its requests at its own times: leave out share and rate")
        if self.trace is None and (self.share is None) == (self.rate is None):
            raise ValueError("give share (its part of the traffic) or rate (its own requests a second), one of them")
        if sum(x is not None for x in (self.dataset, self.prompt, self.input_tokens, self.trace)) > 1:
            raise ValueError("give one prompt source: input_tokens (synthetic), dataset, prompt or trace")
        for number, (name, value) in enumerate(self.headers.items(), 1):
            if problem := header_problem(name, value):
                raise ValueError(f"header {number}: {problem}")
            if name.lower() in _RESERVED_HEADERS:
                raise ValueError(f"header {number}: {name} is written by the client itself (it frames the request): "
                                 "leave it out")
        return self


class TenantMix(BaseModel):
    """The tenants of one run, in file order."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tenants: list[Tenant] = Field(min_length=1, max_length=MAX_TENANTS)

    @model_validator(mode="after")
    def _check(self) -> TenantMix:
        seen: set[str] = set()
        for tenant in self.tenants:
            if tenant.name in seen:
                raise ValueError(f"two tenants are named {tenant.name!r}: give each its own name")
            seen.add(tenant.name)
        if self.traced and (shared := next((t for t in self.tenants if t.share is not None), None)):
            raise ValueError(f"tenant {shared.name!r} gives a share, but a trace sets its tenant's traffic: a share "
                             f"of it means nothing; give {shared.name!r} a rate (its requests a second beside the "
                             "trace)")
        rated = sum(t.rate is not None for t in self.tenants)
        if rated not in (0, len(self.tenants)) and not self.traced:
            raise ValueError("some tenants give a share and some a rate: give every tenant a share, or every "
                             "tenant a rate")
        if rated and (total_rate := sum(t.rate or 0.0 for t in self.tenants)) > MAX_RATE:
            raise ValueError(f"the tenants' rates add up to {total_rate:g} requests a second, more than a run sends "
                             f"({MAX_RATE:g}): lower them")
        if not rated and not self.traced:
            total = sum(t.share or 0.0 for t in self.tenants)
            if not any(math.isclose(total, whole, abs_tol=slack) for whole, slack in _SHARE_TOTALS):
                raise ValueError(f"the shares add up to {total:g}: give fractions that add up to 1 (0.7, 0.3) or "
                                 "percentages that add up to 100 (70, 30)")
        return self

    def weights(self) -> list[float]:
        """Each tenant's part of the traffic, adding up to 1."""
        raw = [t.rate if t.rate is not None else (t.share or 0.0) for t in self.tenants]
        total = sum(raw)
        return [w / total if total else 0.0 for w in raw]

    @property
    def traced(self) -> bool:
        """Some tenant replays a trace: the step is the tenants' merged timeline, not a load of the run's."""
        return any(t.trace is not None for t in self.tenants)

    @property
    def total_rate(self) -> float | None:
        """The step's rate when every tenant gives its own: their sum; None for shares or a trace."""
        rates = [t.rate for t in self.tenants if t.rate is not None]
        return sum(rates) if rates and len(rates) == len(self.tenants) else None

    def names(self) -> list[str]:
        return [t.name for t in self.tenants]


def read_mix(path: Path) -> TenantMix:
    """The mix file at ``path``, checked; ConfigError (one line naming the file) for anything wrong with it."""
    from tokometer.util.readlimit import read_toml

    where = f"--mix {path}"
    data = read_toml(path, MAX_MIX_FILE_BYTES, "a mix file is a short list of [[tenant]] tables", where)
    extra = sorted(set(data) - {"tenant"})
    if extra:
        raise ConfigError(f"{where}: unknown key {extra[0]!r} at the top level: write each tenant as a [[tenant]] "
                          "table")
    tables = data.get("tenant")
    if not isinstance(tables, list) or not tables:
        raise ConfigError(f"{where}: no [[tenant]] tables: write e.g. [[tenant]] name = \"chat\" share = 1")
    if len(tables) > MAX_TENANTS:
        raise ConfigError(f"{where}: {len(tables):,} tenants; a mix holds at most {MAX_TENANTS}")
    mix = parse_mix({"tenants": tables}, where)
    return mix.model_copy(update={"tenants": [_beside(t, path.parent) for t in mix.tenants]})


def _beside(tenant: Tenant, folder: Path) -> Tenant:
    """``tenant`` with a relative ``dataset`` or ``trace`` taken from the mix file's folder, as the file's reader
    expects (``trace = "example"`` names the shipped trace)."""
    update = {key: folder / path for key, path in (("dataset", tenant.dataset), ("trace", tenant.trace))
              if path is not None and not path.is_absolute() and not (key == "trace" and str(path) == "example")}
    return tenant.model_copy(update=update) if update else tenant


def parse_mix(data: Any, where: str) -> TenantMix:
    """``data`` (``{"tenants": [...]}``) as a `TenantMix`; the first problem as one ConfigError line."""
    try:
        return TenantMix.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{where}: {_first_problem(exc, data)}") from None


def _first_problem(exc: ValidationError, data: Any) -> str:
    """Pydantic's first error in words: which tenant (number and name), which key, what is wrong."""
    error = exc.errors(include_url=False)[0]
    loc = list(error["loc"])
    message = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        message = "unknown key: the keys are " + ", ".join(Tenant.model_fields)
    if len(loc) >= 2 and loc[0] == "tenants" and isinstance(loc[1], int):
        number = loc[1]
        tables = data.get("tenants") if isinstance(data, dict) else None
        name = tables[number].get("name") if isinstance(tables, list) and isinstance(tables[number], dict) else None
        named = f" ({name!r})" if isinstance(name, str) and name.strip() and len(name) <= MAX_NAME_CHARS else ""
        key = f": {'.'.join(str(p) for p in loc[2:])}" if len(loc) > 2 else ""
        return f"tenant {number + 1}{named}{key}: {message}"
    return message


def tenant_seed(seed: int, number: int) -> int:
    """The prompt seed of the ``number``-th tenant (from 0) of a run seeded ``seed``: tenants never share
    prompts, so no tenant rides on another's prompt cache."""
    return (seed + 1_000_003 * (number + 1)) % 2**63


class MixSource:
    """Prompts for a mix: each request's tenant drawn by the weights (seeded), its prompt the next of that
    tenant's own source, marked with the tenant's name, model, headers and answer length."""

    def __init__(self, mix: TenantMix, sources: Sequence[PromptSource], seed: int,
                 order: Sequence[int] | None = None) -> None:
        self.mix, self.sources, self.seed = mix, list(sources), seed
        self.order = None if order is None else list(order)
        """A traced mix's tenant of each request in time order (`tokometer.benchmark.mixtrace`); None: drawn."""
        self.name = "mix(" + ", ".join(f"{t.name}: {s.name}" for t, s in zip(mix.tenants, sources, strict=True)) + ")"
        self.items: list[Prompt] = []
        self.planned = 0
        """Requests the run was prepared for (`prepare`): the most one step hands to other processes."""

    def assignment(self) -> Iterator[int]:
        """The tenant (by index) of each request in turn: the same sequence for the same seed (a traced mix's
        timeline once)."""
        if self.order is not None:
            yield from self.order
            return
        yield from drawn_tenants(self.mix, self.seed)

    def prepare(self, n: int, stop: threading.Event | None = None) -> None:
        """Make the synthetic tenants' prompts for ``n`` requests of the run now (each its share of them, and
        some more for the draw's spread), before any timing starts; more are made as they are needed."""
        total = n if self.order is None else len(self.order)
        self.planned = max(self.planned, total)
        for k, (source, weight) in enumerate(zip(self.sources, self.mix.weights(), strict=True)):
            if self.order is not None:
                weight = self.order.count(k) / max(1, len(self.order))
            if isinstance(source, TraceSource):
                source.prepare(len(source.entries), stop)
            elif isinstance(source, SyntheticSource):
                expected = total * weight
                source.prepare(math.ceil(expected + 4 * math.sqrt(expected) + 8), stop)

    def prompts(self) -> Iterator[Prompt]:
        streams = [s.prompts() for s in self.sources]
        marks: list[Callable[[Prompt], Prompt]] = [_marker(t) for t in self.mix.tenants]
        for k in self.assignment():
            yield marks[k](next(streams[k]))


    def prompt_list(self, offset: int, count: int) -> list[Prompt]:
        """Requests ``offset .. offset + count - 1`` of the run, each marked with its tenant, as a list for other
        processes: the step's request ``g`` is the list's ``g``-th, so load generators that deal the numbers
        out (`tokometer.load.share`) send each to the tenant one process would, by the same seeded draw."""
        return list(itertools.islice(self.prompts(), offset, offset + count))


def drawn_tenants(mix: TenantMix, seed: int) -> Iterator[int]:
    """The tenant (by index) of each request (or session) in turn, drawn by the mix's weights from a generator
    seeded by the run's ``seed``: the same sequence for the same seed."""
    rng = random.Random(f"mix:{seed}")
    population = range(len(mix.tenants))
    cumulative = _cumulative(mix.weights())
    while True:
        yield rng.choices(population, cum_weights=cumulative)[0]


def _cumulative(weights: Sequence[float]) -> list[float]:
    out, total = [], 0.0
    for w in weights:
        total += w
        out.append(total)
    return out


def _marker(tenant: Tenant) -> Callable[[Prompt], Prompt]:
    return lambda prompt: mark_prompt(tenant, prompt)


def mark_prompt(tenant: Tenant, prompt: Prompt) -> Prompt:
    """``prompt`` as ``tenant`` sends it: its name, model, headers and (when it sets one) answer length."""
    headers = tuple(tenant.headers.items())
    if tenant.output_tokens is not None:
        return replace(prompt, tenant=tenant.name, model=tenant.model, headers=headers,
                       max_tokens=tenant.output_tokens, exact_length=True)
    return replace(prompt, tenant=tenant.name, model=tenant.model, headers=headers)
