"""`BenchSpec`: everything that defines a benchmark run, validated.

The CLI builds one from its options; a library user builds one directly. It is
saved with every run, so a run can be repeated exactly, except for its secrets:
``api_key`` is never serialised and sensitive ``headers`` serialise as
``<redacted>`` (`tokometer.util.secrets`); the spec itself keeps them for sending.

Each default is stated once, on its field: ``tokometer bench`` reads its options' defaults from here, and a
profile (`apply_profile`: the embedded engine's lighter run) replaces some of them. The checks speak field
names (`tokometer.util.specproblem.FieldProblem`); the CLI says them as its flags.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer, model_validator

from tokometer.benchmark.agentic import check_agents
from tokometer.client.tls import TlsOptions
from tokometer.datasets.images import ImageFormat
from tokometer.datasets.mix import TenantMix
from tokometer.datasets.trace import BLOCK_TOKENS
from tokometer.load.profiles import Arrival
from tokometer.load.ramp import RampStrategy
from tokometer.protocols.common.framing import MAX_EVENT_BYTES
from tokometer.protocols.registry import PROTOCOLS
from tokometer.util.httpurl import http_url_problem
from tokometer.util.limits import (
    MAX_GPUS,
    MAX_LEVELS,
    MAX_RESPONSE_BYTES,
    MAX_SLICE_S,
    MAX_STEP_REQUESTS,
    MAX_TEMPERATURE,
    MAX_TOKENS,
    MIN_SLICE_S,
    Bytes,
    Concurrency,
    Count,
    Factor,
    Millis,
    Rate,
    Requests,
    Seconds,
    Tokens,
)
from tokometer.util.secrets import header_problem, redact_headers, value_problem
from tokometer.util.specproblem import FieldProblem

__all__ = ["BenchSpec", "apply_profile"]


class BenchSpec(BaseModel):
    """One benchmark run: target, load steps, prompts, limits, outputs."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    url: str
    api: str = "openai-chat"
    model: str = ""
    api_key: str | None = Field(None, exclude=True, repr=False)
    headers: dict[str, str] = Field(default_factory=dict, repr=False)
    ca_bundle: str | None = None
    """PEM file of CAs to trust for an https:// URL (besides the system's)."""
    tls_verify: bool = True
    """False: no certificate checks (``--insecure``; test servers only)."""
    check: bool = True
    """Send one 1-token request before the run (`tokometer.benchmark.preflight`); ``--no-check`` skips it."""
    server_metrics: str = "auto"
    """The server's Prometheus endpoint: ``auto`` (``/metrics`` at the URL's origin), ``off``, or a URL."""
    gpu_metrics: str = "auto"
    """GPU telemetry: ``auto`` (NVML when the server runs on this machine and NVML works), ``nvml``,
    ``off``, or a DCGM exporter's ``/metrics`` URL."""
    scrape_interval_s: float = Field(1.0, ge=0.05, le=60.0)
    gpus: int | None = Field(None, ge=1, le=MAX_GPUS)
    """How many GPUs serve the endpoint (``--gpus``): throughput per GPU and the Pareto front per GPU use it,
    before anything the engine's command line says (`tokometer.gpu_count.gpu_count`); None: not stated."""

    concurrency: list[Concurrency] = Field(default_factory=list, max_length=MAX_LEVELS)
    rate: list[Rate] = Field(default_factory=list, max_length=MAX_LEVELS)
    synchronous: bool = False
    arrival: Arrival = "poisson"
    burstiness: Factor = 1.0
    max_concurrency: Concurrency | None = None
    probe_rate: Rate | None = None
    """One-token probes a second beside every step's load, reported apart (`tokometer.load.probes`)."""

    ramp: RampStrategy | None = None
    """Ramp each step's load (its concurrency or rate) from ``ramp_from`` up to its own value over ``ramp_time_s``,
    then hold it (`tokometer.load.ramp`); None: the load is at its value from the start."""
    ramp_from: float | None = Field(None, ge=0, allow_inf_nan=False)
    """Where a ramp starts (concurrency slots, or requests a second)."""
    ramp_time_s: Seconds | None = None
    """How long a ramp takes to reach the step's value."""
    time_slice_s: float | None = Field(None, gt=0, allow_inf_nan=False)
    """Also summarise each step per slice of this many seconds (`tokometer.metrics.window`); None: not."""
    steady_tolerance: float = Field(0.1, gt=0, lt=1)
    """How close to its target the load must be for the step's steady state (`tokometer.metrics.window`)."""

    requests: Requests | None = 100
    duration_s: Seconds | None = None
    warmup: int = Field(0, ge=0, le=MAX_STEP_REQUESTS)

    input_tokens: Tokens = 256
    prefix_tokens: int = Field(0, ge=0, le=MAX_TOKENS)
    """Each synthetic prompt starts with one of ``prefix_groups`` shared prefixes of this many tokens (0: none)."""
    prefix_groups: Count = 1
    output_tokens: Tokens = 128
    batch_size: int = Field(1, ge=1, le=4096)
    """Inputs per request, for an API that takes a batch (``openai-embeddings``, ``rerank``)."""
    ignore_eos: bool = False
    temperature: float | None = Field(0.0, ge=0, le=MAX_TEMPERATURE, allow_inf_nan=False)
    seed: int | None = Field(None, ge=-(2**63), le=2**63 - 1)
    """Prompts, arrival times and the sampling seed sent to the server; None: a fresh one per run (recorded
    with the run, so ``--seed N`` repeats it), so that no run rides on an earlier run's prompt cache."""
    include_usage: bool = True
    dataset: Path | None = None
    dataset_kind: Literal["auto", "jsonl", "sharegpt"] = "auto"
    prompt: str | None = None
    mix: TenantMix | None = None
    """Named tenants sharing the run, each with its model (or LoRA adapter), share or rate, prompts, SLO and
    headers (``--mix FILE``, `tokometer.datasets.mix`); None: one tenant, the run's own options."""
    tokenizer: str = "auto"

    sessions: Requests | None = None
    """Multi-turn chat sessions per step (`tokometer.load.sessions`): the load counts sessions (concurrency: live
    sessions; rate: new sessions a second), and each turn sends the history with the model's real answers."""
    turns: str | None = None
    """Turns per session: ``4``, ``2-6`` (uniform) or ``exp:4`` (`tokometer.datasets.sampled`); None: 4, or a
    ShareGPT conversation's own turns."""
    think_time: str = "0"
    """The user's think time between an answer and the next turn: ``2s``, ``1s-3s``, ``exp:2s``."""
    trace: Path | None = None
    """A request trace to replay at its own timing (Mooncake JSONL, `tokometer.datasets.trace`; ``example``: the
    shipped example)."""
    time_scale: Factor = 1.0
    """Stretch the trace's timestamps by this factor (2: half as fast, 0.5: twice as fast)."""
    trace_block_tokens: Tokens = BLOCK_TOKENS
    """Tokens per ``hash_ids`` block of the trace (Mooncake: 512)."""
    agents: str | None = Field(None, max_length=4096)
    """Agent sessions (`tokometer.load.agentic`): an agent trace file, ``example``, or
    ``synthetic[:key=value,...]`` (`tokometer.datasets.agentic_workload`)."""

    images: int = Field(0, ge=0, le=16)
    """Synthetic images sent with every synthetic chat prompt (`tokometer.datasets.images`); 0: none."""
    image_size: str = "512x512"
    """Each image's WIDTHxHEIGHT in pixels (with ``images``)."""
    image_format: ImageFormat = "jpeg"
    tools: int = Field(0, ge=0, le=128)
    """Tool definitions sent with every chat request (`tokometer.datasets.tools`); 0: none."""
    tool_choice: str = "auto"
    """With ``tools``: ``auto``, ``required``, ``none``, or the name of one of the tools (that function)."""

    connect_timeout_s: Seconds = 10.0
    idle_timeout_s: Seconds = 60.0
    request_timeout_s: Seconds = 600.0
    max_event_bytes: Bytes = MAX_EVENT_BYTES
    """The largest streamed event accepted; past it the request is a ``protocol`` error."""
    max_response_bytes: int | None = Field(None, ge=65536, le=MAX_RESPONSE_BYTES)
    """The read budget of one answer, everything counted (head, framing, comments, events); None: sized from
    ``max_tokens`` (`tokometer.util.readbudget.response_budget`). Past it the request is a ``protocol`` error."""

    slo_ttft_ms: Millis | None = Field(None, gt=0)
    slo_tpot_ms: Millis | None = Field(None, gt=0)
    slo_e2e_ms: Millis | None = Field(None, gt=0)

    workers: int = Field(1, ge=1, le=64)
    ray: str | None = None
    """Run each step's load on Ray actors of the cluster at this address (``auto``: the one started on this
    machine, or RAY_ADDRESS; else the head's ``HOST:PORT``), `tokometer.load.cluster`; None: on this host."""
    ray_actors: int | None = Field(None, ge=1, le=1024)
    """How many Ray actors share each step (with ``ray``); None: one per cluster node that has a CPU."""
    label: str | None = None

    repeat: int = Field(1, ge=1, le=100)
    """Run the whole sweep this many times over; each step is saved as a trial (`tokometer.benchmark.plan`)."""
    find_max: Literal["rate", "concurrency"] | None = None
    """Search for the highest rate (or concurrency) that meets ``slo`` instead of sweeping
    (`tokometer.benchmark.findmax`)."""
    slo: str | None = None
    """The objectives of ``find_max``: ``ttft_p99=2s,tpot_p50=50ms,goodput_share=0.9``."""
    search: Literal["bisect", "ramp"] = "bisect"
    """How ``find_max`` searches: steady probes by doubling and bisection, or one ramp up to the ``rate`` or
    ``concurrency`` value read slice by slice, then steady probes to confirm (`tokometer.benchmark.findmax`)."""

    @field_serializer("headers")
    def _redacted_headers(self, headers: dict[str, str]) -> dict[str, str]:
        return redact_headers(headers)

    def with_seed(self) -> BenchSpec:
        """This spec with its seed fixed: a fresh random one when none was given."""
        if self.seed is not None:
            return self
        return self.model_copy(update={"seed": secrets.randbelow(2**31)})

    @property
    def seed_value(self) -> int:
        """The seed of a spec that went through `with_seed`."""
        if self.seed is None:
            raise ValueError("the spec's seed is not fixed yet: call with_seed() first")
        return self.seed

    @property
    def concurrency_ceiling(self) -> int | None:
        """The most requests a step of this spec can have in flight, where its count bounds them (``-n`` plus
        ``--warmup``, without ``--duration``: `tokometer.benchmark.findmax.concurrency_ceiling`); None where
        nothing does."""
        from tokometer.benchmark.findmax import concurrency_ceiling

        ceiling = concurrency_ceiling({"requests": self.requests, "warmup": self.warmup, "duration_s": self.duration_s})
        return None if ceiling is None else int(ceiling)

    def tls(self) -> TlsOptions:
        """How to check an https:// target's certificate."""
        return TlsOptions(verify=self.tls_verify, ca_bundle=self.ca_bundle)

    @model_validator(mode="before")
    @classmethod
    def _goodput_limits(cls, data: Any) -> Any:
        """A goodput objective with no ``slo_*_ms`` counts requests against the latency objectives' limits."""
        if not isinstance(data, dict) or not data.get("slo") or "goodput" not in str(data["slo"]):
            return data
        if any(data.get(k) is not None for k in ("slo_ttft_ms", "slo_tpot_ms", "slo_e2e_ms")):
            return data
        from tokometer.benchmark.findmax import parse_objectives, per_request_slo
        from tokometer.util.errors import ConfigError

        try:
            return {**data, **per_request_slo(parse_objectives(str(data["slo"])))}
        except ConfigError as exc:
            raise ValueError(str(exc)) from None

    @model_validator(mode="before")
    @classmethod
    def _mix_load(cls, data: Any) -> Any:
        """A mix whose tenants give their own rates runs at their sum (`tokometer.benchmark.mixspec`)."""
        from tokometer.benchmark.mixspec import mix_load

        return mix_load(data)

    @model_validator(mode="before")
    @classmethod
    def _workload_counts(cls, data: Any) -> Any:
        """Sessions count sessions, a trace replays all of itself and a duration ends a step by time: none takes
        the default request count."""
        if isinstance(data, dict) and "requests" not in data and not _counts_requests(data):
            return {**data, "requests": None}
        return data

    @model_validator(mode="after")
    def _check(self) -> BenchSpec:
        if self.api not in PROTOCOLS:
            raise ValueError(f"unknown API {self.api!r}: use one of {', '.join(sorted(PROTOCOLS))}")
        if self.concurrency and self.rate:
            raise FieldProblem("give {concurrency} or {rate}, not both")
        if self.synchronous and (self.concurrency or self.rate):
            raise FieldProblem("{synchronous} sends one request at a time: give it without {concurrency} and {rate} "
                               "(or leave it out; {concurrency} 1 is the same load)")
        if self.api_key is not None and (problem := value_problem(self.api_key)):
            raise FieldProblem("{api_key}: {problem}", problem=problem)
        for number, (name, value) in enumerate(self.headers.items(), 1):
            problem = header_problem(name, value)
            if problem:
                raise ValueError(f"header {number}: {problem}")
        if any(c < 1 for c in self.concurrency):
            raise FieldProblem("{concurrency} must be at least 1")
        if any(r <= 0 for r in self.rate):
            raise ValueError("rates must be positive")
        self._check_workload()
        from tokometer.benchmark.mixspec import check_mix

        check_mix(self)
        if not PROTOCOLS[self.api].streams and (self.sessions is not None or self.trace is not None):
            raise FieldProblem("{api} {name} sends batches of texts, not conversations or a trace: leave out "
                               "{sessions} and {trace}", name=self.api)
        if self.probe_rate is not None and not PROTOCOLS[self.api].streams:
            raise FieldProblem("{probe_rate} sends one-token generation requests: {api} {name} generates nothing",
                               name=self.api)
        if self.batch_size != 1 and PROTOCOLS[self.api].streams:
            raise FieldProblem("{batch_size} is the inputs of one embeddings or rerank request: give {api} "
                               "openai-embeddings or rerank (a generation request carries one prompt)")
        if self.requests is None and self.duration_s is None and self.sessions is None and self.trace is None \
                and self.agents is None and not (self.mix is not None and self.mix.traced):
            raise FieldProblem("give {requests} or {duration_s} (or both)")
        if self.dataset is not None and self.prompt is not None:
            raise FieldProblem("give {dataset} or {prompt}, not both")
        if self.prefix_tokens and (self.dataset is not None or self.prompt is not None):
            raise FieldProblem("{prefix_tokens} shapes synthetic prompts: leave out {dataset} and {prompt}")
        if self.prefix_tokens >= self.input_tokens:
            raise FieldProblem("{prefix_tokens} {prefix} must be less than {input_tokens} {length}: each prompt is "
                               "its shared prefix and then its own words", prefix=self.prefix_tokens,
                               length=self.input_tokens)
        self._check_search()
        self._check_media()
        self._check_ramp()
        self._check_slices()
        self._check_generators()
        if problem := http_url_problem(self.url):
            raise ValueError(f"URL {self.url!r} {problem}")
        from tokometer.benchmark.volume import check_volume

        check_volume(self)
        return self

    def _check_generators(self) -> None:
        """Worker processes or Ray actors, and a concurrency cap that leaves each of them a request."""
        if self.ray_actors is not None and self.ray is None:
            raise FieldProblem("{ray_actors} counts Ray actors: give {ray} (the cluster's address) too")
        if self.ray is not None and self.workers > 1:
            raise FieldProblem("give {workers} (processes on this host) or {ray} (actors on a cluster), not both")
        generators = max(self.workers, self.ray_actors or 1)
        if self.max_concurrency is not None and self.max_concurrency < generators:
            raise FieldProblem("{max_concurrency} {cap} is below the {generators} load generators (workers or Ray "
                               "actors), each of which needs at least one request in flight: raise it or use fewer "
                               "generators", cap=self.max_concurrency, generators=generators)

    def _check_media(self) -> None:
        """Images and tools go in OpenAI chat requests; images on synthetic prompts."""
        from tokometer.datasets.images import parse_image_size
        from tokometer.datasets.tools import tool_definitions
        from tokometer.util.errors import ConfigError

        if (self.images or self.tools) and not PROTOCOLS[self.api].takes_media:
            raise FieldProblem("{images} and {tools} go in OpenAI chat requests: use {api} openai-chat")
        if self.images:
            if self.dataset is not None or self.prompt is not None or self.trace is not None or self.sessions:
                raise FieldProblem("{images} go with synthetic prompts: leave out {dataset}, {prompt}, {trace} and "
                                   "{sessions}")
            try:
                parse_image_size(self.image_size)
            except ConfigError as exc:
                raise FieldProblem.naming("image_size", str(exc)) from None
        if self.tools and self.tool_choice not in ("auto", "required", "none") and self.tool_choice not in {
                t["function"]["name"] for t in tool_definitions(self.tools)}:
            raise FieldProblem("{tool_choice} {choice} is not auto, required, none or one of the {tools} tools' names "
                               "(get_weather, search_web, ...)", choice=self.tool_choice)

    def tool_params(self) -> dict[str, Any]:
        """The ``tools`` and ``tool_choice`` of `tokometer.protocols.common.base.GenerationParams` for this run."""
        from tokometer.datasets.tools import tool_definitions

        if not self.tools:
            return {}
        choice: str | dict[str, Any] = self.tool_choice if self.tool_choice in ("auto", "required", "none") else \
            {"type": "function", "function": {"name": self.tool_choice}}
        return {"tools": tool_definitions(self.tools), "tool_choice": choice}

    def _check_workload(self) -> None:
        """Sessions and traces against the rest."""
        from tokometer.datasets.sampled import Sampled
        from tokometer.util.errors import ConfigError

        if self.sessions is None and (self.turns is not None or self.think_time not in ("0", "")):
            raise FieldProblem("{turns} and {think_time} shape sessions: give {sessions} N too")
        if self.trace is None and (self.time_scale != 1.0 or self.trace_block_tokens != BLOCK_TOKENS):
            raise FieldProblem("{time_scale} and {trace_block_tokens} replay a trace: give {trace} FILE too")
        for field, text, whole in (("turns", self.turns, True), ("think_time", self.think_time or "0", False)):
            if text is None:
                continue
            try:
                parsed = Sampled.parse(text, field, whole=whole)
                if whole:
                    parsed.check_at_least(1, field)
            except ConfigError as exc:
                raise FieldProblem.naming(field, str(exc)) from None
        if self.sessions is not None:
            if self.trace is not None:
                raise FieldProblem("give {sessions} or {trace}, not both")
            if self.prompt is not None:
                raise FieldProblem("{sessions} makes conversations: leave out {prompt} (a ShareGPT {dataset} gives "
                                   "real ones)")
            if self.requests is not None:
                raise FieldProblem("{sessions} counts sessions per step: leave out {requests} ({duration_s} still "
                                   "applies)")
            if self.prefix_tokens or self.prefix_groups != 1:
                raise FieldProblem("{prefix_tokens} and {prefix_groups} shape single synthetic prompts, not sessions "
                                   "(each turn resends the history, which is the shared prefix there): leave them out "
                                   "with {sessions}")
        if self.agents is not None:
            check_agents(self)
        if self.trace is not None:
            if self.concurrency or self.rate or self.synchronous or self.find_max is not None:
                raise FieldProblem("{trace} replays the trace's own arrival times: leave out {concurrency}, {rate}, "
                                   "{synchronous} and {find_max} ({time_scale} speeds it up or slows it down)")
            if self.dataset is not None or self.prompt is not None or self.prefix_tokens:
                raise FieldProblem("{trace} makes its own prompts (the trace's lengths and shared blocks): leave out "
                                   "{dataset}, {prompt} and {prefix_tokens}")
            if self.warmup:
                raise FieldProblem("{trace} replays the trace's own requests: leave out {warmup}")

    def _check_ramp(self) -> None:
        if self.search == "ramp":
            if self.find_max is None:
                raise FieldProblem("{search} ramp is a way for {find_max} to search: give {find_max} too")
            if not (self.rate or self.concurrency) or self.ramp_from is None or self.ramp_time_s is None:
                raise FieldProblem("{search} ramp ramps from {ramp_from} to the {" + self.find_max + "} value over "
                                   "{ramp_time_s}: give all three, e.g. {ramp_from} 2 {" + self.find_max + "} 40 "
                                   "{ramp_time_s} 30s")
        if self.ramp is None and self.search != "ramp":
            if self.ramp_from is not None or self.ramp_time_s is not None:
                raise FieldProblem("{ramp_from} and {ramp_time_s} shape a ramp: give {ramp} linear|exponential too")
            return
        if self.ramp_from is None or self.ramp_time_s is None:
            raise FieldProblem("{ramp} needs where it starts and how long it takes: give {ramp_from} and "
                               "{ramp_time_s}, e.g. {ramp_from} 1 {ramp_time_s} 30s")
        levels: list[float] = [float(c) for c in self.concurrency] or list(self.rate)
        if not levels or (self.find_max is not None and self.search != "ramp"):
            raise FieldProblem("{ramp} ramps each step's {concurrency} or {rate} up to its value: give one of them "
                               "(not {synchronous} or {trace}; with {find_max}, give {search} ramp)")
        if self.sessions is not None or self.workers > 1 or self.ray is not None:
            raise FieldProblem("{ramp} runs on one event loop of single requests: leave out {sessions}, {workers} "
                               "and {ray}")
        from tokometer.load.ramp import MAX_RAMP_LOAD, MAX_RAMP_S, MIN_RAMP_LOAD, MIN_RAMP_S

        if self.ramp_from and not MIN_RAMP_LOAD <= self.ramp_from <= MAX_RAMP_LOAD:
            raise FieldProblem("{ramp_from} {value} is out of range: a ramp starts at 0 (linear) or from {low} to "
                               "{high}", value=f"{self.ramp_from:g}", low=f"{MIN_RAMP_LOAD:g}",
                               high=f"{MAX_RAMP_LOAD:g}")
        if not MIN_RAMP_S <= self.ramp_time_s <= MAX_RAMP_S:
            raise FieldProblem("{ramp_time_s} {value} s is out of range: a ramp takes from {low} to {high} s",
                               value=f"{self.ramp_time_s:g}", low=f"{MIN_RAMP_S:g}", high=f"{MAX_RAMP_S:g}")
        if any(not MIN_RAMP_LOAD <= level <= MAX_RAMP_LOAD for level in levels):
            raise FieldProblem("{ramp} rises to each step's load, which must be from {low} to {high} (the steps go "
                               "from {lowest} to {highest})", low=f"{MIN_RAMP_LOAD:g}", high=f"{MAX_RAMP_LOAD:g}",
                               lowest=f"{min(levels):g}", highest=f"{max(levels):g}")
        if self.ramp == "exponential" and self.ramp_from <= 0:
            raise FieldProblem("an exponential {ramp} grows by the same factor every second: {ramp_from} must be "
                               "above 0")
        if self.concurrency and self.ramp_from < 1:
            raise FieldProblem("a concurrency {ramp} starts with at least one slot: {ramp_from} must be at least 1")
        if any(self.ramp_from >= level for level in levels):
            raise FieldProblem("{ramp} rises: {ramp_from} {start} must be below every step's load (lowest {low})",
                               start=self.ramp_from, low=min(levels))

    def _check_slices(self) -> None:
        if self.time_slice_s is not None and not MIN_SLICE_S <= self.time_slice_s <= MAX_SLICE_S:
            raise FieldProblem("{time_slice_s} {value} s is out of range: a time slice is at least {low} s (1 ms) and "
                               "at most {high} s", value=f"{self.time_slice_s:g}", low=f"{MIN_SLICE_S:g}",
                               high=f"{MAX_SLICE_S:g}")

    def _check_search(self) -> None:
        if self.slo is not None and self.find_max is None:
            raise FieldProblem("{slo} sets the objectives of {find_max}: give {find_max} too (or use {slo_ttft_ms} "
                               "and friends for goodput)")
        if self.find_max is None:
            return
        if self.slo is None:
            raise FieldProblem("{find_max} needs objectives: give {slo}, e.g. {slo} ttft_p99=2s,tpot_p50=50ms")
        from tokometer.benchmark.findmax import parse_objectives
        from tokometer.util.errors import ConfigError

        try:
            parse_objectives(self.slo)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        if self.repeat > 1:
            raise FieldProblem("{repeat} and {find_max} do not go together: search once, then repeat the load found")
        if self.synchronous:
            raise FieldProblem("{find_max} searches over load: leave out {synchronous}")
        wrong, given = ("concurrency", self.concurrency) if self.find_max == "rate" else ("rate", self.rate)
        if given:
            raise FieldProblem("{find_max} {load} searches over {load}: leave out {" + wrong + "}", load=self.find_max)
        starts = self.rate if self.find_max == "rate" else self.concurrency
        if len(starts) > 1:
            raise FieldProblem("{find_max} starts from one {" + self.find_max + "} value, not {count}",
                               count=len(starts))
        if self.find_max == "concurrency" and (ceiling := self.concurrency_ceiling) is not None \
                and (self.concurrency or [1])[0] > ceiling:
            raise FieldProblem("{find_max} concurrency starts at {concurrency} {start}, but a probe of {requests} "
                               "{n} (with {warmup} {warm}) never has more than {ceiling} in flight: raise {requests} "
                               "(several times the concurrency, for a steady window), give {duration_s}, or start "
                               "lower", start=self.concurrency[0], n=self.requests, warm=self.warmup,
                               ceiling=ceiling)


def _counts_requests(values: Mapping[str, Any]) -> bool:
    """Whether a spec of ``values`` takes a default request count: not for sessions, a trace or a duration."""
    from tokometer.benchmark.mixspec import mix_is_traced

    return not (values.get("sessions") or values.get("trace") or values.get("agents")
                or values.get("duration_s") is not None or mix_is_traced(values.get("mix")))


def apply_profile(values: Mapping[str, Any], profile: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` with ``profile``'s defaults, instead of the fields' own, for the fields they leave out.

    A profile is a set of defaults for a kind of target (the embedded engine's lighter run,
    `tokometer.benchmark.embedded.EMBEDDED_PROFILE`). As with the fields' own: its ``requests`` applies only
    where a request count does (`_counts_requests`), and its ``concurrency`` levels only where no load is given.
    """
    out = dict(values)
    for field, default in profile.items():
        if field not in BenchSpec.model_fields:
            raise ValueError(f"the profile sets {field!r}, which is not a field of BenchSpec")
        if field in out or (field == "requests" and not _counts_requests(out)):
            continue
        if field in ("concurrency", "rate") and any(out.get(f) for f in _LOADS):
            continue
        out[field] = default
    return out


_LOADS = ("concurrency", "rate", "synchronous", "find_max", "trace", "agents")
"""The fields that say what load to put on: with none of them, a profile's concurrency levels apply."""
