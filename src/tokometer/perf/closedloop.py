"""`closed_loop`: what a closed-loop benchmark at a fixed concurrency sees, prompts arriving as answers finish.

B users each send a prompt of I tokens, read its O output tokens and send the next one at once (``bench
-c B``). In steady state the engine decodes B sequences whose caches hold I + O / 2 tokens on average,
and a new prompt arrives every time an answer ends: while one user decodes, the other B − 1 send
r = (B − 1) / O prompts per step. Each prompt must be prefilled, and that prefill costs the decoders time.

With chunked prefill (vLLM V1, SGLang and TensorRT-LLM by default) a step holds at most ``step_tokens``
tokens (the engine's token budget: vLLM's ``max_num_batched_tokens``, TensorRT-LLM's ``max_num_tokens``;
`STEP_TOKENS` by default). A prompt rides in decode steps, chunk = step_tokens − B tokens at a time, so it
takes k = ⌈I / chunk⌉ steps of c = I / k tokens each; a step that carries prompt tokens is
`roofline.mixed_step_s` (one weight read for all its tokens, the prompt tokens' FLOPs added to the decode
roofline: the step `tokometer.perf.maxload` is made of, checked against published figures):

    share of steps carrying a prompt   f = min(1, r × k)
    prompt tokens in such a step       p = c, or r × I once every step carries some (r × k > 1)
    ITL    = (1 − f) × step(B) + f × step(B, p)                            (mean time between tokens)
    TTFT   = wait + queued × D + k × step(B − 1, p)
    wait   = E[S²] / (2 E[S]) over the steps' mix: ((1 − f) × step(B)² + f × step(B, p)²) / (2 × ITL)
    D      = k × (step(B − 1, p) − step(B − 1))       (the compute a prompt adds to the steps it rides in)

A prompt sent at a random moment waits for the step in flight to end (0 at B = 1). That moment falls in a long
step more often than long steps' share of the steps, so the time left of the step in flight is E[S²] / (2 E[S])
(the inspection paradox of renewal theory): half a step when the steps are alike, more when a few long steps
carry prompts (5,000-token prompts at 50 users on two H100s: 121 ms against half the ITL's 33 ms).

Prompts also wait behind one another: a prompt sent while others wait for their prefill starts after them, each
holding the steps for the compute D it adds. ``queued`` is the number waiting ahead (not yet in the steps) that a
prompt finds, from the mean value analysis of the closed loop (`prompts_waiting_ahead`): B users, each
thinking (O − 1) × ITL (decoding its answer) and then needing D of the engine's prefill, one prompt's
compute after another's. Where prompts are short (D small beside the think time) it is nil; it grows as the
prompts' compute fills the time (the same 70B case: 0.28 prompts, 103 ms more).

Saturated (B × I / O > chunk: the prompts need more tokens a step than the budget leaves): every step is
full, and only B_d = step_tokens × O / (I + O) sequences decode while the others wait for their prefill:

    ITL    = step(B_d, P = step_tokens − B_d);  aggregate = P / I × O / ITL (= B_d / ITL);
    TTFT   = B × O / aggregate − (O − 1) × ITL                      (B_d at least 1)

Without chunked prefill (``chunked=False``) a prompt is prefilled in a step of its own (n = ⌊step_tokens /
I⌋ waiting prompts together, at most ⌈r⌉, at least 1), and decoding stops meanwhile:

    ITL    = step(B) + r / n × prefill(n × I)          TTFT = wait + queued × prefill(n × I) / n + prefill(n × I)

the wait E[S²] / (2 E[S]) over the decode steps and the r / n prefill steps a decode step, and ``queued`` as
above with D = prefill(n × I) / n.

Then, for every case, per user cycle of TTFT + (O − 1) × ITL:

    per-request tok/s = 1 / ITL          aggregate tok/s = B × O / (TTFT + (O − 1) × ITL)

More users than the engine holds at once: the KV cache (R = the sequences of I + O tokens whose caches fit,
`Deployment.kv_sequences`), or its batch limit (``max_batch`` sequences
a scheduling rank: vLLM's ``--max-num-seqs``, TensorRT-LLM's ``max_batch_size``; R = max_batch × ranks,
`Deployment.ranks`): the engine runs the R it holds and the others wait for a slot, a whole cycle of those
R per round: the step times are those of R users, TTFT grows by (B / R − 1) × cycle, and the aggregate is
R's.

A prompt's prefill in chunks attends to its earlier chunks: a step with p of its tokens is counted with
(I − p) / 2 tokens already cached, so its k chunks do the causal I (I + 1) / 2 pairs in all. Every
request is taken as I → O tokens, the means; where their lengths spread, the tokens a decoding sequence holds
on average may be given (``decode_context``: a step sees the long answers in proportion to their length,
`tokometer.perf.lengths`) in place of I + O / 2. The spread's other effects (prompts of unequal chunks, users'
unequal cycles), the decode steps that run while a prompt waits behind others (each waiting prompt counts its
compute D only) and the engine's own scheduling overheads (tokenising, sampling, the API server) are what this
leaves out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from tokometer.perf.roofline import BOUND, Deployment, Efficiency, mixed_step_s, prefill_s

__all__ = ["STEP_TOKENS", "STEP_TOKENS_SOURCE", "ClosedLoop", "closed_loop", "in_flight_s", "kv_room", "largest_within",
           "prompts_waiting_ahead"]

STEP_TOKENS = 8192
"""Tokens one engine step may hold by default (decode and prompt tokens together)."""
STEP_TOKENS_SOURCE = ("vLLM V1's max_num_batched_tokens for its API server on GPUs of 70 GiB or more "
                      "(vllm/engine/arg_utils.py; 2048 on smaller ones); TensorRT-LLM's max_num_tokens default")


@dataclass(frozen=True)
class ClosedLoop:
    """Steady state of B users in a closed loop: step times, ITL, TTFT and the throughputs they give."""

    batch: int
    input_tokens: int
    output_tokens: int
    chunked: bool
    step_tokens: int
    decode_batch: float
    """Sequences decoding in a step: B, or fewer when saturated (the rest wait for their prefill)."""
    prompts_per_step: float
    """Other users' prompts arriving per decode step: (B − 1) / O."""
    prefill_tokens: float
    """Prompt tokens in a step that carries some (chunked), or in a prefill step of its own."""
    prefill_share: float
    """Chunked: share of steps carrying prompt tokens; else prefill steps per decode step."""
    decode_step_s: float
    """A step with no prompt in it (decode only)."""
    prefill_step_s: float
    """A step carrying prompt tokens (chunked), or a prefill step of its own."""
    itl_s: float
    ttft_s: float
    saturated: bool
    decode_context: float = 0.0
    """Tokens a decoding sequence holds cached on average over the steps: I + O / 2 for requests alike, more or
    less where their lengths spread (`tokometer.perf.lengths`)."""

    @property
    def cycle_s(self) -> float:
        """One user's request from sending to its last token: TTFT + (O − 1) × ITL."""
        return self.ttft_s + (self.output_tokens - 1) * self.itl_s

    @property
    def per_request_tok_s(self) -> float:
        return 1 / self.itl_s

    @property
    def aggregate_tok_s(self) -> float:
        return self.batch * self.output_tokens / self.cycle_s

    def to_json(self) -> dict[str, Any]:
        return {"prefill": "chunked" if self.chunked else "separate steps", "step_tokens": self.step_tokens,
                "decode_batch": self.decode_batch, "prompts_per_step": self.prompts_per_step,
                "prefill_tokens_per_step": self.prefill_tokens, "prefill_share": self.prefill_share,
                "decode_only_step_ms": self.decode_step_s * 1e3, "prefill_step_ms": self.prefill_step_s * 1e3,
                "itl_ms": self.itl_s * 1e3, "ttft_ms": self.ttft_s * 1e3, "cycle_s": self.cycle_s,
                "saturated": self.saturated, "per_request_tok_s": self.per_request_tok_s,
                "aggregate_tok_s": self.aggregate_tok_s, "decode_context_tokens": self.decode_context}


def in_flight_s(steps: tuple[tuple[float, float], ...]) -> float:
    """The mean time left of the step in flight at a random moment, over a mix of steps given as (how many, in
    any unit, seconds) pairs: E[S²] / (2 E[S]) (a random moment falls in a long step in proportion to its length:
    the inspection paradox); half the step when all are alike, 0 with no steps."""
    mean = sum(n * s for n, s in steps)
    return sum(n * s * s for n, s in steps) / (2 * mean) if mean > 0 else 0.0


def prompts_waiting_ahead(users: int, demand_s: float, think_s: float) -> float:
    """The prompts a user's prompt finds waiting ahead of it (not yet in the steps), by mean value analysis of a
    closed loop of ``users`` users that each think ``think_s`` seconds and then need ``demand_s`` of the engine's
    prefill, one prompt after another. By the arrival theorem a prompt sees the loop with one user fewer; with n
    users, a prompt's response is R(n) = D × (1 + waiting(n − 1)) + busy(n − 1) × D / 2 (the one in service has
    half its D left: deterministic service), the throughput X(n) = n / (think + R(n)), in the queue X × R and busy
    X × D. 0 for one user or no demand."""
    if users <= 1 or demand_s <= 0:
        return 0.0
    queue = busy = waiting = 0.0
    for n in range(1, users + 1):
        waiting = max(0.0, queue - busy)  # what the n-th user's prompt finds: the loop of n − 1
        response = demand_s * (1 + waiting) + busy * demand_s / 2
        throughput = n / (think_s + response)
        queue, busy = throughput * response, min(1.0, throughput * demand_s)
    return waiting


def _with_prompt(d: Deployment, batch: float, context: float, p: float, input_tokens: int,
                 eff: Efficiency) -> float:
    """A step decoding ``batch`` sequences (``context`` cached in all) that also prefills ``p`` prompt tokens:
    whole prompts when p ≥ I, else a chunk of one with (I − p) / 2 of its tokens already cached."""
    if p >= input_tokens:
        return mixed_step_s(d, round(batch), context, p, 0, eff, sequences=p / input_tokens)
    return mixed_step_s(d, round(batch), context, p, (input_tokens - p) / 2, eff)


def _chunked(d: Deployment, batch: int, i: int, o: int, eff: Efficiency, step_tokens: int,
             per_seq: float) -> ClosedLoop:
    chunk = max(1, step_tokens - batch)
    r = (batch - 1) / o
    if batch * i / o > chunk:  # the budget cannot keep up: fewer decode, the rest queue for prefill
        decoding = max(1.0, min(batch - 1.0, step_tokens * o / (i + o)))
        p = max(1.0, step_tokens - decoding)
        itl = _with_prompt(d, decoding, decoding * per_seq, p, i, eff)
        answers_per_s = p / i / itl  # prompts done a step = answers begun (and, in steady state, ended) a step
        ttft = batch / answers_per_s - (o - 1) * itl
        return ClosedLoop(batch, i, o, True, step_tokens, decoding, r, p, 1.0,
                          mixed_step_s(d, round(decoding), decoding * per_seq, 0, 0, eff), itl, itl, ttft, True,
                          per_seq)
    k = math.ceil(i / chunk)
    share = min(1.0, r * k)
    p = i / k if r * k <= 1 else min(chunk, r * i)
    decode = mixed_step_s(d, batch, batch * per_seq, 0, 0, eff)
    mixed = _with_prompt(d, batch, batch * per_seq, p, i, eff)
    itl = (1 - share) * decode + share * mixed
    own = _with_prompt(d, batch - 1, (batch - 1) * per_seq, p, i, eff)
    demand = k * max(0.0, own - mixed_step_s(d, batch - 1, (batch - 1) * per_seq, 0, 0, eff))
    queued = prompts_waiting_ahead(batch, demand, (o - 1) * itl)
    ttft = (in_flight_s(((1 - share, decode), (share, mixed))) if batch > 1 else 0.0) + queued * demand + k * own
    return ClosedLoop(batch, i, o, True, step_tokens, float(batch), r, p, share, decode, mixed, itl, ttft, False,
                      per_seq)


def _separate(d: Deployment, batch: int, i: int, o: int, eff: Efficiency, step_tokens: int,
              per_seq: float) -> ClosedLoop:
    r = (batch - 1) / o
    together = max(1, min(math.ceil(r), step_tokens // i))
    decode = mixed_step_s(d, batch, batch * per_seq, 0, 0, eff)
    prefill = prefill_s(d, together * i, 0, eff, sequences=together)
    itl = decode + r / together * prefill
    queued = prompts_waiting_ahead(batch, prefill / together, (o - 1) * itl)
    ttft = (in_flight_s(((1.0, decode), (r / together, prefill))) if batch > 1 else 0.0) \
        + queued * prefill / together + prefill
    return ClosedLoop(batch, i, o, False, step_tokens, float(batch), r, together * i, r / together, decode,
                      prefill, itl, ttft, False, per_seq)


def closed_loop(d: Deployment, batch: int, input_tokens: int, output_tokens: int,
                efficiency: Efficiency | None = None, *, chunked: bool = True,
                step_tokens: int = STEP_TOKENS, gpu_memory_utilization: float = 0.9,
                max_batch: int | None = None, decode_context: float | None = None,
                room_tokens: float | None = None) -> ClosedLoop:
    """`ClosedLoop` of ``batch`` users sending ``input_tokens`` → ``output_tokens`` requests to ``d`` (module
    docstring); ``efficiency`` None: the bound (100 %); ``gpu_memory_utilization`` the memory share the KV
    cache's room is counted at (`kv_room`); ``max_batch`` the engine's limit on sequences a
    rank schedules at once (None: no limit); ``decode_context`` the tokens a decoding sequence holds on average
    where the requests' lengths spread (`tokometer.perf.lengths`; None: I + O / 2, every request alike), and
    ``room_tokens`` the room a sequence holds reserved on average (None: I + O)."""
    eff = efficiency or BOUND
    step_tokens = max(step_tokens, batch + 1)
    how = _chunked if chunked else _separate
    i, o = max(1, input_tokens), max(1, output_tokens)
    limit = max_batch * d.ranks if max_batch else batch
    running = max(1, min(batch, kv_room(d, i, o, gpu_memory_utilization, room_tokens), limit))
    loop = how(d, running, i, o, eff, step_tokens, decode_context or i + o / 2)
    if running >= batch:
        return loop
    # The engine holds `running` sequences: the other users wait for a slot, a whole cycle per round.
    return replace(loop, batch=batch, ttft_s=loop.ttft_s + (batch / running - 1) * loop.cycle_s)


def kv_room(d: Deployment, input_tokens: int, output_tokens: int, gpu_memory_utilization: float = 0.9,
            room_tokens: float | None = None) -> int:
    """Sequences of ``input + output`` tokens (``room_tokens`` where given: the spread lengths' reserved room)
    the KV cache holds at once at that memory share (`Deployment.kv_sequences`); unbounded (a large number) when
    the hardware's memory is unknown or not even one fits (said elsewhere)."""
    if not d.hardware.memory_gb:
        return 1 << 30
    room = d.kv_sequences(round(room_tokens or input_tokens + output_tokens), gpu_memory_utilization)
    return room if room >= 1 else 1 << 30


def largest_within(d: Deployment, input_tokens: int, output_tokens: int, ttft_limit_s: float, itl_limit_s: float,
                   efficiency: Efficiency | None = None, *, most: int = 1 << 14) -> ClosedLoop | None:
    """The closed loop at the largest concurrency (up to ``most``) whose TTFT and ITL both stay within the
    limits: the throughput a benchmark with latency limits scores (MLPerf's Server scenario: its TTFT and
    TPOT limits, e.g. 6 s and 175 ms for Llama 3.1 405B), modelled as users in a closed loop rather than
    its Poisson arrivals. None when even one user misses a limit. TTFT and ITL grow with the users, so the
    largest is found by bisection."""
    def within(users: int) -> ClosedLoop | None:
        loop = closed_loop(d, users, input_tokens, output_tokens, efficiency)
        return loop if loop.ttft_s <= ttft_limit_s and loop.itl_s <= itl_limit_s else None

    best = within(1)
    if best is None:
        return None
    low, high = 1, max(1, most)
    while low < high:
        mid = (low + high + 1) // 2
        loop = within(mid)
        if loop is not None:
            low, best = mid, loop
        else:
            high = mid - 1
    return best
