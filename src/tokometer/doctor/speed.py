"""Speed: TTFT and decode speed alone and under a small load, the prefix-cache effect, the roofline.

The load is the benchmark itself (`tokometer.benchmark.run.run_benchmark`, nothing stored): 4
requests one at a time, then 4 at once (128-token prompts, 24-token answers), with the server's
``/metrics`` sampled through both steps for the server check. A server that batches requests gives
more tokens per second in all at 4 than at 1; one that does not (one slot, static batching, a
saturated engine) gives about the same, and each request waits for the others (interference). The
server's own ``/metrics`` tell the two apart: where all 4 ran at once and the throughput held, one
request already keeps the hardware busy (``speed.saturated``, info: more slots would not help); where
they did not all run, or the throughput fell, requests interfere (``speed.interference``, warning).

Then the same 384-token prompt is sent twice: a prefix (prompt) cache answers the second one's
first token sooner. With ``--hardware`` (and a model ``tokometer estimate`` knows), the idle decode
speed is compared with the roofline estimate (`tokometer.perf.questions.run_estimate`). ``--quick``
skips the load and the pair, and reports the streaming check's one request.

Behind a proxy that buffers the stream (the streaming check's ``streaming.buffered`` or ``streaming.bursty``)
the per-event decode speed is not the server's: a whole answer at once reads 0 tok/s, blocks of events read
far too fast (a block's tokens counted as made at once). Then ``speed.summary`` is a warning that says so: no
decode speed where the whole answer came at once, and the speed from the blocks' arrival where it came in
several (`tokometer.doctor.streaming.burst_decode_tok_s`); the aggregate output tok/s stands either way.
"""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tokometer.doctor.finding import Finding
from tokometer.doctor.server import gauge_max
from tokometer.doctor.session import Session
from tokometer.doctor.streaming import burst_decode_tok_s
from tokometer.metrics import request as per_request
from tokometer.records import RequestRecord
from tokometer.util.errors import ConfigError, TokometerError
from tokometer.util.shown import clipped, quoted, quoted_in

__all__ = ["BATCHING_GAIN", "LOAD", "THRASHING_GAIN", "Load", "bottleneck", "interfered", "run", "saturated"]

LOAD = 4
"""Requests at once in the load step."""
BATCHING_GAIN = 1.15
"""Below this ratio of aggregate output tok/s (LOAD at once vs one at a time), requests interfere."""
THRASHING_GAIN = 0.85
"""Below this ratio, requests that all ran at once cost throughput: they thrash, not merely saturate."""
_PREFIX_PROMPT = 384
_PREFIX_SPEEDUP = 0.7
_BELOW_ESTIMATE = 0.5


@dataclass(frozen=True, slots=True)
class Load:
    """p50 TTFT (ms), p50 decode speed per request (tok/s) and aggregate output tok/s of one step."""

    ttft_ms: float
    decode_tok_s: float
    output_tok_s: float

    def to_json(self) -> dict[str, float]:
        return {"ttft_p50_ms": round(self.ttft_ms, 1), "decode_tok_s_per_request_p50": round(self.decode_tok_s, 1),
                "output_tok_s_total": round(self.output_tok_s, 1)}


def interfered(idle: Load, loaded: Load) -> bool:
    """Whether requests slow each other down without the server gaining throughput from batching them."""
    gain = loaded.output_tok_s / idle.output_tok_s if idle.output_tok_s else 1.0
    slower = loaded.ttft_ms > 2 * idle.ttft_ms or 0 < loaded.decode_tok_s < 0.6 * idle.decode_tok_s
    return gain < BATCHING_GAIN and slower


def saturated(idle: Load, loaded: Load, running_max: float | None) -> bool:
    """Whether interfering requests all ran at once (the server's ``running`` gauge reached `LOAD`) and held the
    throughput: the hardware, not the server's slots or scheduling, is the limit."""
    gain = loaded.output_tok_s / idle.output_tok_s if idle.output_tok_s else 1.0
    return running_max is not None and running_max >= LOAD and gain >= THRASHING_GAIN


def bottleneck(idle: Load, loaded: Load) -> str:
    """The likeliest limit, in words, from how the figures moved between one request and `LOAD`."""
    gain = loaded.output_tok_s / idle.output_tok_s if idle.output_tok_s else 1.0
    if gain < BATCHING_GAIN:
        return ("scheduling: requests are served one after another (one slot, no continuous batching) or one "
                "request already saturates the engine")
    if loaded.ttft_ms > 3 * idle.ttft_ms:
        return "prefill and queueing: new requests wait behind the others' prefill"
    if 0 < loaded.decode_tok_s < 0.5 * idle.decode_tok_s:
        return "decode: requests share a saturated memory bandwidth or compute"
    return "none at this load: the server batches requests well"


def _load(summary: Any) -> Load | None:
    """The step's figures; None when nothing completed. A decode speed that cannot be measured (every token
    arrived at once) is 0."""
    ttft, decode = summary.ttft_ms.p50, summary.decode_speed_tok_s.p50
    if ttft is None or summary.requests_completed == 0:
        return None
    return Load(ttft, decode or 0.0, summary.output_throughput_tok_s)


def _stream_problem(session: Session) -> str | None:
    """``buffered`` or ``bursty`` when the streaming check found the stream held back by something; else None."""
    shape = session.speed.get("stream_shape")
    if shape is None:
        return None
    return "buffered" if shape.buffered else "bursty" if shape.bursty else None


def _burst_speed(records: Sequence[RequestRecord]) -> float | None:
    """The median over ``records`` of the decode speed from their bursts' arrival; None where none has one."""
    speeds = [v for v in (burst_decode_tok_s(r.event_ns, r.event_tokens) for r in records if r.ok and not r.warmup)
              if v is not None]
    return statistics.median(speeds) if speeds else None


_BUFFERED_ADVICE = ("Per-request speed cannot be seen through this path: measure at the engine's own port, or turn "
                    "buffering off for text/event-stream (see the streaming check). The output tok/s in all stands.")
_BURSTY_ADVICE = ("Per-request speed through this path is only estimated from the blocks: measure at the engine's own "
                  "port, or turn buffering off for text/event-stream (see the streaming check). The output tok/s in "
                  "all stands.")


async def run(session: Session) -> None:
    """The speed check."""
    idle: Load | None = None
    if session.spec.quick:
        record = session.speed.get("stream_record")
        problem = _stream_problem(session)
        if record is not None and problem is not None:
            idle = _quick_behind_a_buffer(session, record, problem)
        elif record is not None:
            ttft, decode = per_request.ttft_ns(record), per_request.decode_speed_tok_s(record)
            if ttft is not None and decode is not None:
                idle = Load(ttft / 1e6, decode, decode)
                session.add(Finding("speed.summary", "info", f"one request: TTFT {idle.ttft_ms:,.0f} ms, decode "
                                    f"{idle.decode_tok_s:,.1f} tok/s", {"idle": idle.to_json()}))
        session.skip("speed", "--quick: no load step and no prefix-cache pair")
    else:
        idle = await _under_load(session)
        await _prefix_cache(session)
    if idle is not None:
        await _versus_estimate(session, idle)


def _quick_behind_a_buffer(session: Session, record: RequestRecord, problem: str) -> Load | None:
    """``--quick``'s one request through a buffering path: no per-event decode speed, the blocks' one if any."""
    ttft = per_request.ttft_ns(record)
    naive = per_request.decode_speed_tok_s(record)
    blocks = burst_decode_tok_s(record.event_ns, record.event_tokens) if problem == "bursty" else None
    evidence = {"stream": problem, "first_arrival_ms": None if ttft is None else round(ttft / 1e6, 1),
                "decode_tok_s_from_blocks": None if blocks is None else round(blocks, 1),
                "per_event_decode_tok_s": None if naive is None else round(naive, 1)}
    if blocks is None:
        title = (f"one request: no decode speed: the stream is {problem} (streaming.{problem}), the answer arrived "
                 "at once" + (f" after {ttft / 1e6:,.0f} ms" if ttft is not None else ""))
    else:
        title = (f"one request: decode about {blocks:,.1f} tok/s, from the blocks' arrival (the stream is bursty: "
                 f"the per-event figure, {naive or 0:,.1f} tok/s, counts a block's tokens as made at once)")
    session.add(Finding("speed.summary", "warning", title, evidence,
                        _BUFFERED_ADVICE if blocks is None else _BURSTY_ADVICE))
    if blocks is None or ttft is None:
        return None
    return Load(ttft / 1e6, blocks, blocks)


def _behind_a_buffer(session: Session, problem: str, one: Any, many: Any, idle: Load, loaded: Load,
                     evidence: dict[str, Any]) -> Load | None:
    """``speed.summary`` through a buffering path (see the module docstring); returns the idle figures with the
    decode speed from the blocks' arrival, or None when there is no decode speed to judge."""
    alone = _burst_speed(one.records) if problem == "bursty" else None
    each = _burst_speed(many.records) if problem == "bursty" else None
    for key, load, blocks in (("idle", idle, alone), (f"{LOAD}_at_once", loaded, each)):
        evidence[key] = {**load.to_json(), "decode_tok_s_per_request_p50": None if blocks is None else round(blocks, 1)}
        if problem == "bursty":
            evidence[key]["per_event_decode_tok_s_p50"] = round(load.decode_tok_s, 1)
    evidence["stream"] = problem
    if problem == "buffered" or alone is None:
        why = ("the stream is buffered (streaming.buffered): every answer arrived at once, so its first token's "
               "time is the whole answer's" if problem == "buffered" else
               "the stream is bursty (streaming.bursty) and each answer came in one block")
        title = (f"no decode speed: {why}; alone: the answer after {idle.ttft_ms:,.0f} ms; {LOAD} at once: after "
                 f"{loaded.ttft_ms:,.0f} ms, {loaded.output_tok_s:,.1f} tok/s in all")
        session.add(Finding("speed.summary", "warning", title, evidence, _BUFFERED_ADVICE))
        return None
    title = (f"decode speed from the blocks' arrival (the stream is bursty: streaming.bursty): alone about "
             f"{alone:,.1f} tok/s, {LOAD} at once about " + ("-" if each is None else f"{each:,.1f}")
             + f" tok/s each, {loaded.output_tok_s:,.1f} tok/s in all (the per-event figure, "
             f"{idle.decode_tok_s:,.1f} tok/s, counts a block's tokens as made at once; TTFT "
             f"{idle.ttft_ms:,.0f} ms is the first block's arrival)")
    session.add(Finding("speed.summary", "warning", title, evidence, _BURSTY_ADVICE))
    return Load(idle.ttft_ms, alone, idle.output_tok_s)


async def _under_load(session: Session) -> Load | None:
    from tokometer.benchmark.run import run_benchmark

    spec = session.bench_spec(concurrency=[1, LOAD], requests=LOAD, input_tokens=128, output_tokens=24,
                              ignore_eos=True, check=False, gpu_metrics="off", scrape_interval_s=0.25,
                              tokenizer=session.spec.tokenizer)
    try:
        result = await run_benchmark(spec, store=None)
    except TokometerError as exc:
        session.skip("speed", f"the load step could not run: {exc}")
        return None
    if len(result.steps) < 2:
        session.skip("speed", "the load step did not finish")
        return None
    one, many = result.steps[0], result.steps[1]
    session.speed["server"] = many.step.server
    session.speed["server_idle"] = one.step.server
    failed = one.summary.requests_failed + many.summary.requests_failed
    idle, loaded = _load(one.summary), _load(many.summary)
    if idle is None or loaded is None:
        session.add(Finding("speed.failed", "error", f"{failed} of {2 * LOAD} requests of the load step failed",
                            {"errors": {**one.summary.errors, **many.summary.errors}},
                            "The server fails under a light load: see its log (memory, timeouts)."))
        return idle
    evidence: dict[str, Any] = {"idle": idle.to_json(), f"{LOAD}_at_once": loaded.to_json(),
                                "batching_gain": round(loaded.output_tok_s / idle.output_tok_s, 2)
                                if idle.output_tok_s else None, "failed": failed,
                                "likely_bottleneck": bottleneck(idle, loaded)}
    problem = _stream_problem(session)
    judged: Load | None = idle
    if problem is not None:
        judged = _behind_a_buffer(session, problem, one, many, idle, loaded, evidence)
    else:
        title = (f"alone: TTFT {idle.ttft_ms:,.0f} ms, {idle.decode_tok_s:,.1f} tok/s; {LOAD} at once: TTFT "
                 f"{loaded.ttft_ms:,.0f} ms, {loaded.decode_tok_s:,.1f} tok/s each, "
                 f"{loaded.output_tok_s:,.1f} tok/s in all")
        session.add(Finding("speed.summary", "info", title, evidence))
    running_max = gauge_max(many.step.server, "requests_running") if many.step.server else None
    evidence["requests_running_max"] = running_max
    if interfered(idle, loaded) and saturated(idle, loaded, running_max):
        session.add(Finding("speed.saturated", "info",
                            f"{LOAD} requests ran at once (the server's /metrics: {running_max:.0f} running) for no "
                            f"more throughput ({loaded.output_tok_s:,.1f} vs {idle.output_tok_s:,.1f} tok/s in all; "
                            f"TTFT {loaded.ttft_ms:,.0f} vs {idle.ttft_ms:,.0f} ms): one request already keeps this "
                            "hardware busy", evidence,
                            "More requests at once buy latency here, not throughput, and more slots would not "
                            "help: for more tokens per second, faster hardware (a GPU, more cores), a smaller or "
                            "more quantised model, or more replicas on more machines."))
    elif interfered(idle, loaded):
        session.add(Finding("speed.interference", "warning",
                            f"{LOAD} requests at once slow each other down without more throughput "
                            f"({loaded.output_tok_s:,.1f} vs {idle.output_tok_s:,.1f} tok/s in all; TTFT "
                            f"{loaded.ttft_ms:,.0f} vs {idle.ttft_ms:,.0f} ms)", evidence,
                            "The server does not batch concurrent requests: give it more slots (llama.cpp "
                            "--parallel, vLLM --max-num-seqs), continuous batching, or more replicas."))
    if failed:
        session.add(Finding("speed.failures", "warning", f"{failed} of {2 * LOAD} requests failed under a light load",
                            {"errors": {**one.summary.errors, **many.summary.errors}},
                            "See the server's log: failures at 4 requests at once point to limits set too low."))
    return judged


async def _prefix_cache(session: Session) -> None:
    import random

    # A prompt of this run's own (an earlier run's would already be cached), sent twice.
    prompt, _, _ = await session.prompt(_PREFIX_PROMPT, seed=random.randrange(2**32))
    first = (await session.send(prompt, 4)).record
    second = (await session.send(prompt, 4)).record
    a, b = per_request.ttft_ns(first), per_request.ttft_ns(second)
    if a is None or b is None:
        session.skip("speed", "the prefix-cache pair failed: "
                     f"{first.error or second.error}: {clipped(first.error_detail or second.error_detail)}")
        return
    cached = second.server.cached_tokens if second.server is not None else None
    evidence = {"prompt_tokens": _PREFIX_PROMPT, "first_ttft_ms": round(a / 1e6, 1),
                "repeat_ttft_ms": round(b / 1e6, 1), "cached_tokens_reported": cached}
    if b < _PREFIX_SPEEDUP * a or (cached is not None and cached >= _PREFIX_PROMPT // 2):
        session.add(Finding("speed.prefix_cache", "info", f"a repeated {_PREFIX_PROMPT}-token prompt gets its first "
                            f"token in {b / 1e6:,.0f} ms instead of {a / 1e6:,.0f} ms: the prefix cache works"
                            + (f" ({cached} tokens from the cache)" if cached else ""),
                            evidence, "Shared system prompts and multi-turn chats benefit; benchmarks must use "
                            "fresh prompts (tokometer bench does) or they measure the cache."))
    else:
        session.add(Finding("speed.no_prefix_cache", "info", f"a repeated {_PREFIX_PROMPT}-token prompt is no faster "
                            f"({b / 1e6:,.0f} vs {a / 1e6:,.0f} ms): no prefix cache seen", evidence,
                            "With shared system prompts or multi-turn chats, a prefix cache saves prefill: vLLM "
                            "--enable-prefix-caching, SGLang's radix cache, llama.cpp cache_prompt."))


async def _versus_estimate(session: Session, idle: Load) -> None:
    if not session.spec.hardware:
        return
    model = session.spec.estimate_model or _model_file(session) or session.model
    from tokometer.perf.questions import EstimateSpec, run_estimate

    try:
        estimate = await asyncio.to_thread(run_estimate, EstimateSpec(model=model, hardware=session.spec.hardware,
                                                                      batches=(1,), input_tokens=128,
                                                                      output_tokens=32))
    except (ConfigError, TokometerError, OSError) as exc:  # OSError: a path /props names that no file system takes
        session.skip("speed", f"no estimate for model {quoted(model)} on {session.spec.hardware!r}: "
                              f"{quoted_in(str(exc), model)}")
        return
    row = estimate.rows[0]
    expected = row.per_request_expected_tok_s
    evidence = {"model": model, "hardware": session.spec.hardware, "measured_decode_tok_s": round(idle.decode_tok_s, 1),
                "expected_decode_tok_s": round(expected, 1), "roofline_tok_s": round(row.per_request_bound_tok_s, 1),
                "limiter": row.limiter}
    share = idle.decode_tok_s / expected if expected else 0.0
    if share < _BELOW_ESTIMATE:
        session.add(Finding("speed.below_estimate", "warning",
                            f"one request decodes at {idle.decode_tok_s:,.1f} tok/s, {100 * share:.0f}% of the "
                            f"{expected:,.1f} tok/s the hardware should give ({row.limiter}-bound)", evidence,
                            "Check that the server runs where you think (GPU, not CPU offload), the same "
                            "quantisation, no other load, and GPU clocks and power (the host check)."))
    else:
        session.add(Finding("speed.vs_estimate", "info",
                            f"one request decodes at {idle.decode_tok_s:,.1f} tok/s, {100 * share:.0f}% of the "
                            f"estimate ({expected:,.1f} tok/s, {row.limiter}-bound)", evidence))


def _model_file(session: Session) -> str | None:
    path = (session.props or {}).get("model_path")
    return path if isinstance(path, str) and path else None
