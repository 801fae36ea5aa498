"""Every bound a number from outside is held to, each defined once here: command-line options, config keys
(the gateway's, the simulator's) and the environment variables that set them all take their range from this
module, and are checked against it before any work starts.

The kinds of number, each an ``Annotated`` type a spec's field is declared with (pydantic checks it; a
command's option takes the field's bound, `tokometer.cli.specoption`):

- `Seconds` (a timeout, an interval, a duration): from `MIN_SECONDS` (1 ms) to `MAX_SECONDS` (a week);
  `Millis` the same in milliseconds; `Delay` a wait that may be 0;
- `Requests` (requests or sessions a step sends): 1 to `MAX_STEP_REQUESTS`; `Concurrency`: 1 to
  `MAX_CONCURRENCY`; `Rate` (requests a second): `MIN_RATE` to `MAX_RATE`;
- `Tokens` (a prompt's or an answer's length, a context window): 1 to `MAX_TOKENS`;
- `Count` (entries, slots, sequences, retries' kin): 1 to `MAX_COUNT`; `Bytes`: 1 to `MAX_BYTES`;
- `Factor` (a multiplier or a share's kin): finite, at most `MAX_FACTOR`.

Every float is finite: NaN passes any ``<=`` test it is put to, and infinity overflowed the arithmetic that
turned it into nanoseconds (`OverflowError`), so `FINITE` refuses both, on every kind.

What a run's numbers multiply to is bounded too (`tokometer.benchmark.volume`): requests a step sends,
including what a rate over a duration and a ramp's rise add up to (`MAX_STEP_REQUESTS`), the bytes of the records a
step keeps (`MAX_STEP_RECORD_BYTES`), the prompt tokens made before the run
(`MAX_PROMPT_TOKENS_MADE`) and the time a step is planned to take (`MAX_SECONDS`).

- `MAX_GPUS`: the most GPUs a run is taken to have: ``bench --gpus``, the spec's saved ``gpus``, the product
  of an engine's parallel sizes (`tokometer.gpu_count.gpu_count`);
- `MIN_SLICE_S`, `MAX_SLICE_S`: the shortest and the longest time slice (``bench --time-slice``, a ramp
  search's tenths of its ramp, a width read back from a store: `tokometer.metrics.window`).
"""

from __future__ import annotations

from typing import Annotated, Final

from annotated_types import Ge, Gt, Le
from pydantic import AllowInfNan

__all__ = [
           "EVENT_BYTES",
           "FINITE",
           "IMAGE_BYTES_PER_PIXEL",
           "MAX_ADAPTERS",
           "MAX_BUDGET_TOKENS",
           "MAX_BYTES",
           "MAX_CONCURRENCY",
           "MAX_COUNT",
           "MAX_CREDITS",
           "MAX_FACTOR",
           "MAX_GPUS",
           "MAX_IMAGE_BYTES_MADE",
           "MAX_LEVELS",
           "MAX_MEMORY_GIB",
           "MAX_PROMPT_TOKENS_MADE",
           "MAX_RATE",
           "MAX_RESPONSE_BYTES",
           "MAX_SECONDS",
           "MAX_SLICE_S",
           "MAX_STEP_RECORD_BYTES",
           "MAX_STEP_REQUESTS",
           "MAX_TEMPERATURE",
           "MAX_THREADS",
           "MAX_TOKENS",
           "MAX_TOKENS_PER_S",
           "MAX_TURNS",
           "MIN_RATE",
           "MIN_SECONDS",
           "MIN_SLICE_S",
           "RECORD_BYTES",
           "Bytes",
           "Concurrency",
           "Count",
           "Delay",
           "Factor",
           "Millis",
           "Rate",
           "Requests",
           "Seconds",
           "Tokens",
]

MAX_GPUS: Final = 65536
MIN_SLICE_S: Final = 0.001
"""1 ms: a slice of 0.1 ns was 0 ns wide once rounded and divided by zero."""
MAX_SLICE_S: Final = 1_000_000.0
"""1,000,000 s (11.6 days), longer than any step is expected to run."""

MIN_SECONDS: Final = 0.001
"""1 ms: the shortest timeout, interval or duration (0 would never wait, and 1e-300 s is 0 ns)."""
MAX_SECONDS: Final = 604_800.0
"""A week: the longest timeout, interval or duration, and the longest a step is planned to take."""
MAX_STEP_REQUESTS: Final = 5_000_000
"""Requests one step may send, warm-up included (each keeps a record of some hundred bytes until the step is
summarised): ``-n``, ``--warmup``, ``--rate`` x ``--duration``, a ramp's rise."""
MAX_CONCURRENCY: Final = 100_000
"""Requests in flight at once (each holds a connection and a task)."""
MIN_RATE: Final = 1e-6
MAX_RATE: Final = 1e9
"""Requests a second: from one in 11.6 days to a billion (a ramp's start and end too)."""
MAX_TOKENS: Final = 16_777_216
"""A prompt's or an answer's length, a context window: 16 Mi tokens, beyond any model's context."""
RECORD_BYTES: Final = 1024
"""What a request's record holds besides its answer's events, about (measured: 1 KiB with its stamps, counts
and a short error)."""
EVENT_BYTES: Final = 88
"""What a record holds per answer token (measured: an arrival stamp, its token count and its text, 88 B)."""
MAX_STEP_RECORD_BYTES: Final = 2 * 2**30
"""The records one step keeps until it is summarised: requests x (`RECORD_BYTES` + `EVENT_BYTES` x
``--output-tokens``) at most 2 GiB (a closed loop given only ``--duration`` ends once it has sent that many)."""
MAX_PROMPT_TOKENS_MADE: Final = 200_000_000
"""Prompt tokens made before the run starts (distinct prompts x ``--input-tokens`` x ``--batch-size``; about
6.5 B each, measured: 1.3 GB)."""
MAX_TURNS: Final = 1000
"""Turns of one multi-turn session (each resends the whole history)."""
MAX_ADAPTERS: Final = 256
"""LoRA adapters one simulator serves (``sim --lora``), and so at most loads at once (``--max-loras``)."""
MAX_LEVELS: Final = 1000
"""Loads one sweep lists (``-c 1,2,4,...``, ``-r ...``); with ``--repeat`` (at most 100) the steps of a run."""
IMAGE_BYTES_PER_PIXEL: Final = 0.05
"""An encoded synthetic image's bytes a pixel, about (measured: 0.044 for a 4096x4096 JPEG, 0.03 PNG)."""
MAX_IMAGE_BYTES_MADE: Final = 2**30
"""Synthetic images made before the run (distinct prompts x ``--images`` x pixels x `IMAGE_BYTES_PER_PIXEL`)."""
MAX_COUNT: Final = 10_000_000
"""Entries, slots, sequences, messages: anything counted that is kept in memory."""
MAX_BYTES: Final = 2**30
"""A size in bytes (a body, an event, a header block): 1 GiB."""
MAX_RESPONSE_BYTES: Final = 2**36
"""A response's read budget (``bench --max-response-bytes``, an upstream's ``max_response_bytes``): 64 GiB, past
what any answer of `MAX_TOKENS` tokens costs on the wire."""
MAX_FACTOR: Final = 1_000_000.0
"""A multiplier (a time scale, a slow-down per request, a speed-up)."""
MAX_PRICE: Final = 1e12
"""A price per million tokens, in USD or in a platform's credits (a credit a token is 1e6)."""
MAX_CREDITS: Final = 1e12
"""A platform's credits per million tokens (credits are worth a small fraction of a cent each)."""
MAX_BUDGET_TOKENS: Final = 10**15
"""A token budget for a period."""
MAX_THREADS: Final = 4096
"""CPU threads an engine is given."""
MAX_MEMORY_GIB: Final = 1_048_576.0
"""Memory in GiB (1 PiB)."""
MAX_TOKENS_PER_S: Final = 1e12
"""A throughput target, tokens a second."""
MAX_TEMPERATURE: Final = 100.0
"""A sampling temperature (servers take 0 to 2; some more)."""

FINITE: Final = AllowInfNan(False)
"""No NaN, no infinity."""

Seconds = Annotated[float, FINITE, Ge(MIN_SECONDS), Le(MAX_SECONDS)]
Delay = Annotated[float, FINITE, Ge(0), Le(MAX_SECONDS)]
"""A wait in seconds that may be 0 (a backoff, a stall)."""
Millis = Annotated[float, FINITE, Ge(0), Le(MAX_SECONDS * 1000)]
Requests = Annotated[int, Ge(1), Le(MAX_STEP_REQUESTS)]
Concurrency = Annotated[int, Ge(1), Le(MAX_CONCURRENCY)]
Rate = Annotated[float, FINITE, Ge(MIN_RATE), Le(MAX_RATE)]
Tokens = Annotated[int, Ge(1), Le(MAX_TOKENS)]
Count = Annotated[int, Ge(1), Le(MAX_COUNT)]
Bytes = Annotated[int, Ge(1), Le(MAX_BYTES)]
Factor = Annotated[float, FINITE, Gt(0), Le(MAX_FACTOR)]
