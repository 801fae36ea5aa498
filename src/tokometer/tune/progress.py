"""What a user sees while a tune runs: a progress display across the variants with the time left, the requests of
the step in progress, and one line per variant as it finishes.

`TuneProgress` is both the sweep's `tokometer.tune.sweep.TuneObserver` and the bench run's observer (each
variant's run reports its steps and requests to it). The display is rich's, like ``bench``'s `LiveProgress`; it
is off with ``--quiet`` or when the console is not a terminal, and the one-line summaries are printed either way
(`variant_line`). The time left is the mean time of the variants finished in this sweep times those to go (none
before the first has finished).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from tokometer.tune.outcome import Variant, VariantOutcome
from tokometer.util.shown import clipped

if TYPE_CHECKING:
    from rich.console import Console

    from tokometer.benchmark.results import StepResult
    from tokometer.load.profiles import LoadStep
    from tokometer.load.runner import StepLimits
    from tokometer.metrics import StepSummary
    from tokometer.records import RequestRecord
    from tokometer.store import ResultStore

__all__ = ["TuneProgress", "variant_line"]


class TuneProgress:
    """Progress across the variants (with the time left) and through the current step's requests."""

    def __init__(self, console: Console, *, live: bool, store: ResultStore | None = None) -> None:
        self.console = console
        self.store = store
        self.progress = Progress(TextColumn("{task.description}", style="bold", markup=False), BarColumn(),
                                 MofNCompleteColumn(), TextColumn("{task.fields[detail]}", markup=False),
                                 TimeElapsedColumn(), console=console, transient=True, refresh_per_second=4,
                                 disable=not live)
        self._variants: TaskID | None = None
        self._step: TaskID | None = None
        self._started = time.monotonic()
        self._took: list[float] = []
        self._done = self._failed = 0

    def __enter__(self) -> TuneProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    # -- the sweep -------------------------------------------------------------------------------------------
    def variant_started(self, variant: Variant, done: int, total: int) -> None:
        self._started = time.monotonic()
        detail = f"{variant.name}; {self._time_left(total - done)}"
        if self._variants is None:
            self._variants = self.progress.add_task("variants", total=total, completed=done, detail=detail)
        else:
            self.progress.update(self._variants, completed=done, detail=detail)

    def variant_finished(self, outcome: VariantOutcome) -> None:
        self._took.append(time.monotonic() - self._started)
        if self._variants is not None:
            self.progress.advance(self._variants)
        if self._step is not None:
            self.progress.remove_task(self._step)
            self._step = None
        self.console.print(variant_line(outcome, self._summary(outcome)), highlight=False, markup=False)

    def note(self, message: str) -> None:
        self.console.print(f"note: {message}", highlight=False, markup=False)

    def _time_left(self, remaining: int) -> str:
        if not self._took:
            return "time left: after the first variant"
        seconds = sum(self._took) / len(self._took) * remaining
        return f"about {_duration(seconds)} left"

    def _summary(self, outcome: VariantOutcome) -> StepSummary | None:
        """The headline step's summary of the variant's run, read back from the store: the step of the highest
        output throughput (None when the store cannot say)."""
        from tokometer.util.errors import StoreError

        if self.store is None or outcome.run_id is None:
            return None
        try:
            run = self.store.run(outcome.run_id)
        except StoreError:
            return None
        summaries = [s.summary for s in run.steps if s.summary is not None] if run is not None else []
        return max(summaries, key=lambda s: s.output_throughput_tok_s, default=None)

    # -- the bench run of the variant in progress --------------------------------------------------------------
    def step_started(self, index: int, step: LoadStep, limits: StepLimits) -> None:
        self._done = self._failed = 0
        if self._step is not None:
            self.progress.remove_task(self._step)
        self._step = self.progress.add_task(f"  step {index + 1}: {step.describe()}", total=limits.total,
                                            detail="")

    def request_done(self, record: RequestRecord) -> None:
        self._done += 1
        self._failed += 0 if record.ok else 1
        if self._step is not None:
            self.progress.update(self._step, completed=self._done, detail=f"{self._failed} failed")

    def step_finished(self, result: StepResult) -> None:
        pass


def variant_line(outcome: VariantOutcome, summary: StepSummary | None) -> str:
    """One line for a finished variant: start-up, headline throughput (``summary``: its run's step of the highest
    output throughput), that step's TTFT p50/p99 and decode speed per request (p50)."""
    name, status = outcome.variant.name, outcome.status
    if status == "failed to start":
        error = outcome.error or ""
        words = [line for line in (outcome.engine_last_words or "").strip().splitlines() if line not in error]
        return f"{name}: failed to start: {error}" + (f" (engine: {clipped(words[-1])})" if words else "")
    parts = [f"start-up {outcome.startup.first_s:.1f} s" if outcome.startup else "start-up -"]
    if summary is not None:
        ttft, decode = summary.distributions.get("ttft_ms"), summary.distributions.get("decode_speed_tok_s")
        parts.append(f"{summary.output_throughput_tok_s:,.1f} tok/s")
        parts.append(f"TTFT p50 {_ms(ttft.p50 if ttft else None)} p99 {_ms(ttft.p99 if ttft else None)}")
        parts.append(f"decode {_number(decode.p50 if decode else None)} tok/s/request")
    if outcome.run_id is not None:
        parts.append(f"run {outcome.run_id}")
    tail = f" ({outcome.error})" if outcome.error else ""
    return f"{name}: {status if status != 'finished' else 'done'}: {', '.join(parts)}{tail}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} ms"


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def _duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
