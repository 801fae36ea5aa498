"""What a run's numbers multiply to, held to the bounds of `tokometer.util.limits` before any work starts.

Each field of `tokometer.benchmark.spec.BenchSpec` is in range on its own; together they may still ask for
more than memory or time can give (``--rate 1e8 --duration 5s`` is 500 million requests). `check_volume`
works out, from the spec's fields alone:

- the requests a step sends at most (`step_requests`): ``-n`` plus ``--warmup``; without ``-n``, the highest
  ``--rate`` over ``--duration``, or a ramp search's ramp (its expected arrivals, `tokometer.load.ramp.Ramp`);
  sessions times their most turns (at most `MAX_TURNS`, and a session's history, turns x the prompt's and the
  answer's tokens, at most `MAX_TOKENS`; a think time at most `MAX_SECONDS`);
- how long a step takes at least, when a rate sends ``-n`` requests: ``-n / --rate`` (under a week);
- the records a step keeps: requests x (`RECORD_BYTES` + `EVENT_BYTES` x ``--output-tokens``), at most
  `MAX_STEP_RECORD_BYTES`; a closed loop given only ``--duration``, which nothing counts before it runs, ends
  once it has sent as many as fit (`step_cap`);
- the prompt tokens made before the run: distinct synthetic prompts x ``--input-tokens`` x ``--batch-size``;
  their images: prompts x ``--images`` x pixels x `IMAGE_BYTES_PER_PIXEL`.

A breach is a `tokometer.util.specproblem.FieldProblem` with the arithmetic in it, naming the fields to lower.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from tokometer.load.ramp import RampStrategy
from tokometer.util.limits import (
    EVENT_BYTES,
    IMAGE_BYTES_PER_PIXEL,
    MAX_IMAGE_BYTES_MADE,
    MAX_PROMPT_TOKENS_MADE,
    MAX_SECONDS,
    MAX_STEP_RECORD_BYTES,
    MAX_STEP_REQUESTS,
    MAX_TOKENS,
    MAX_TURNS,
    RECORD_BYTES,
)
from tokometer.util.specproblem import FieldProblem

__all__ = ["DEFAULT_TURNS", "RunShape", "check_volume", "record_bytes", "step_cap", "step_requests"]

DEFAULT_TURNS = 4.0
"""Turns a session takes when ``--turns`` is not given (and a ShareGPT file's conversations are counted so)."""


class RunShape(Protocol):
    """The fields of a `tokometer.benchmark.spec.BenchSpec` that multiply (the spec checks itself with this
    module, so it is named here by what it has, not imported)."""

    @property
    def api(self) -> str: ...
    @property
    def requests(self) -> int | None: ...
    @property
    def warmup(self) -> int: ...
    @property
    def sessions(self) -> int | None: ...
    @property
    def duration_s(self) -> float | None: ...
    @property
    def rate(self) -> list[float]: ...
    @property
    def concurrency(self) -> list[int]: ...
    @property
    def repeat(self) -> int: ...
    @property
    def find_max(self) -> str | None: ...
    @property
    def search(self) -> str: ...
    @property
    def ramp(self) -> RampStrategy | None: ...
    @property
    def ramp_from(self) -> float | None: ...
    @property
    def ramp_time_s(self) -> float | None: ...
    @property
    def output_tokens(self) -> int: ...
    @property
    def input_tokens(self) -> int: ...
    @property
    def batch_size(self) -> int: ...
    @property
    def dataset(self) -> Path | None: ...
    @property
    def prompt(self) -> str | None: ...
    @property
    def trace(self) -> Path | None: ...
    @property
    def turns(self) -> str | None: ...
    @property
    def images(self) -> int: ...
    @property
    def image_size(self) -> str: ...
    @property
    def think_time(self) -> str: ...


def _n(value: float) -> str:
    """A count as people read it: ``5,000,000``, or ``5e+08`` when it is huge."""
    return f"{value:,.0f}" if value < 1e9 else f"{value:.3g}"


def step_requests(spec: RunShape) -> tuple[float, str, tuple[str, ...]] | None:
    """The most requests one step of ``spec`` sends, the arithmetic in words (fields as ``{placeholders}``) and
    the fields to lower; None where nothing bounds them before the run (a closed loop for a duration, a trace,
    whose length its file holds)."""
    ramp, counted = _ramp_requests(spec), _counted_requests(spec)
    if ramp is None or (counted is not None and counted[0] > ramp[0]):
        return counted
    return ramp


def _ramp_requests(spec: RunShape) -> tuple[float, str, tuple[str, ...]] | None:
    """A rate ramp search's ramp step ends with its ramp, whatever ``-n`` says: its expected arrivals."""
    if spec.find_max is None or spec.search != "ramp" or spec.ramp_from is None or spec.ramp_time_s is None \
            or not spec.rate:
        return None
    from tokometer.load.ramp import Ramp

    ramp = Ramp(spec.ramp or "linear", spec.ramp_from, spec.rate[0], spec.ramp_time_s)
    expected = ramp.expected(ramp.duration_s)
    warm = f" + {{warmup}} {spec.warmup}" if spec.warmup else ""
    return (expected + spec.warmup, f"the {ramp.strategy} ramp from {{ramp_from}} {ramp.start:g} to {{rate}} "
            f"{ramp.end:g}/s over {{ramp_time_s}} {ramp.duration_s:g} s ({_n(expected)} arrivals){warm}",
            ("rate", "ramp_time_s"))


def _counted_requests(spec: RunShape) -> tuple[float, str, tuple[str, ...]] | None:
    """A step's requests by its count, or by its rate over its duration."""
    warm = f" + {{warmup}} {spec.warmup}" if spec.warmup else ""
    if spec.sessions is not None:
        turns = _most_turns(spec)
        return ((spec.sessions + spec.warmup) * turns, f"{{sessions}} {spec.sessions}{warm} × {turns:g} turns",
                ("sessions", "turns"))
    if spec.requests is not None:
        return spec.requests + spec.warmup, f"{{requests}} {spec.requests}{warm}", ("requests", "warmup")
    if spec.rate and spec.duration_s is not None:
        rate = max(spec.rate)
        return (rate * spec.duration_s + spec.warmup, f"{{rate}} {rate:g}/s × {{duration_s}} {spec.duration_s:g} s"
                f"{warm}", ("rate", "duration_s"))
    return None


def _most_turns(spec: RunShape) -> float:
    """The most turns a session of ``spec`` is set to take (an exponential count: its mean); 4 by default."""
    from tokometer.datasets.sampled import Sampled

    return Sampled.parse(spec.turns, "turns", whole=True).high if spec.turns is not None else DEFAULT_TURNS


def _check_sessions(spec: RunShape) -> None:
    """A session's turns, each resending the history, and its think time are bounded too."""
    from tokometer.datasets.sampled import Sampled

    if spec.sessions is None:
        return
    turns = _most_turns(spec)
    if turns > MAX_TURNS:
        raise FieldProblem("{turns} {value:g} is too many: a session takes at most {limit} turns (each resends the "
                           "whole history)", value=turns, limit=MAX_TURNS)
    history = turns * (spec.input_tokens + spec.output_tokens)
    if history > MAX_TOKENS:
        raise FieldProblem("{turns} {value:g} × ({input_tokens} {prompt} + {output_tokens} {answer}) = {total} "
                           "tokens of history, more than the {limit} a prompt may hold: lower {turns} or the "
                           "lengths", value=turns, prompt=spec.input_tokens, answer=spec.output_tokens,
                           total=_n(history), limit=_n(MAX_TOKENS))
    think = Sampled.parse(spec.think_time or "0", "think_time")
    if think.high > MAX_SECONDS:
        raise FieldProblem("{think_time} {value} is too long: a think time is at most {limit:g} s (a week)",
                           value=spec.think_time, limit=MAX_SECONDS)


def check_volume(spec: RunShape) -> None:
    """Refuse a spec whose numbers multiply to more than a step may hold or take (module docstring)."""
    _check_sessions(spec)
    found = step_requests(spec)
    cap = step_cap(spec)
    if found is None and cap is None:
        return  # a trace: its file holds its length
    if found is None:  # a closed loop for a duration: its warm-up first, then it counts up to its cap
        warm = f"{{warmup}} {spec.warmup}"
        found = (float(spec.warmup), warm, ("warmup",))
    requests, words, lower = found
    if requests > MAX_STEP_REQUESTS:
        raise FieldProblem(words + " = {total} requests a step, more than the {limit} a step may hold: lower "
                           + " or ".join("{" + f + "}" for f in lower), total=_n(requests), limit=_n(MAX_STEP_REQUESTS))
    _check_step_time(spec)
    held = requests * record_bytes(spec)
    if held > MAX_STEP_RECORD_BYTES:
        raise FieldProblem(words + " = {count} requests × ({record} B + {output_tokens} {tokens} × {event} B an "
                           "answer token) = {total} GiB of records a step, more than the {limit:g} GiB a step may "
                           "keep: lower {output_tokens} or the requests", count=_n(requests), record=RECORD_BYTES,
                           tokens=spec.output_tokens, event=EVENT_BYTES, total=f"{held / 2**30:.3g}",
                           limit=MAX_STEP_RECORD_BYTES / 2**30)
    _check_prompts(spec, requests if cap is None else float(cap + spec.warmup))


def record_bytes(spec: RunShape) -> int:
    """About what one request's record of ``spec`` keeps: `RECORD_BYTES`, and `EVENT_BYTES` per answer token
    of a streamed answer (an embeddings or rerank answer has none)."""
    from tokometer.protocols.registry import PROTOCOLS

    streams = PROTOCOLS[spec.api].streams if spec.api in PROTOCOLS else True
    return RECORD_BYTES + (EVENT_BYTES * spec.output_tokens if streams else 0)


def step_cap(spec: RunShape) -> int | None:
    """Where a closed loop given only ``--duration`` stops counting: the requests whose records fit
    `MAX_STEP_RECORD_BYTES` (and `MAX_STEP_REQUESTS`); None for any other step, which its count, its rate over
    its duration, its sessions or its trace bound (`check_volume`)."""
    if spec.requests is not None or spec.duration_s is None or spec.rate or spec.sessions is not None \
            or spec.trace is not None:
        return None
    return max(min(MAX_STEP_REQUESTS, MAX_STEP_RECORD_BYTES // record_bytes(spec)) - spec.warmup, 1)


def _check_step_time(spec: RunShape) -> None:
    """``-n`` requests at the lowest rate take at least ``n / rate`` seconds: at most a week."""
    if not spec.rate or spec.requests is None or spec.duration_s is not None or spec.find_max is not None:
        return
    rate = min(spec.rate)
    seconds = (spec.requests + spec.warmup) / rate
    if seconds > MAX_SECONDS:
        raise FieldProblem("{requests} {n} ÷ {rate} {rate_value:g}/s = {seconds:.3g} s a step, longer than the "
                           "{limit:g} s (a week) a step may take: raise {rate}, lower {requests} or give {duration_s}",
                           n=spec.requests + spec.warmup, rate_value=rate, seconds=seconds, limit=MAX_SECONDS)


def _check_prompts(spec: RunShape, requests: float) -> None:
    """Synthetic prompts are made before the run: their tokens must fit memory."""
    if spec.dataset is not None or spec.prompt is not None or spec.trace is not None or spec.sessions is not None:
        return
    from tokometer.datasets.images import ImageSpec, parse_image_size
    from tokometer.datasets.synthetic import SyntheticSource

    images = ImageSpec(spec.images, *parse_image_size(spec.image_size)) if spec.images else None
    unique = SyntheticSource(2, images=images).unique  # the source's own count of distinct prompts
    steps = max(len(spec.concurrency) or len(spec.rate), 1) * spec.repeat
    prompts = min(requests * steps * spec.batch_size, unique)
    total = prompts * spec.input_tokens
    if total > MAX_PROMPT_TOKENS_MADE:
        raise FieldProblem("{count} distinct prompts × {input_tokens} {tokens} = {total} prompt tokens made before "
                           "the run, more than the {limit} it may make: lower {input_tokens} or the requests",
                           count=_n(prompts), tokens=spec.input_tokens, total=_n(total),
                           limit=_n(MAX_PROMPT_TOKENS_MADE))
    if images is not None:
        size = prompts * images.count * images.width * images.height * IMAGE_BYTES_PER_PIXEL
        if size > MAX_IMAGE_BYTES_MADE:
            raise FieldProblem("{count} distinct prompts × {images} {n} × {image_size} {size} at about {per:g} B a "
                               "pixel = {total} GiB of images made before the run, more than the {limit:g} GiB it "
                               "may make: lower {images} or {image_size}", count=_n(prompts), n=images.count,
                               size=spec.image_size, per=IMAGE_BYTES_PER_PIXEL, total=f"{size / 2**30:.3g}",
                               limit=MAX_IMAGE_BYTES_MADE / 2**30)
