"""Before the first request: is anything there, which model, which tokenizer, which prompts.

Everything that can fail for a reason the user must fix fails here, with one
clear line, before any timing starts.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tokometer.benchmark.preflight import preflight, protocol_hint, server_root
from tokometer.benchmark.spec import BenchSpec
from tokometer.benchmark.volume import DEFAULT_TURNS
from tokometer.client.http1 import ConnectError, HttpTimeout, PeerReset
from tokometer.client.probe import Probe
from tokometer.datasets import FixedSource, SyntheticSource, load_source_file
from tokometer.datasets.agentic_workload import AgentWorkload, open_agents
from tokometer.datasets.batched import BatchedSource
from tokometer.datasets.conversations import SessionScript, SessionSource, ShareGPTSessions, SyntheticSessions
from tokometer.datasets.files import JsonlSource, ShareGPTSource
from tokometer.datasets.images import ImageSpec, parse_image_size
from tokometer.datasets.mix import MixSource, tenant_seed
from tokometer.datasets.mix_sessions import MixSessions
from tokometer.datasets.sampled import Sampled
from tokometer.datasets.trace import TraceSource
from tokometer.load.runner import StepLimits
from tokometer.prompt import Prompt
from tokometer.protocols.registry import PROTOCOLS, create_client, protocol_named
from tokometer.tokens import ServerTokenizer, Tokenizer, probe_server_tokenizer
from tokometer.util.errors import DatasetError, EndpointError, TokenizerError
from tokometer.util.shown import clipped

__all__ = ["Prepared", "prepare"]

Source = SyntheticSource | FixedSource | JsonlSource | ShareGPTSource | TraceSource | BatchedSource | MixSource


@dataclass(slots=True)
class Prepared:
    model: str
    source: Source
    tokenizer: Tokenizer | None
    local_tokenizer: bool
    warnings: list[str] = field(default_factory=list)
    sessions: SessionSource | MixSessions | None = None
    """With ``--sessions``: the sessions' scripts (the user's side; `tokometer.load.sessions` runs them)."""
    agents: AgentWorkload | None = None
    """With ``--agents``: the agent sessions and their texts (`tokometer.load.agentic` runs them)."""

    def session_list(self, limits: StepLimits, offset: int) -> list[SessionScript]:
        """The sessions one step runs, after the ``offset`` earlier steps ran, for worker processes."""
        assert self.sessions is not None
        return self.sessions.script_list(offset, limits.total or 1024)

    def prompt_list(self, limits: StepLimits, offset: int) -> list[Prompt]:
        """The prompts one step uses, starting after the ``offset`` earlier steps used, as a list
        to hand to worker processes."""
        if isinstance(self.source, SyntheticSource):
            wanted = min(limits.total or self.source.unique, self.source.unique)
            return list(itertools.islice(self.source.prompts(), offset, offset + wanted))
        if isinstance(self.source, MixSource):  # each request its tenant's: the list in the run's own order
            return self.source.prompt_list(offset, limits.total or self.source.planned)
        items = self.source.items
        start = offset % len(items)
        return items[start:] + items[:start]


async def _check_endpoint(spec: BenchSpec, warnings: list[str]) -> tuple[str, float | None]:
    """Connect once, pick the model, send the check request (`preflight`); return the model and how long the
    check's 1-token answer took (None without one). Raises EndpointError if nothing answers or no run could work."""
    key_headers = create_client(spec.api).auth_headers(spec.api_key) if spec.api_key else {}
    headers = {**spec.headers, **key_headers}  # the protocol's own key header (Anthropic: x-api-key)
    probe = Probe(headers, spec.tls(), spec.connect_timeout_s)
    try:
        await probe.get(server_root(spec.url) + "/")
    except ConnectError as exc:
        if "TLS handshake" in str(exc):
            raise EndpointError(f"{spec.url}: {exc}") from None
        raise EndpointError(f"nothing answers at {spec.url}: {exc}; "
                            "is the server running, and are host and port right?") from None
    except (HttpTimeout, PeerReset) as exc:
        raise EndpointError(f"{spec.url} does not answer HTTP ({exc}); check the URL and that the server is up") \
            from None
    model = spec.model or await _model(spec, probe)
    quickest = await preflight(spec, model, probe, warnings) if spec.check else None
    return model, quickest


_QUICKEST_FLOOR_S = 0.001
"""No request is taken to be quicker than this, whatever the check request took."""


def prompts_per_step(spec: BenchSpec, unique: int, quickest_s: float | None) -> int:
    """How many synthetic prompts one step can use, made before timing starts (at most ``unique``, warm-up
    included): ``-n`` when given; for a ``--duration`` step a bound on what it can send, so a 2 s step does not
    first make 8,192 exact prompts through a server's /tokenize. Under a rate: the Poisson count over the
    duration plus four standard deviations; under concurrency: every slot sending back to back at the speed
    of the check request's 1-token answer (no real request is quicker). A step that needs more makes them
    as it goes (`SyntheticSource.prompts`)."""
    if spec.requests is not None or spec.duration_s is None or spec.find_max is not None:
        return min(spec.requests or unique, unique) + spec.warmup
    d = spec.duration_s
    if spec.rate:
        expected = max(spec.rate) * d
        bound = 1.25 * expected + 4 * math.sqrt(expected) + 8  # 25 %: arrivals burstier than Poisson
    else:
        slots = max(spec.concurrency or [1])
        bound = slots * (d / max(quickest_s or _QUICKEST_FLOOR_S, _QUICKEST_FLOOR_S) + 1)
    return min(math.ceil(bound), unique) + spec.warmup


async def _model(spec: BenchSpec, probe: Probe) -> str:
    """The model to ask for when none was given: the first one the server lists (none where the server serves
    one model whatever the name)."""
    protocol = protocol_named(spec.api)
    listing = protocol.model_list
    if listing is None or protocol.serves_one_model:
        return ""
    names = listing.read(await probe.get_json(listing.url(spec.url))) or []
    if protocol.picks_first_model:
        if names:
            return names[0]
        raise EndpointError(f"could not list models at {listing.url(spec.url)}: give --model, or "
                            f"{await protocol_hint(spec, probe)}")
    hint = f" (the server has: {', '.join(clipped(name) for name in names[:8])})" if names else ""
    raise EndpointError(f"{protocol.vendor} needs a model name: give --model{hint}")


def _tokenizer(spec: BenchSpec, warnings: list[str]) -> tuple[Tokenizer | None, bool]:
    choice = spec.tokenizer
    if choice == "none":
        return None, False
    if choice in ("auto", "server"):
        found = probe_server_tokenizer(spec.url, spec.model, spec.api_key)
        if found is None and choice == "server":
            raise TokenizerError(f"the server at {spec.url} has no working /tokenize endpoint; "
                                 "give --tokenizer with the model's tokenizer (a .gguf, tokenizer.json, model "
                                 "directory or id, tiktoken:ENCODING, or bundled), or --tokenizer none")
        return found, False
    # Whatever `tokometer count --tokenizer` takes: bundled, PATH.gguf, tokenizer.json, a model
    # directory or id, tiktoken:ENCODING, ollama:NAME, a server URL.
    from tokometer.tokens.loader import load_tokenizer

    tokenizer = load_tokenizer(choice)
    # A tokenizer behind HTTP makes exact prompts, but never counts answers: that would put a
    # blocking request on the event loop that stamps the streams.
    return tokenizer, not isinstance(tokenizer, ServerTokenizer)


def _source(spec: BenchSpec, tokenizer: Tokenizer | None, warnings: list[str]) -> Source:
    if spec.mix is not None:
        return _mix_source(spec, tokenizer, warnings)
    if spec.prompt is not None:
        return FixedSource(spec.prompt)
    if spec.trace is not None:
        trace = TraceSource(spec.trace, tokenizer, block_tokens=spec.trace_block_tokens, seed=spec.seed_value)
        if tokenizer is None:
            warnings.append("no tokenizer: the trace's prompts are made of words, one word per token of the trace "
                            "(the server's own prompt counts are reported)")
        return trace
    if spec.dataset is not None:
        return load_source_file(spec.dataset, spec.dataset_kind, tokenizer)
    images = None
    if spec.images:
        width, height = parse_image_size(spec.image_size)
        images = ImageSpec(spec.images, width, height, spec.image_format)
    source = SyntheticSource(spec.input_tokens, tokenizer=tokenizer, seed=spec.seed_value,
                             prefix_tokens=spec.prefix_tokens, prefix_groups=spec.prefix_groups, images=images)
    if tokenizer is None:
        warnings.append(f"no tokenizer: synthetic prompts are {spec.input_tokens} words, not exactly "
                        f"{spec.input_tokens} tokens (the server's own prompt counts are reported)")
    return source


def _tenant_spec(spec: BenchSpec, number: int, **own: Any) -> BenchSpec:
    """The run's spec as tenant ``number`` of its mix has it: its prompt length, dataset and seed, and ``own``."""
    assert spec.mix is not None
    tenant = spec.mix.tenants[number]
    return spec.model_copy(update={"mix": None, "input_tokens": tenant.input_tokens or spec.input_tokens,
                                   "dataset": tenant.dataset, "dataset_kind": tenant.dataset_kind,
                                   "seed": tenant_seed(spec.seed_value, number), **own})


def _mix_source(spec: BenchSpec, tokenizer: Tokenizer | None, warnings: list[str]) -> MixSource:
    """A tenant mix's prompts: each tenant's own source, made as the run's would be from its table."""
    assert spec.mix is not None
    sources = []
    for number, tenant in enumerate(spec.mix.tenants):
        own = _tenant_spec(spec, number, prompt=tenant.prompt, trace=tenant.trace)
        said: list[str] = []
        sources.append(_source(own, tokenizer, said))
        warnings.extend(f"tenant {tenant.name!r}: {w}" for w in said)
    order = None
    if spec.mix.traced:  # each request's tenant on the merged timeline
        from tokometer.benchmark.mixtrace import mix_timeline

        order = mix_timeline(spec.mix, spec)[1]
    return MixSource(spec.mix, sources, spec.seed_value, order)


async def prepare(spec: BenchSpec, n_steps: int = 1) -> Prepared:
    """Check the endpoint, pick the model and tokenizer, make the prompts."""
    warnings: list[str] = []
    model, quickest = await _check_endpoint(spec, warnings)
    spec_for_tok = spec.model_copy(update={"model": model})
    if spec.url.startswith("https://") and spec.tls().warning:
        warnings.append(f"{spec.tls().warning} (--insecure)")
    cores = os.cpu_count() or 1
    if spec.workers > cores:
        warnings.append(f"--workers {spec.workers} is more than this machine's {cores} cores: "
                        f"using {cores} (more load-generator processes than cores only slow each other down)")
    tokenizer, local = await asyncio.to_thread(_tokenizer, spec_for_tok, warnings)
    agents: AgentWorkload | None = None
    sessions: SessionSource | MixSessions | None = None
    if spec.sessions is not None:
        sessions = await asyncio.to_thread(_sessions, spec, tokenizer, warnings)
        await _in_thread(sessions.prepare, (spec.sessions + spec.warmup) * n_steps)
        # The runner reads the sessions, never this source: it names the prompts for the report.
        source: Source = sessions.source if isinstance(sessions, SyntheticSessions) else FixedSource(sessions.name)
    elif spec.agents is not None:
        agents = await asyncio.to_thread(open_agents, spec.agents, tokenizer, spec.seed_value, spec.output_tokens)
        await _in_thread(agents.prepare, 0)
        source = FixedSource(agents.name)
        source.name = agents.name  # the runner reads the sessions, never this source: it names them for the report
    else:
        source = await asyncio.to_thread(_source, spec, tokenizer, warnings)
    if isinstance(source, TraceSource):
        await _in_thread(source.prepare, len(source.entries))
        warnings.extend(_trace_notes(source))
    elif isinstance(source, MixSource):
        await _in_thread(source.prepare, prompts_per_step(spec, 1 << 20, quickest) * n_steps)
    elif isinstance(source, SyntheticSource) and sessions is None:
        # Every request of the run gets a prompt of its own (up to the source's limit), so no
        # step is sped up by a prefix cache holding an earlier step's prompts.
        per_step = prompts_per_step(spec, source.unique, quickest)
        stop = threading.Event()
        try:
            await asyncio.to_thread(source.prepare, per_step * n_steps * spec.batch_size, stop)
        finally:
            stop.set()  # cancelled (Ctrl-C): the thread stops at its next prompt, not after all of them
    if not PROTOCOLS[spec.api].streams:  # embeddings, rerank: each request a batch of inputs
        source = _batched(spec, source, n_steps)
    return Prepared(model=model, source=source, tokenizer=tokenizer, local_tokenizer=local, warnings=warnings,
                    sessions=sessions, agents=agents)


def _batched(spec: BenchSpec, source: Source, n_steps: int) -> BatchedSource:
    """``source`` in batches of ``--batch-size`` inputs: as many as the run sends (synthetic prompts, up to
    the source's distinct ones), or enough to use every prompt of a file once."""
    if isinstance(source, SyntheticSource):
        drawn = min(((spec.requests or source.unique) + spec.warmup) * n_steps * spec.batch_size, source.unique)
    elif isinstance(source, TraceSource):
        drawn = len(source.entries)
    else:
        drawn = len(source.items)
    return BatchedSource(source.name, source.prompts(), spec.batch_size,
                         BatchedSource.batches_for(drawn, spec.batch_size))


async def _in_thread(make: Callable[[int, threading.Event], None], n: int) -> None:
    """Run ``make(n, stop)`` in a thread; on cancellation (Ctrl-C) ``stop`` tells it to give up."""
    stop = threading.Event()
    try:
        await asyncio.to_thread(make, n, stop)
    finally:
        stop.set()


def _sessions(spec: BenchSpec, tokenizer: Tokenizer | None, warnings: list[str]) -> SessionSource | MixSessions:
    if spec.mix is not None:
        return _mix_sessions(spec, tokenizer, warnings)
    think = Sampled.parse(spec.think_time or "0", "--think-time")
    turns = Sampled.parse(spec.turns, "--turns", whole=True) if spec.turns is not None else None
    if spec.dataset is not None:
        if spec.dataset_kind == "jsonl":
            raise DatasetError("--sessions takes its conversations from a ShareGPT --dataset (several human "
                               "turns each), not from JSONL prompts")
        max_turns = int(turns.high) if turns is not None else None
        return ShareGPTSessions(spec.dataset, tokenizer, think, max_turns=max_turns, seed=spec.seed_value)
    source = _source(spec, tokenizer, warnings)
    assert isinstance(source, SyntheticSource)
    default = Sampled("fixed", DEFAULT_TURNS, DEFAULT_TURNS, whole=True)
    return SyntheticSessions(source, turns or default, think, seed=spec.seed_value)


def _mix_sessions(spec: BenchSpec, tokenizer: Tokenizer | None, warnings: list[str]) -> MixSessions:
    """A mix's sessions: each tenant's own, made as the run's would be from its table."""
    assert spec.mix is not None
    sources = []
    for number, tenant in enumerate(spec.mix.tenants):
        own = _tenant_spec(spec, number, turns=tenant.turns or spec.turns,
                           think_time=tenant.think_time or spec.think_time)
        said: list[str] = []
        try:
            made = _sessions(own, tokenizer, said)
        except DatasetError as exc:
            raise DatasetError(f"tenant {tenant.name!r}: {exc}") from None
        assert not isinstance(made, MixSessions)
        sources.append(made)
        warnings.extend(f"tenant {tenant.name!r}: {w}" for w in said)
    return MixSessions(spec.mix, sources, spec.seed_value)


def _trace_notes(source: TraceSource) -> list[str]:
    notes = []
    if source.nudged:
        notes.append(f"{source.nudged} of the trace's prompts had their shared last block remade to reach the "
                     "exact length: those blocks are not shared")
    return notes
