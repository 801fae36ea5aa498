"""What a user sees of a tune: one line per finished variant, and the display across variants (off without a
terminal: the lines are printed either way)."""

from __future__ import annotations

import io

from rich.console import Console

from tokometer.metrics import summarize
from tokometer.records import RequestRecord
from tokometer.tune.outcome import Startup, Variant, VariantOutcome
from tokometer.tune.progress import TuneProgress, variant_line

MS = 1_000_000


def _record(index: int, ttft_ms: int) -> RequestRecord:
    first = ttft_ms * MS
    return RequestRecord(index=index, sent_ns=1, first_token_ns=1 + first, last_token_ns=1 + first + 90 * MS,
                         end_ns=2 + first + 90 * MS, output_tokens=10, chunk_count=10, status=200,
                         event_ns=[1 + first + i * 10 * MS for i in range(10)], event_tokens=[1.0] * 10)


def test_a_finished_variant_in_one_line() -> None:
    summary = summarize([_record(0, 100), _record(1, 300)])
    outcome = VariantOutcome(Variant(1, "parallel=2", {"parallel": "2"}, ("parallel",)), "finished", run_id=7,
                             startup=Startup(2.25, 1.5))
    line = variant_line(outcome, summary)
    assert line.startswith("parallel=2: done: start-up 2.2 s, ") and "run 7" in line
    assert "TTFT p50 200 ms p99 298 ms" in line and "decode 100.0 tok/s/request" in line
    assert variant_line(outcome, None) == "parallel=2: done: start-up 2.2 s, run 7"


def test_a_variant_that_did_not_start_says_the_engines_last_words() -> None:
    outcome = VariantOutcome(Variant(2, "bad", {"x": "1"}, ("x",)), "failed to start", error="it exited",
                             engine_last_words="loading\nerror: invalid argument: --x")
    assert variant_line(outcome, None) == "bad: failed to start: it exited (engine: error: invalid argument: --x)"


def test_without_a_terminal_only_the_lines_are_printed() -> None:
    out = io.StringIO()
    console = Console(file=out, width=200)
    variant = Variant(0, "baseline", {})
    with TuneProgress(console, live=False) as progress:
        progress.variant_started(variant, 0, 2)
        progress.variant_finished(VariantOutcome(variant, "interrupted", startup=Startup(1.0)))
        progress.note("quality skipped")
    assert out.getvalue().splitlines() == ["baseline: interrupted: start-up 1.0 s", "note: quality skipped"]


def test_the_engines_words_are_not_said_twice() -> None:
    outcome = VariantOutcome(Variant(2, "bad", {"x": "1"}, ("x",)), "failed to start",
                             error="it exited; its log ends: error: invalid argument: --x",
                             engine_last_words="error: invalid argument: --x")
    assert variant_line(outcome, None) == "bad: failed to start: it exited; its log ends: error: invalid argument: --x"


def test_on_a_terminal_the_display_runs_through_variants_and_steps() -> None:
    from tokometer.load.profiles import LoadStep
    from tokometer.load.runner import StepLimits

    out = io.StringIO()
    console = Console(file=out, width=120, force_terminal=True)
    first, second = Variant(0, "baseline", {}), Variant(1, "parallel=2", {"parallel": "2"}, ("parallel",))
    with TuneProgress(console, live=True) as progress:
        for done, variant in enumerate((first, second)):
            progress.variant_started(variant, done, 2)
            progress.step_started(0, LoadStep("concurrency", concurrency=1), StepLimits(4, None))
            progress.request_done(_record(0, 100))
            progress.variant_finished(VariantOutcome(variant, "finished", startup=Startup(1.0)))
        assert progress._took and "left" in progress._time_left(1)
    assert "parallel=2: done: start-up 1.0 s" in out.getvalue()


def test_the_display_shows_a_variant_s_name_with_brackets_as_it_is() -> None:
    """The name is the user's (a flag's value): the progress columns read no markup in it."""
    out = io.StringIO()
    console = Console(file=out, width=120, force_terminal=True)
    variant = Variant(0, "ctx=[/x][bold]8k", {})
    with TuneProgress(console, live=True) as progress:
        progress.variant_started(variant, 0, 1)
        progress.progress.refresh()
        progress.variant_finished(VariantOutcome(variant, "finished", startup=Startup(1.0)))
    assert "ctx=[/x][bold]8k; time left: after the first variant" in out.getvalue()
    assert "ctx=[/x][bold]8k: done: start-up 1.0 s" in out.getvalue()
