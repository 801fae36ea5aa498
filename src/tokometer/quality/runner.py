"""``run_quality``: the same prompts to two endpoints, for speed, accuracy and agreement.

Three passes, each endpoint alone in turn (A, then B), so that two servers on one machine never
compete for it while one is measured:

1. **speed and answers**: every item through the project's streaming client
   (`tokometer.client.streamclient.StreamClient`, the one ``bench`` uses), greedy (``temperature 0``),
   ``--concurrency`` at a time, after one warm-up request. TTFT and decode speed per request come
   from `tokometer.metrics.request`; the streamed text is graded against the item's answer
   (`evalset.is_correct`).
2. **token paths**: every item again, one request at a time, not streamed, with the top-k
   log-probabilities of each generated token (`logprobs.LogprobClient.greedy_path`).
3. **teacher forcing** (completions API, when both servers give token ids and tokenize the first
   prompt alike, i.e. two llama.cpp builds of one model): for each item whose paths diverge, B is
   asked for its next-token distribution at each later position of *A's* path.

`agreement.compare_paths` then compares the paths item by item, and `QualityResult` keeps it all.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tokometer.client.streamclient import StreamClient, Target
from tokometer.metrics.request import decode_speed_tok_s, ttft_ns
from tokometer.prompt import Prompt
from tokometer.protocols.common.base import GenerationParams
from tokometer.protocols.registry import create_client, protocol_named
from tokometer.quality.agreement import ItemComparison, TokenStep, compare_paths
from tokometer.quality.endpoints import Endpoint
from tokometer.quality.evalset import EvalItem, is_correct
from tokometer.records import RequestRecord
from tokometer.util.errors import EndpointError

__all__ = ["EndpointRun", "QualityResult", "QualitySpec", "run_quality"]


@dataclass(frozen=True)
class QualitySpec:
    """How to compare: protocol, answer length, top-k, load of the speed pass, teacher forcing."""

    api: str = "openai-completions"
    max_tokens: int = 16
    top_logprobs: int = 10
    concurrency: int = 1
    teacher_forcing: bool = True


@dataclass
class EndpointRun:
    """What one endpoint did: its answers graded, its speed, its token paths."""

    endpoint: Endpoint
    answers: list[str] = field(default_factory=list)
    correct: list[bool] = field(default_factory=list)
    failed: int = 0
    error_examples: list[str] = field(default_factory=list)
    ttft_ms: list[float] = field(default_factory=list)
    decode_tok_s: list[float] = field(default_factory=list)
    output_tokens: int = 0
    speed_pass_s: float = 0.0
    paths: list[list[TokenStep] | None] = field(default_factory=list)
    path_errors: list[str] = field(default_factory=list)

    @property
    def accuracy(self) -> float:
        return sum(self.correct) / len(self.correct) if self.correct else 0.0

    @property
    def ttft_p50_ms(self) -> float | None:
        return statistics.median(self.ttft_ms) if self.ttft_ms else None

    @property
    def decode_p50_tok_s(self) -> float | None:
        return statistics.median(self.decode_tok_s) if self.decode_tok_s else None


@dataclass
class QualityResult:
    """Both endpoints' runs, the items, and the per-item comparison of their token paths."""

    spec: QualitySpec
    items: list[EvalItem]
    a: EndpointRun
    b: EndpointRun
    comparisons: list[ItemComparison | None]
    """Per item; None where either token path is missing (a failed request)."""
    kl_method: str
    seconds: float


def _record_failure(run: EndpointRun, detail: str) -> None:
    run.failed += 1
    if len(run.error_examples) < 3:
        run.error_examples.append(detail)


async def _speed_pass(run: EndpointRun, items: Sequence[EvalItem], spec: QualitySpec) -> None:
    endpoint = run.endpoint
    params = GenerationParams(model=endpoint.model, max_tokens=spec.max_tokens, temperature=0.0)
    client = StreamClient(Target(endpoint.base_url, api_key=endpoint.api_key), create_client(spec.api), params)
    records: list[RequestRecord | None] = [None] * len(items)
    try:
        await client.send(Prompt.from_text(items[0].prompt), RequestRecord(index=-1, warmup=True))
        queue: asyncio.Queue[int] = asyncio.Queue()
        for index in range(len(items)):
            queue.put_nowait(index)

        async def worker() -> None:
            while not queue.empty():
                index = queue.get_nowait()
                records[index] = await client.send(Prompt.from_text(items[index].prompt), RequestRecord(index=index))

        started = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(min(spec.concurrency, len(items)))))
        run.speed_pass_s = time.monotonic() - started
    finally:
        await client.close()
    for item, record in zip(items, records, strict=True):
        assert record is not None
        if not record.ok:
            _record_failure(run, f"{record.error}: {record.error_detail}")
            run.answers.append("")
            run.correct.append(False)
            continue
        run.answers.append(record.output_text)
        run.correct.append(is_correct(record.output_text, item.answer))
        run.output_tokens += record.output_tokens or 0
        ttft = ttft_ns(record)
        if ttft is not None:
            run.ttft_ms.append(ttft / 1e6)
        speed = decode_speed_tok_s(record)
        if speed is not None:
            run.decode_tok_s.append(speed)
    if run.failed == len(items):
        raise EndpointError(f"endpoint {endpoint.label} ({endpoint.describe()}): every request failed, e.g. "
                            f"{run.error_examples[0]}")


async def _paths_pass(run: EndpointRun, items: Sequence[EvalItem], spec: QualitySpec) -> None:
    from tokometer.quality.logprobs import LogprobClient

    client = LogprobClient(run.endpoint, spec.api, spec.top_logprobs, spec.max_tokens)
    try:
        for item in items:
            path, error = await client.greedy_path(item.prompt)
            run.paths.append(path)
            if path is None and len(run.path_errors) < 3:
                run.path_errors.append(error)
    finally:
        await client.close()
    if all(path is None for path in run.paths):
        raise EndpointError(f"endpoint {run.endpoint.label} ({run.endpoint.describe()}) returned no token "
                            f"log-probabilities: {run.path_errors[0]}")


async def _teacher_force(a: EndpointRun, b: EndpointRun, items: Sequence[EvalItem],
                         spec: QualitySpec) -> tuple[list[dict[int, TokenStep]], str]:
    """B's distributions along A's path past each divergence; and the KL method in words."""
    from tokometer.quality.agreement import first_divergence
    from tokometer.quality.logprobs import LogprobClient

    shared = "up to and including the first divergence (both saw the same context there)"
    empty: list[dict[int, TokenStep]] = [{} for _ in items]
    if not spec.teacher_forcing:
        return empty, f"{shared}; teacher forcing was turned off"
    if not protocol_named(spec.api).takes_token_ids:
        return empty, f"{shared}; teacher forcing needs the completions API"
    client_a = LogprobClient(a.endpoint, spec.api, spec.top_logprobs, spec.max_tokens)
    client_b = LogprobClient(b.endpoint, spec.api, spec.top_logprobs, spec.max_tokens)
    forced = empty
    try:
        first_path = next((p for p in a.paths if p), None)
        ids_a, ids_b = await client_a.tokenize(items[0].prompt), await client_b.tokenize(items[0].prompt)
        if ids_a is None or ids_b is None or ids_a != ids_b or not first_path or first_path[0].id is None:
            return empty, (f"{shared}; no teacher forcing: the servers do not both tokenize the prompt alike and "
                           "A's path gives token ids (/tokenize of llama.cpp or vLLM; ids on A's path: llama.cpp)")
        for index, (item, path_a, path_b) in enumerate(zip(items, a.paths, b.paths, strict=True)):
            if not path_a or path_b is None:
                continue
            divergence = first_divergence([s.token for s in path_a], [s.token for s in path_b])
            if divergence is None or divergence + 1 >= len(path_a):
                continue
            prompt_ids = await client_b.tokenize(item.prompt)
            ids = [s.id for s in path_a]
            if prompt_ids is None or any(i is None for i in ids):
                continue
            for position in range(divergence + 1, len(path_a)):
                step = await client_b.forced_step(prompt_ids, [i for i in ids[:position] if i is not None])
                if step is None:
                    break
                forced[index][position] = step
    finally:
        await client_a.close()
        await client_b.close()
    return forced, ("on A's greedy path: up to the first divergence from B's own greedy answer, and past it with B "
                    "teacher-forced on A's tokens (a one-token request whose prompt is the token ids)")


async def run_quality(a: Endpoint, b: Endpoint, items: Sequence[EvalItem], spec: QualitySpec,
                      say: Callable[[str], None] | None = None) -> QualityResult:
    """Run the three passes on ``items`` and compare; EndpointError when an endpoint answers nothing usable."""
    note = say or (lambda _line: None)
    started = time.monotonic()
    runs = EndpointRun(a), EndpointRun(b)
    for run in runs:
        note(f"{run.endpoint.label}: {len(items)} streamed requests for speed and accuracy ({run.endpoint.describe()})")
        await _speed_pass(run, items, spec)
    for run in runs:
        note(f"{run.endpoint.label}: {len(items)} requests for token log-probabilities, one at a time")
        await _paths_pass(run, items, spec)
    note("B: teacher forcing on A's path past each divergence")
    forced, method = await _teacher_force(runs[0], runs[1], items, spec)
    comparisons = [compare_paths(pa, pb, f) if pa is not None and pb is not None else None
                   for pa, pb, f in zip(runs[0].paths, runs[1].paths, forced, strict=True)]
    return QualityResult(spec, list(items), runs[0], runs[1], comparisons, method, time.monotonic() - started)
