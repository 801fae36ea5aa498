"""A continuous-batching engine model: what the simulator runs in ``--model``/``--hardware`` mode.

One asyncio task plays the GPU. Each iteration it builds a batch the way
vLLM's scheduler does, asks a step-time function how long that batch takes on
the modelled deployment, waits that long, and hands every sequence in the batch
its token:

- **decode first**: every running sequence that has finished its prefill gets
  one token this step (1 token of the step's token budget each);
- **then prefill, chunked**: sequences still prefilling, then waiting ones in
  arrival order, take prompt tokens from what is left of the budget
  (``max_batched_tokens``), while fewer than ``max_num_seqs`` run and the KV
  cache has room for the whole prompt; a sequence's first token is sampled at
  the end of the step that finishes its prefill;
- **prefix cache** (`tokometer.sim.prefixcache`, unless ``prefix_caching`` is off): an admitted sequence
  whose leading prompt blocks the cache holds starts its prefill after them;
- **LoRA adapters** (`tokometer.sim.adapters`, with ``lora``): a waiting sequence whose adapter would make the
  running ones hold more than ``max_loras`` adapters waits (keeping its place); a step whose batch needs an
  adapter not loaded takes ``switch_ms`` longer for each one it loads;
- **KV capacity**: every running sequence holds ``prefilled + generated``
  tokens; when decode would overflow the cache, the most recently admitted
  sequence is preempted (its KV dropped, to be recomputed: it re-queues at the
  front and must prefill prompt + generated tokens again);
- **speculative decoding** (a `tokometer.sim.speculative.Draft`): each decoding sequence's step
  verifies k drafted tokens beside its own (the step's time counts them as k more prefill-like
  tokens, times the draft's own cost) and emits 1 + the accepted ones.

Step times come from `tokometer.perf` (roofline bounds at stated
efficiencies), optionally with jitter, and are stretched by ``time_scale`` so a
Python process can play a fast GPU faithfully (every reported time is then
``time_scale`` times the modelled one).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from tokometer.sim.adapters import AdapterSlots, LoraConfig, adapter_fits, batch_loads
from tokometer.sim.prefixcache import BLOCK_TOKENS, PrefixCache
from tokometer.sim.speculative import Draft
from tokometer.util.clock import sleep_until

__all__ = ["Engine", "EngineLimits", "EngineStats", "Sequence", "StepTime"]

StepTime = Callable[[int, int, int], float]
"""``step_time(decode_seqs, kv_tokens_read, prefill_tokens) -> seconds`` of one iteration."""

Emit = Callable[["Sequence", int], Awaitable[None]]
"""Called after a step with the sequence and how many tokens it now has in total."""


@dataclass(frozen=True, slots=True)
class EngineLimits:
    """Scheduler limits, named as vLLM names them."""

    max_num_seqs: int = 256
    max_batched_tokens: int = 8192
    kv_capacity_tokens: int = 1_000_000
    prefix_caching: bool = True
    """vLLM's automatic prefix caching (on by default in vLLM V1)."""


@dataclass(slots=True)
class Sequence:
    """One request inside the engine."""

    seq_id: int
    prompt_tokens: int
    output_tokens: int
    emit: Emit
    prefilled: int = 0
    generated: int = 0
    needs_prefill: int = 0
    kv: int = 0
    done: asyncio.Event = field(default_factory=asyncio.Event)
    cancelled: bool = False
    blocks: tuple[bytes, ...] = ()
    """The prompt's block hashes (`prefixcache.block_hashes`), for the prefix cache."""
    cached_tokens: int = 0
    """Prompt tokens the prefix cache held when the sequence was admitted."""
    admitted_ns: int = 0
    """When the scheduler first took it from the waiting queue into the batch (0: not yet)."""
    adapter: str | None = None
    """The LoRA adapter it runs with (`tokometer.sim.adapters`); None: the base model."""

    def __post_init__(self) -> None:
        self.needs_prefill = self.prompt_tokens

    @property
    def kv_tokens(self) -> int:
        return self.kv

    @property
    def decoding(self) -> bool:
        return self.prefilled >= self.needs_prefill


@dataclass(slots=True)
class EngineStats:
    """Counters for /metrics and tests."""

    steps: int = 0
    preemptions: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0
    finished: int = 0
    busy_s: float = 0.0
    last_batch: int = 0
    max_batch: int = 0


class Engine:
    """The scheduler loop; `submit` a sequence and await ``seq.done``."""

    def __init__(self, step_time: StepTime, limits: EngineLimits, *, time_scale: float = 1.0,
                 jitter: float = 0.0, seed: int = 0, precise: bool = False, draft: Draft | None = None,
                 lora: LoraConfig | None = None) -> None:
        self.step_time = step_time
        self.draft = draft
        self.limits = limits
        self.time_scale = time_scale
        self.jitter = jitter
        self.precise = precise
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.stats = EngineStats()
        self._rng = random.Random(seed)
        self.lora = lora
        self.adapters = AdapterSlots(lora.max_loras) if lora is not None else None
        self.prefix_cache = PrefixCache(limits.kv_capacity_tokens // BLOCK_TOKENS) if limits.prefix_caching else None
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    # -- public ---------------------------------------------------------------------------
    def submit(self, seq: Sequence) -> None:
        if self._task is None or self._task.done():
            self._wake = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._run())
        self.waiting.append(seq)
        assert self._wake is not None
        self._wake.set()

    def cancel(self, seq: Sequence) -> None:
        """The client went away: free the sequence at the next step."""
        seq.cancelled = True

    @property
    def kv_used(self) -> int:
        return sum(s.kv_tokens for s in self.running)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    # -- the loop ---------------------------------------------------------------------------
    async def _run(self) -> None:
        assert self._wake is not None
        next_ns = time.perf_counter_ns()
        while True:
            self._drop_cancelled()
            if not self.running and not self.waiting:
                self._wake.clear()
                await self._wake.wait()
                next_ns = time.perf_counter_ns()
                continue
            decode, prefill = self._schedule()
            if not decode and not prefill:
                # nothing fits (a prompt larger than the whole cache): fail it rather than spin
                seq = self.waiting.popleft()
                seq.cancelled = True
                seq.done.set()
                continue
            kv_read = sum(s.kv_tokens for s in decode)
            prefill_tokens = sum(n for _, n in prefill)
            seconds = self._step_seconds(len(decode), kv_read, prefill_tokens)
            if self.adapters is not None and self.lora is not None:  # loading the adapters the batch lacks
                seconds += batch_loads(self.adapters, decode, prefill) * self.lora.switch_ms / 1000
            if self.jitter:
                seconds *= max(0.1, self._rng.gauss(1.0, self.jitter))
            seconds *= self.time_scale
            next_ns += int(seconds * 1e9)
            await sleep_until(next_ns, 1_000_000 if self.precise else 0)
            now = time.perf_counter_ns()
            if now - next_ns > 5_000_000:
                next_ns = now  # fell behind (host busy): do not try to catch up in a burst
            self.stats.steps += 1
            self.stats.busy_s += seconds
            self.stats.last_batch = len(decode) + len(prefill)
            self.stats.max_batch = max(self.stats.max_batch, self.stats.last_batch)
            await self._advance(decode, prefill)

    def _step_seconds(self, decode_seqs: int, kv_read: int, prefill_tokens: int) -> float:
        """The modelled time of a step, with a draft's verified tokens and its own cost where there is one."""
        if self.draft is None or not decode_seqs:
            return self.step_time(decode_seqs, kv_read, prefill_tokens)
        verified = prefill_tokens + decode_seqs * self.draft.tokens
        return self.step_time(decode_seqs, kv_read, verified) * self.draft.step_factor

    def _drop_cancelled(self) -> None:
        if any(s.cancelled for s in self.running):
            for seq in [s for s in self.running if s.cancelled]:
                self.running.remove(seq)
                seq.done.set()
        if any(s.cancelled for s in self.waiting):
            self.waiting = deque(s for s in self.waiting if not s.cancelled)

    def _schedule(self) -> tuple[list[Sequence], list[tuple[Sequence, int]]]:
        limits = self.limits
        budget = limits.max_batched_tokens
        decode = [s for s in self.running if s.decoding]
        # KV room for one more token per decoding sequence; preempt the newest if needed
        per_seq = 1 + (self.draft.tokens if self.draft is not None else 0)
        while decode and self.kv_used + per_seq * len(decode) > limits.kv_capacity_tokens:
            victim = self.running[-1]
            self._preempt(victim)
            if victim in decode:
                decode.remove(victim)
        decode = decode[:budget]
        budget -= len(decode)
        prefill: list[tuple[Sequence, int]] = []
        for seq in self.running:
            if budget <= 0:
                break
            if not seq.decoding:
                chunk = min(seq.needs_prefill - seq.prefilled, budget)
                prefill.append((seq, chunk))
                budget -= chunk
        skipped: list[Sequence] = []  # waiting for a LoRA slot, as vLLM keeps them: they keep their place
        while self.waiting and budget > 0 and len(self.running) < limits.max_num_seqs:
            seq = self.waiting[0]
            if self.lora is not None and not adapter_fits(seq.adapter, self.running, self.lora.max_loras):
                skipped.append(self.waiting.popleft())
                continue
            if self.kv_used + self._reserved() + seq.needs_prefill + 1 > limits.kv_capacity_tokens:
                break
            self.waiting.popleft()
            self.running.append(seq)
            seq.admitted_ns = seq.admitted_ns or time.perf_counter_ns()
            if self.prefix_cache is not None and seq.prefilled == 0 and seq.blocks:
                seq.cached_tokens = self.prefix_cache.lookup(seq.blocks, seq.needs_prefill)
                seq.prefilled = seq.kv = seq.cached_tokens
            chunk = min(seq.needs_prefill - seq.prefilled, budget)
            prefill.append((seq, chunk))
            budget -= chunk
        self.waiting.extendleft(reversed(skipped))
        return decode, prefill

    def _reserved(self) -> int:
        """Prompt tokens admitted sequences will still fill (their KV is promised)."""
        return sum(s.needs_prefill - s.prefilled for s in self.running if not s.decoding)

    def _preempt(self, seq: Sequence) -> None:
        self.running.remove(seq)
        # recompute: the tokens already sent stay sent; their KV is rebuilt by a new prefill
        seq.needs_prefill = seq.prompt_tokens + seq.generated
        seq.prefilled = 0
        seq.kv = 0
        self.waiting.appendleft(seq)
        self.stats.preemptions += 1

    async def _advance(self, decode: list[Sequence], prefill: list[tuple[Sequence, int]]) -> None:
        ready: list[tuple[Sequence, int]] = [(s, self._decoded(s)) for s in decode]
        for seq, chunk in prefill:
            seq.prefilled += chunk
            seq.kv += chunk
            self.stats.prompt_tokens += chunk
            if seq.decoding:
                ready.append((seq, 1))  # the step that finishes a prefill samples the next token
                if self.prefix_cache is not None:
                    self.prefix_cache.insert(seq.blocks)
        for seq, tokens in ready:
            if seq.cancelled:
                continue
            seq.generated += tokens
            seq.kv += tokens
            self.stats.generation_tokens += tokens
            await seq.emit(seq, seq.generated)
            if seq.generated >= seq.output_tokens:
                self.running.remove(seq)
                self.stats.finished += 1
                seq.done.set()

    def _decoded(self, seq: Sequence) -> int:
        """Tokens a decoding sequence gets this step: 1, or 1 + the draft's accepted ones (up to its answer's end)."""
        if self.draft is None:
            return 1
        return min(1 + self.draft.verify(), seq.output_tokens - seq.generated)
