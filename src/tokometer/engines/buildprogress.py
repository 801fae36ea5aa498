"""Progress of the one-time llama.cpp build, shown as users expect from a step that takes minutes.

The build reports phases (download, extract, configure, compile, smoke run), one-off lines, and
while compiling the percent cmake itself prints (``[ 42%]`` from Makefiles, ``[84/200]`` from
Ninja). Three ways to show them:

    BuildProgress   nothing (``-q``, and library callers that pass none)
    LineProgress    plain lines for logs (CI, ``| tee``): each phase, and while compiling a line at
                    each 10% step, at most one every 10 s (plus one a minute if cmake goes quiet),
                    with elapsed time and an estimate of what is left
    RichProgress    a live bar on a terminal (rich), with the same figures

``progress_for_stderr()`` picks the rich one when stderr is a terminal, else lines.
"""

from __future__ import annotations

import re
import sys
import time
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

__all__ = [
    "BuildProgress",
    "LineProgress",
    "RichProgress",
    "build_minutes",
    "cmake_percent",
    "duration",
    "progress_for_stderr",
]

_MAKE_PERCENT = re.compile(r"^\[\s*(\d{1,3})%\]")
_NINJA_STEP = re.compile(r"^\[(\d+)/(\d+)\]")


def cmake_percent(line: str) -> float | None:
    """The percent done in one line of ``cmake --build`` output, or None if the line has none."""
    match = _MAKE_PERCENT.match(line)
    if match:
        return min(100.0, float(match.group(1)))
    match = _NINJA_STEP.match(line)
    if match and int(match.group(2)) > 0:
        return min(100.0, 100.0 * int(match.group(1)) / int(match.group(2)))
    return None


def build_minutes(cores: int) -> tuple[int, int]:
    """A rough (low, high) range in minutes for the whole build with ``cores`` compile jobs: 7-12 on 2 cores."""
    cores = max(1, cores)
    return max(1, round(14 / cores)), max(2, round(24 / cores))


def duration(seconds: float) -> str:
    """``45s``, ``3m05s``."""
    seconds = max(0, round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class BuildProgress:
    """Receives the build's progress and shows nothing; the base of the visible kinds."""

    def __init__(self) -> None:
        self._phase_started = time.monotonic()
        self._compile_prior_s = 0.0

    def expect_compile_seconds(self, seconds: float) -> None:
        """The estimate of the compile's length used until cmake's percent says better."""
        self._compile_prior_s = seconds

    def say(self, message: str) -> None:
        """A one-off line (what is about to happen, what was decided)."""

    def phase(self, name: str, detail: str) -> None:
        """A new phase begins: ``name`` is one word (download, extract, configure, compile, smoke)."""
        self._phase_started = time.monotonic()

    def compile_percent(self, percent: float) -> None:
        """cmake reported ``percent`` done."""

    def close(self) -> None:
        """The build ended (either way): stop any live display."""

    def _elapsed(self) -> float:
        return time.monotonic() - self._phase_started

    def _left(self, percent: float) -> str:
        """``about 3m10s left`` from the compile's pace so far (or the prior estimate early on)."""
        elapsed = self._elapsed()
        if percent >= 100:
            return "done"
        if percent >= 3:
            return f"about {duration(elapsed * (100 - percent) / percent)} left"
        if self._compile_prior_s > elapsed:
            return f"about {duration(self._compile_prior_s - elapsed)} left"
        return "estimating time left"


class LineProgress(BuildProgress):
    """Plain lines, for logs: each phase, and compile progress per 10% step at most every 10 s."""

    def __init__(self, stream: TextIO | None = None, prefix: str = "tokometer build: ", min_interval_s: float = 10.0,
                 step_percent: float = 10.0, heartbeat_s: float = 60.0) -> None:
        super().__init__()
        self._stream = stream
        self._prefix = prefix
        self._min_interval_s = min_interval_s
        self._step = step_percent
        self._heartbeat_s = heartbeat_s
        self._last_line = 0.0
        self._last_shown = -1.0

    def _print(self, text: str) -> None:
        print(self._prefix + text, file=self._stream or sys.stderr, flush=True)
        self._last_line = time.monotonic()

    def say(self, message: str) -> None:
        self._print(message)

    def phase(self, name: str, detail: str) -> None:
        super().phase(name, detail)
        self._last_shown = -1.0
        self._print(f"{name}: {detail}")

    def compile_percent(self, percent: float) -> None:
        since = time.monotonic() - self._last_line
        first = self._last_shown < 0
        crossed = first or int(percent // self._step) > int(self._last_shown // self._step)
        due = (crossed and since >= self._min_interval_s) or since >= self._heartbeat_s
        final = percent >= 100 > self._last_shown
        if percent > self._last_shown and (due or final):
            self._last_shown = percent
            self._print(f"compiling: {percent:.0f}% ({duration(self._elapsed())} elapsed, {self._left(percent)})")


class RichProgress(BuildProgress):
    """A live rich display on a terminal: a bar per phase, percent, elapsed time, time left."""

    def __init__(self, console: Console | None = None) -> None:
        super().__init__()
        # Printed verbatim: a phase's detail (a path, cmake's own words) is never read as rich markup or emoji.
        self._console = console or Console(stderr=True, markup=False, emoji=False, highlight=False)
        self._progress = Progress(
            SpinnerColumn(), TextColumn("{task.description}", markup=False), BarColumn(),
            TextColumn("{task.fields[percent]}", markup=False), TimeElapsedColumn(),
            TextColumn("{task.fields[left]}", markup=False), console=self._console)
        self._task: TaskID | None = None
        self._started = False

    def _finish_task(self) -> None:
        if self._task is not None:
            self._progress.update(self._task, completed=100, total=100, percent="", left="")
            self._progress.stop_task(self._task)
            self._task = None

    def say(self, message: str) -> None:
        self._console.print(message, markup=False, highlight=False)

    def phase(self, name: str, detail: str) -> None:
        super().phase(name, detail)
        if not self._started:
            self._progress.start()
            self._started = True
        self._finish_task()
        self._console.print(f"{name}: {detail}", markup=False, highlight=False)
        compiling = name == "compile"
        self._task = self._progress.add_task(name, total=100.0 if compiling else None, percent="",
                                             left=self._left(0.0) if compiling else "")

    def compile_percent(self, percent: float) -> None:
        if self._task is not None:
            self._progress.update(self._task, completed=percent, percent=f"{percent:3.0f}%", left=self._left(percent))

    def close(self) -> None:
        self._finish_task()
        if self._started:
            self._progress.stop()
            self._started = False


def progress_for_stderr() -> BuildProgress:
    """A live rich display when stderr is a terminal, else plain lines (at most one per 10 s while compiling)."""
    return RichProgress() if sys.stderr.isatty() else LineProgress()
