"""`ImportedRun`: another tool's result read into tokometer's records, and the guarded file reader.

A reader (one module per tool: `vllm_bench`, `guidellm`, `aiperf`) turns the tool's per-request data into
`RequestRecord` s, so every metric of the imported run comes from `tokometer.metrics` — the same definitions
as a run tokometer measured itself. What the tool's data cannot give (per-chunk stamps, token counts per
chunk, when a request was due) is said in ``not_recomputed``; where tokometer's definition differs from the
tool's, ``differences`` says how (docs/reference/tool-definitions.md). The tool's own headline numbers are
kept beside, in ``tool_summary``, for the user to set against the recomputed ones.

Files are untrusted: `tokometer.imports.jsonstream` reads at most `MAX_IMPORT_BYTES`, as it parses, within a
fixed memory budget, refuses nesting deeper than `MAX_NESTING`, and every reader reads every value through
the helpers here, which raise `ImportFormatError`
(a `ConfigError`: one line naming the file and the field, exit status 2) for a value of the wrong type or
beyond its range instead of failing somewhere later: times up to `MAX_STAMP_NS`, durations up to a week
(`MAX_DURATION_NS`), counts up to `tokometer.protocols.common.numbers.MAX_COUNT`, rates up to `MAX_RATE_PER_S`, and at
most `MAX_EVENTS` requests and chunk gaps in a file (`EventCount`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from tokometer.protocols.common.numbers import MAX_COUNT, MAX_DURATION_MS
from tokometer.records import RequestRecord, TokenSource
from tokometer.util.errors import ConfigError
from tokometer.util.shown import clipped, value_shown

__all__ = ["MAX_DURATION_NS", "MAX_EVENTS", "MAX_IMPORT_BYTES", "MAX_NESTING", "MAX_RATE_PER_S", "MAX_STAMP_NS",
           "UNIT_NS", "EventCount", "ImportFormatError", "ImportedRun", "ImportedStep", "as_float", "as_int",
           "as_list", "as_map", "as_text", "check_nesting", "check_span", "check_version", "date_run", "duration_ns",
           "stamp_ns", "streamed_record", "wall_clock"]

MAX_IMPORT_BYTES: Final = 256 * 1024 * 1024
"""The largest file imported (a vLLM ``--save-detailed`` result of 10,000 requests is ~60 MiB)."""
MAX_NESTING: Final = 32
"""The deepest nesting of JSON arrays and objects accepted (the tools' files nest at most ~8 deep)."""
MAX_EVENTS: Final = 5_000_000
"""The most requests and chunk gaps one file may hold, all steps, statuses and requests together: each costs
~160 bytes in the records beside ~100 in the parsed file (measured on a vLLM file), ~1.3 GB at the limit."""
MAX_STAMP_NS: Final = 2**62
"""The latest time a file may give, in nanoseconds of its clock (a wall clock's year 2116): half the store's
64-bit integers, so a stamp plus a request's duration still fits."""
MAX_DURATION_NS: Final = round(MAX_DURATION_MS * 1e6)
"""The longest a request may take (`MAX_DURATION_MS`, a week), in nanoseconds."""
MAX_RATE_PER_S: Final = 1e9
"""The highest rate (requests or tokens a second) a file may give: beyond any server."""
UNIT_NS: Final = {"s": 1e9, "ms": 1e6, "ns": 1}
"""Nanoseconds in each unit the tools' files give times in."""
_EARLIEST_S: Final = 946_684_800
"""2000-01-01 in seconds since the epoch: an earlier "date" in a file is a monotonic clock's reading."""


class ImportFormatError(ConfigError):
    """A file that is not, or not quite, what the tool writes: named, with the first thing wrong."""


@dataclass
class ImportedStep:
    """One load point of the tool's run: its ``load`` entry and its requests."""

    load: dict[str, Any]
    """The step's ``load`` entry (`tokometer.load.profiles.LoadStep.label`'s shape where the tool said)."""
    records: list[RequestRecord]
    summary: dict[str, Any] | None = None
    """The step's summary as the file gives it (`StepSummary`'s JSON), for a file of statistics without requests
    (an llm-d report); None: summarised from ``records``."""
    server: dict[str, Any] | None = None
    """What the server did during the step, where the file says (the step's ``server`` window)."""


@dataclass
class ImportedRun:
    """One run of another tool, as tokometer records plus what the tool itself said."""

    tool: str
    """``vllm-bench-serve``, ``guidellm`` or ``aiperf``."""
    tool_version: str | None
    source: str
    """The file it was read from."""
    model: str
    target: str
    steps: list[ImportedStep]
    api: str = "openai-chat"
    """The protocol the tool spoke, as ``bench --api`` names it: runs of several tools over one protocol compare."""
    tool_summary: dict[str, float] = field(default_factory=dict)
    """The tool's own headline numbers, as it computed them under its own definitions (of its first step):
    ``ttft_p50_ms``, ``tpot_p50_ms``, ``itl_p50_ms``, ``e2e_p50_ms``, ``chunk_gap_p50_ms``, ``output_tok_s``
    where the tool reports them — each the tool's metric of that name, not necessarily tokometer's."""
    agrees: tuple[str, ...] = ()
    """The metrics (``ttft``, ``tpot``, ``itl``, ``chunk_gap``, ``e2e``) whose ``tool_summary`` value is defined
    as tokometer's, so the two should match; every other one is the tool's own definition."""
    not_recomputed: dict[str, str] = field(default_factory=dict)
    """Metric -> why the tool's per-request data does not allow tokometer's definition of it."""
    differences: dict[str, str] = field(default_factory=dict)
    """Metric -> how the tool's definition differs from tokometer's (the recomputed value is tokometer's)."""
    started_at: str | None = None
    """When the tool's run started (UTC, ISO 8601, as the store dates runs): from the file where it says
    (`dated_from` tells from what), else the file's modification time; None until `date_run` has set it."""
    dated_from: str = ""
    """Where `started_at` came from, in words (the tool's own field, or the file's modification time)."""
    warnings: list[str] = field(default_factory=list)
    """What the user should know about the import (a version of the tool the reader was never checked on)."""
    engine: dict[str, Any] | None = None
    """The engine's identity as far as the file says (its name, version, start-up), saved as the run's engine."""

    @property
    def records(self) -> list[RequestRecord]:
        """Every step's records, in step order."""
        return [r for step in self.steps for r in step.records]

    def provenance(self) -> dict[str, Any]:
        """What is saved with the run (its ``spec.import``): the tool, its version and what was not redone."""
        return {"tool": self.tool, "tool_version": self.tool_version, "source": self.source,
                "tool_summary": self.tool_summary, "agrees": list(self.agrees), "not_recomputed": self.not_recomputed,
                "differences": self.differences, "dated_from": self.dated_from, "warnings": self.warnings}



def wall_clock(seconds: float | None, said_by: str) -> tuple[str, str] | None:
    """``(started_at, dated_from)`` for a wall-clock time in seconds since the epoch that a file gives (said by
    ``said_by``), or None when it is missing or no plausible date (before 2000 or after tomorrow: a monotonic
    clock's reading, not a date)."""
    if seconds is None or not _EARLIEST_S <= seconds <= time.time() + 86_400:
        return None
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds"), said_by


def date_run(run: ImportedRun, path: Path) -> None:
    """Date ``run`` by the file's modification time where its reader found no date in it."""
    if run.started_at is not None:
        return
    try:
        mtime = path.stat().st_mtime
    except OSError:
        return
    run.started_at = datetime.fromtimestamp(mtime, UTC).isoformat(timespec="milliseconds")
    run.dated_from = "the file's modification time (the file gives no date)"


def check_version(run: ImportedRun, checked: tuple[str, ...]) -> None:
    """Warn (in ``run.warnings``) when the file names a version of its tool the reader was not checked on."""
    if run.tool_version is not None and run.tool_version not in checked:
        run.warnings.append(f"{run.tool} {clipped(run.tool_version)} wrote this file; the reader was checked on "
                            f"{', '.join(checked)} only: a field that version renamed or added is not read, so set "
                            "the numbers against the tool's own")


def check_nesting(data: Any, path: Path | str) -> None:
    """ImportFormatError when ``data`` nests arrays/objects deeper than `MAX_NESTING` (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, Mapping):
            children: Sequence[Any] | Any = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth > MAX_NESTING:
            raise ImportFormatError(f"{path}: nested deeper than {MAX_NESTING} levels: not imported")
        stack.extend((child, depth + 1) for child in children)


class EventCount:
    """The requests and chunk gaps read so far from one file: ImportFormatError once they pass `MAX_EVENTS`."""

    def __init__(self, path: Path | str) -> None:
        self.path = path
        self.seen = 0

    def add(self, count: int) -> None:
        """``count`` more requests or chunk gaps."""
        self.seen += count
        if self.seen > MAX_EVENTS:
            raise ImportFormatError(f"{self.path} holds more than {MAX_EVENTS:,} requests and chunk gaps in all: "
                                    "not imported")


def _where(path: Path | str, key: str) -> str:
    return f"{path}: {key}"


def as_map(value: Any, path: Path | str, key: str, *, optional: bool = False) -> Mapping[str, Any]:
    """An object (an empty one when ``optional`` and absent)."""
    if value is None and optional:
        return {}
    if not isinstance(value, Mapping):
        raise ImportFormatError(f"{_where(path, key)} should be an object, not {type(value).__name__}")
    return value


def as_list(value: Any, path: Path | str, key: str, *, length: int | None = None,
            optional: bool = False) -> list[Any]:
    """A list of at most `MAX_EVENTS` entries, ``length`` of them when given (empty when ``optional`` and
    absent)."""
    if value is None and optional:
        return []
    if not isinstance(value, list):
        raise ImportFormatError(f"{_where(path, key)} should be a list, not {type(value).__name__}")
    if len(value) > MAX_EVENTS:
        raise ImportFormatError(f"{_where(path, key)} holds more than {MAX_EVENTS:,} entries: not imported")
    if length is not None and len(value) != length:
        raise ImportFormatError(f"{_where(path, key)} has {len(value)} entries, not {length} like the others")
    return value


def as_text(value: Any, path: Path | str, key: str, *, optional: bool = False) -> str | None:
    """A string (None when ``optional`` and absent)."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise ImportFormatError(f"{_where(path, key)} should be text, not {type(value).__name__}")
    return value


def as_float(value: Any, path: Path | str, key: str, *, most: float, optional: bool = False,
             positive: bool = False, unit: str = "") -> float | None:
    """A finite number from 0 (above it when ``positive``) to ``most`` (in ``unit``, for the message); None when
    ``optional`` and absent. A bool is not a number; an integer of any size is compared exactly, never
    converted first."""
    if value is None and optional:
        return None
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= most
            or (positive and value == 0)):
        kind = "positive" if positive else "non-negative"
        raise ImportFormatError(f"{_where(path, key)} should be a {kind} number (at most {most:g}{unit}), "
                                f"not {value_shown(value)}")
    return float(value)


def as_int(value: Any, path: Path | str, key: str, *, most: int = MAX_COUNT, optional: bool = False,
           positive: bool = False) -> int | None:
    """A whole number from 0 (1 when ``positive``) to ``most`` (a count: `MAX_COUNT`), an integral float too;
    None when ``optional`` and absent. An int is kept exact (ns stamps)."""
    number = as_float(value, path, key, most=most, optional=optional, positive=positive)
    if number is None:
        return None
    if isinstance(value, int):
        return value
    if not number.is_integer():
        raise ImportFormatError(f"{_where(path, key)} should be a whole number, not {value_shown(value)}")
    return int(number)


def _as_ns(value: Any, path: Path | str, key: str, *, unit: str, most_ns: int, optional: bool) -> int | None:
    """A time in ``unit`` (a key of `UNIT_NS`) as whole nanoseconds, from 0 to ``most_ns``."""
    scale = UNIT_NS[unit]
    number = as_float(value, path, key, most=most_ns / scale, optional=optional, unit=f" {unit}")
    if number is None:
        return None
    if isinstance(value, int) and scale == 1:
        return value
    return min(round(number * scale), most_ns)


def stamp_ns(value: Any, path: Path | str, key: str, *, unit: str, optional: bool = False) -> int | None:
    """A point in time in ``unit`` (s, ms, ns) as nanoseconds, at most `MAX_STAMP_NS`."""
    return _as_ns(value, path, key, unit=unit, most_ns=MAX_STAMP_NS, optional=optional)


def duration_ns(value: Any, path: Path | str, key: str, *, unit: str, optional: bool = False) -> int | None:
    """A duration in ``unit`` (s, ms, ns) as nanoseconds, at most `MAX_DURATION_NS`."""
    return _as_ns(value, path, key, unit=unit, most_ns=MAX_DURATION_NS, optional=optional)


def check_span(start_ns: int, end_ns: int, where: str) -> None:
    """ImportFormatError unless a request ends no earlier than it starts and within `MAX_DURATION_NS`."""
    if not 0 <= end_ns - start_ns <= MAX_DURATION_NS:
        raise ImportFormatError(f"{where}: its end is {(end_ns - start_ns) / 1e9:.6g} s after its start: a "
                                f"request takes from 0 to {MAX_DURATION_NS / 1e9:g} s")


def streamed_record(index: int, *, where: str, sent_ns: int, ttft_ns: int, gaps_ns: Sequence[int], end_ns: int,
                    output_tokens: int, input_tokens: int | None, due_ns: int = 0, connect_ns: int = 0,
                    step: int = 0, output_source: TokenSource = "usage") -> RequestRecord:
    """A successful streamed request from a tool's stamps: sent, first chunk ``ttft_ns`` later, then one chunk
    after each gap of ``gaps_ns``. Tokens per chunk are not known: the first chunk is taken to carry one token
    and the others an equal share of the rest, which makes `tokometer.metrics.request.tpot_ns` exactly
    ``(last - first) / (output_tokens - 1)``. ImportFormatError (naming ``where``) for a request that ends
    before it starts or lasts longer than `MAX_DURATION_NS`."""
    stamps = [sent_ns + ttft_ns]
    for gap in gaps_ns:
        stamps.append(stamps[-1] + gap)
    check_span(sent_ns, max(end_ns, stamps[-1]), where)
    later = (output_tokens - 1) / len(gaps_ns) if gaps_ns and output_tokens > 1 else 0.0
    return RequestRecord(index=index, step=step, due_ns=due_ns or sent_ns, connect_ns=connect_ns, sent_ns=sent_ns,
                         first_byte_ns=stamps[0], first_token_ns=stamps[0], last_token_ns=stamps[-1],
                         end_ns=max(end_ns, stamps[-1]), event_ns=stamps,
                         event_tokens=[float(min(output_tokens, 1))] + [later] * len(gaps_ns),
                         chunk_count=len(stamps), input_tokens=input_tokens,
                         input_tokens_source="usage" if input_tokens is not None else None,
                         output_tokens=output_tokens, output_tokens_source=output_source, status=200,
                         finish_reason="unknown")
