"""Option parsing helpers shared by the commands: lists, durations, ranges, pydantic errors."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import click
from pydantic import BaseModel, ValidationError

from tokometer.util.errors import ConfigError
from tokometer.util.limits import MAX_SECONDS, MIN_SECONDS
from tokometer.util.shown import quoted

__all__ = ["LOG_LEVELS", "PORT", "RUN_ID", "FiniteFloat", "build_spec", "check_output_path", "parse_duration",
           "parse_float_list", "parse_headers", "parse_int_list"]

PORT = click.IntRange(0, 65535)
"""A TCP port; 0 lets the system pick a free one."""
RUN_ID = click.IntRange(1, 2**63 - 1)
"""A saved run's id (the store keeps 64-bit integers)."""
LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")
"""uvicorn's log levels (``uvicorn.config.LOG_LEVELS``, pinned by a test: importing uvicorn here would slow
every command)."""


class FiniteFloat(click.FloatRange):
    """A float in an optional range that is also finite: ``nan`` passes any range check, so say no to it here."""

    name = "number"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number

T = TypeVar("T", bound=BaseModel)



def parse_int_list(value: str | None, option: str, high: int = 2**63 - 1) -> list[int]:
    """``"1,4,16"`` -> ``[1, 4, 16]`` with a one-line error naming the option; each from 1 to ``high`` (by
    default what a 64-bit integer holds: a store's id, a C long)."""
    if value is None:
        return []
    out = []
    for part in value.split(","):
        part = part.strip()
        try:
            number = int(part)
        except ValueError:
            raise click.BadParameter(f"{quoted(part)} is not a whole number (write e.g. 1,4,16)",
                                     param_hint=option) from None
        if number < 1:
            raise click.BadParameter(f"{number} must be at least 1", param_hint=option)
        if number > high:
            raise click.BadParameter(f"{quoted(part)} must be at most {high:,}", param_hint=option)
        out.append(number)
    return out


def parse_float_list(value: str | None, option: str) -> list[float]:
    """``"10,20.5"`` -> ``[10.0, 20.5]``; every value must be positive."""
    if value is None:
        return []
    out = []
    for part in value.split(","):
        part = part.strip()
        try:
            number = float(part)
        except ValueError:
            raise click.BadParameter(f"{part!r} is not a number (write e.g. 10,20)", param_hint=option) from None
        if not math.isfinite(number):
            raise click.BadParameter(f"{quoted(part)} is not a finite number (write e.g. 10,20)",
                                     param_hint=option)
        if not number > 0:
            raise click.BadParameter(f"{part} must be positive", param_hint=option)
        out.append(number)
    return out


def parse_duration(value: str | None, option: str, *, bounded: bool = False) -> float | None:
    """``"90"``, ``"90s"``, ``"1.5m"``, ``"500ms"`` -> seconds. One too long for a float is refused; ``bounded``:
    so is one outside `MIN_SECONDS` to `MAX_SECONDS`, for an option no spec field holds to its bound."""
    if value is None:
        return None
    from tokometer.util.units import duration_seconds

    seconds = duration_seconds(value)
    if seconds is None:
        raise click.BadParameter(f"{quoted(value)} is not a duration (write e.g. 30s, 2m, 500ms)", param_hint=option)
    if not math.isfinite(seconds):
        raise click.BadParameter(f"{quoted(value)} is too long a duration (write e.g. 30s, 2m)", param_hint=option)
    if seconds <= 0:
        raise click.BadParameter("must be longer than zero", param_hint=option)
    if bounded and not MIN_SECONDS <= seconds <= MAX_SECONDS:
        raise click.BadParameter(f"{quoted(value)} is out of range: a duration is from {MIN_SECONDS * 1000:g} ms to "
                                 f"{MAX_SECONDS:g} s (a week)", param_hint=option)
    return seconds


def parse_size(value: str | None, option: str) -> int | None:
    """``"1MiB"``, ``"512KiB"``, ``"65536"`` -> bytes."""
    if value is None:
        return None
    from tokometer.util.units import byte_size

    size = byte_size(value)
    if size is None:
        raise click.BadParameter(f"{quoted(value)} is not a size (write e.g. 1MiB, 512KiB, 65536)", param_hint=option)
    if size <= 0:
        raise click.BadParameter("must be larger than zero", param_hint=option)
    return size


def parse_headers(values: tuple[str, ...]) -> dict[str, str]:
    """``("X-A: 1",)`` -> ``{"X-A": "1"}``; a line break (it would end the field on the wire) is refused."""
    from tokometer.util.secrets import header_problem

    headers = {}
    for number, item in enumerate(values, 1):
        name, sep, value = item.partition(":")
        if not sep or not name.strip():
            # not echoed: a malformed header may well be a secret (``--header "Bearer sk-..."``)
            raise click.BadParameter(f"header {number} is not NAME: VALUE (its text is not shown: it may hold a "
                                     "secret)", param_hint="--header")
        problem = header_problem(name.strip(), value.strip())
        if problem:
            raise click.BadParameter(f"header {number}: {problem}; give each header as one 'Name: value' "
                                     "(its text is not shown: it may hold a secret)", param_hint="--header")
        headers[name.strip()] = value.strip()
    return headers


def api_key_option(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--api-key``'s check: a key no header can carry as it is (non-ASCII, a line break) is one line, exit 2."""
    from tokometer.util.secrets import value_problem

    if value is not None and (problem := value_problem(value)):
        raise click.BadParameter(f"{problem} (the key is not shown)", ctx=ctx, param=param)
    return value


def check_output_path(path: Path | None, option: str, example: str) -> None:
    """Refuse an output file that cannot be written, before anything is measured (``example``: a file name to
    suggest inside a directory)."""
    from tokometer.util.paths import writable_file_problem

    if path is None:
        return
    problem = writable_file_problem(path, example)
    if problem:
        raise ConfigError(f"{option}: {problem}")


def build_spec(spec_type: type[T], /, *, flags: Mapping[str, str] | None = None, **values: object) -> T:
    """Validate ``values`` into ``model``; the first problem becomes one ConfigError line. ``flags``: each
    field's option (``request_timeout_s`` -> ``--timeout``), for the field an error is about and the fields a
    `tokometer.util.specproblem.FieldProblem` names; without it a field is said ``--its-name``."""
    from tokometer.util.specproblem import FieldProblem

    words = flags or {}
    try:
        return spec_type(**values)
    except ValidationError as exc:
        error = exc.errors()[0]
        loc = [str(part) for part in error["loc"]]
        where = ".".join(loc)
        field = words.get(where) or words.get(loc[0]) if loc else None
        if loc and field is not None and len(loc) > 1:  # an item of a list option: ``--rate`` (value 2)
            field = f"{field} (value {int(loc[1]) + 1})" if loc[1].isdigit() else f"{field} {'.'.join(loc[1:])}"
        cause = error.get("ctx", {}).get("error")
        message = cause.render(words) if isinstance(cause, FieldProblem) else _out_of_range(error)
        option = f"{field or '--' + where.replace('_', '-')}: " if where else ""
        raise ConfigError(f"{option}{message}") from None


_RANGE = {"greater_than": "must be more than {gt}", "greater_than_equal": "must be at least {ge}",
          "less_than": "must be less than {lt}", "less_than_equal": "must be at most {le}",
          "finite_number": "must be a finite number (not NaN or infinity)"}
"""pydantic's range errors, said as the bound they break."""


def _out_of_range(error: Any) -> str:
    """A pydantic error as one line: a range error names the value and the bound (the spec's, declared once in
    `tokometer.util.limits`), any other its own message."""
    template = _RANGE.get(error["type"])
    if template is None:
        return str(error["msg"]).removeprefix("Value error, ")
    bounds = {k: (f"{v:,}" if isinstance(v, int) else f"{v:g}") for k, v in error.get("ctx", {}).items()
              if isinstance(v, (int, float))}
    shown = error.get("input")
    value = f"{shown:g}" if isinstance(shown, float) else str(shown)
    return f"{value if len(value) <= 40 else quoted(value)} {template.format_map(bounds)}"
