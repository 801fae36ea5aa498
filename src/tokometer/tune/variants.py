"""The variants a tune tries, planned from what the user typed: ``--set``, ``--vary``, ``--grid``, ``--variants FILE``.

- ``--set NAME=VALUE`` (repeatable): the baseline's settings;
- ``--vary NAME=V1,V2,...`` (repeatable): one setting changed at a time, in the order given; a value equal to the
  baseline's is skipped (the baseline measures it already);
- ``--grid``: the cartesian product of the ``--vary`` lists instead (`itertools.product`, in the order given);
- ``--variants FILE``: a TOML file of ``[[variant]]`` tables, each a ``name`` and its settings, tried in file order.

The baseline is always variant 0. What the user typed is split and bounded here (a name of at most
`MAX_NAME_CHARS`, a value of at most the settings' `MAX_VALUE_CHARS`; at most `MAX_VARIANTS` variants, a grid's size
worked out before a single one is made); `check_variants` then gives every variant's whole settings to
`tokometer.tune.settings.check_settings`, which knows the names, kinds and ranges of each engine's settings.
The plan is deterministic: the same options give the same variants in the same order, and `fingerprint` the same
hash, so ``--resume`` can tell the same tune from another.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from tokometer.tune.outcome import Variant
from tokometer.tune.settings import MAX_VALUE_CHARS, check_settings
from tokometer.util.errors import ConfigError
from tokometer.util.shown import quoted

__all__ = ["MAX_NAME_CHARS", "MAX_VARIANTS", "MAX_VARIANTS_FILE_BYTES", "NamedVariant", "check_variants",
           "fingerprint", "parse_set", "parse_vary", "plan_variants", "read_variants_file"]

MAX_VARIANTS: Final = 256
"""The most variants one tune tries (the baseline included): each one is an engine start and a whole workload."""
MAX_VARIANTS_FILE_BYTES: Final = 1024 * 1024
"""The largest ``--variants`` file read."""
MAX_NAME_CHARS: Final = 200
"""The longest name of a setting or of a file's variant read (the settings' own rules are stricter)."""

NamedVariant = tuple[str, Mapping[str, str]]
"""A variant of a ``--variants`` file: its name and the settings it changes."""


def _name(text: str, where: str) -> str:
    """A setting's name as given, stripped; whether the engine knows it is `check_variants`' to say."""
    name = text.strip()
    if not name:
        raise ConfigError(f"{where}: the setting's name is empty (write e.g. parallel=2)")
    if len(name) > MAX_NAME_CHARS:
        raise ConfigError(f"{where}: a setting's name of {len(name):,} characters is longer than {MAX_NAME_CHARS}")
    if not name.isprintable() or any(char.isspace() for char in name):
        raise ConfigError(f"{where}: {quoted(name)} is not a setting's name: write the engine's flag without its "
                          "dashes, e.g. ctx-size")
    return name


def _value(text: str, where: str, *, empty: bool = False) -> str:
    """A value as given, stripped and bounded (``empty``: a flag given alone, ``--set NAME=``, may have none)."""
    value = text.strip()
    if not value and not empty:
        raise ConfigError(f"{where}: a value is empty (write e.g. parallel=1,2,4)")
    if len(value) > MAX_VALUE_CHARS:
        raise ConfigError(f"{where}: a value of {len(value):,} characters is longer than {MAX_VALUE_CHARS:,}")
    return value


def parse_set(items: Sequence[str], option: str = "--set") -> dict[str, str]:
    """``("parallel=2", "ctx-size=8192")`` -> ``{"parallel": "2", "ctx-size": "8192"}``: the baseline's settings.
    A setting given twice is refused (which one would count?)."""
    settings: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"{option}: {quoted(item)} is not NAME=VALUE (write e.g. {option} parallel=2)")
        name = _name(name, option)
        if name in settings:
            raise ConfigError(f"{option} {name} is given twice: give each setting once")
        settings[name] = _value(value, f"{option} {name}", empty=True)
    return settings


def parse_vary(items: Sequence[str], option: str = "--vary") -> list[tuple[str, tuple[str, ...]]]:
    """``("parallel=1,2,4",)`` -> ``[("parallel", ("1", "2", "4"))]``, in the order given; a setting varied twice,
    or one value listed twice, is refused."""
    varied: list[tuple[str, tuple[str, ...]]] = []
    for item in items:
        name, sep, listed = item.partition("=")
        if not sep:
            raise ConfigError(f"{option}: {quoted(item)} is not NAME=V1,V2,... (write e.g. {option} parallel=1,2,4)")
        name = _name(name, option)
        if any(name == seen for seen, _ in varied):
            raise ConfigError(f"{option} {name} is given twice: list all its values once ({option} {name}=1,2,4)")
        parts = listed.split(",")
        if len(parts) > MAX_VARIANTS:
            raise ConfigError(f"{option} {name}: {len(parts):,} values; a tune tries at most {MAX_VARIANTS}")
        values = tuple(_value(part, f"{option} {name}") for part in parts)
        if len(set(values)) != len(values):
            twice = next(v for v in values if values.count(v) > 1)
            raise ConfigError(f"{option} {name}: {quoted(twice)} is listed twice: list each value once")
        varied.append((name, values))
    return varied


def read_variants_file(path: Path) -> list[NamedVariant]:
    """The ``[[variant]]`` tables of a TOML file, in file order: each a ``name`` and settings (``parallel = 2``,
    ``quantization = "Q8_0"``, ``flash-attn = true``); a bad file is one line naming it and the line or variant."""
    from tokometer.util.readlimit import read_toml

    data = read_toml(path, MAX_VARIANTS_FILE_BYTES, "a variants file is a short list of [[variant]] tables",
                     f"--variants {path}")
    extra = sorted(set(data) - {"variant"})
    if extra:
        raise ConfigError(f"--variants {path}: unknown key {extra[0]!r} at the top level: write each variant as a "
                          "[[variant]] table with a name and its settings")
    tables = data.get("variant")
    if not isinstance(tables, list) or not tables:
        raise ConfigError(f"--variants {path}: no [[variant]] tables: write e.g. [[variant]] name = \"two slots\" "
                          "parallel = 2")
    if len(tables) >= MAX_VARIANTS:
        raise ConfigError(f"--variants {path}: {len(tables):,} variants; a tune tries at most {MAX_VARIANTS} "
                          "(the baseline included)")
    named = [_table(table, f"--variants {path}: variant {number}") for number, table in enumerate(tables, 1)]
    names = ["baseline"]
    for number, (name, _) in enumerate(named, 1):
        if name in names:
            raise ConfigError(f"--variants {path}: variant {number} is named {name!r} "
                              f"{'like the baseline' if name == 'baseline' else 'like another'}: give each its own "
                              "name")
        names.append(name)
    return named


def _table(table: Any, where: str) -> NamedVariant:
    """One ``[[variant]]`` table as its name and settings; each value as text (``true`` -> ``on``)."""
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: not a table")
    name = table.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME_CHARS or not name.isprintable():
        raise ConfigError(f"{where}: give it a name = \"...\" (one line of at most {MAX_NAME_CHARS} characters)")
    where = f"{where} ({name.strip()!r})"
    settings = {_name(key, where): _value(_text(value, f"{where}: {key}"), f"{where}: {key}")
                for key, value in table.items() if key != "name"}
    if not settings:
        raise ConfigError(f"{where}: no settings: add e.g. parallel = 2")
    return name.strip(), settings


def _text(value: Any, where: str) -> str:
    """A TOML value as a setting's text: text as it is, a whole number or a finite number as written, a boolean
    as ``on``/``off``; anything else (a table, a list, a date) is refused."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return repr(value)
    if isinstance(value, str):
        return value
    raise ConfigError(f"{where}: give a text, a number or true/false")


def plan_variants(baseline: Mapping[str, str], *, vary: Sequence[tuple[str, Sequence[str]]] = (),
                  grid: bool = False, named: Sequence[NamedVariant] = ()) -> tuple[Variant, ...]:
    """The tune's variants in order: the baseline (index 0), then the ``vary`` values one at a time (or with
    ``grid`` their product), or the ``named`` variants of a file. ConfigError for a plan that cannot be tried."""
    if named and vary:
        raise ConfigError("--variants and --vary cannot be combined: list every variant in the file")
    if grid and not vary:
        raise ConfigError("--grid needs --vary (e.g. --vary parallel=1,2 --vary ctx-size=4096,8192 --grid)")
    if named:
        changes = [(name, {**baseline, **settings}) for name, settings in named]
    elif grid:
        changes = _grid(baseline, vary)
    else:
        changes = [(f"{name}={value}", {**baseline, name: value}) for name, values in vary for value in values
                   if baseline.get(name) != value]
    if not changes:
        raise ConfigError("nothing to try against the baseline: give --vary NAME=V1,V2 (values other than the "
                          "baseline's) or --variants FILE")
    return _numbered(baseline, changes)


def _grid(baseline: Mapping[str, str], vary: Sequence[tuple[str, Sequence[str]]]) -> list[tuple[str, dict[str, str]]]:
    """Every point of the ``vary`` lists' product but the baseline's own, counted before any is made."""
    size = math.prod(len(values) for _, values in vary)
    if size > MAX_VARIANTS:
        raise ConfigError(f"--grid: {' × '.join(str(len(v)) for _, v in vary)} = {size:,} variants; a tune tries at "
                          f"most {MAX_VARIANTS}: vary fewer settings or fewer values")
    names = [name for name, _ in vary]
    points = []
    for values in itertools.product(*(values for _, values in vary)):
        point = dict(zip(names, values, strict=True))
        if any(baseline.get(name) != value for name, value in point.items()):
            points.append((",".join(f"{n}={v}" for n, v in point.items()), {**baseline, **point}))
    return points


def _numbered(baseline: Mapping[str, str], changes: Sequence[tuple[str, dict[str, str]]]) -> tuple[Variant, ...]:
    """The baseline and ``changes`` as numbered variants; names must differ, and so must settings."""
    if len(changes) >= MAX_VARIANTS:
        raise ConfigError(f"{len(changes) + 1:,} variants; a tune tries at most {MAX_VARIANTS}: try fewer values")
    variants = [Variant(0, "baseline", dict(baseline))]
    seen = {"baseline"}
    for index, (name, settings) in enumerate(changes, 1):
        if name in seen:
            raise ConfigError(f"two variants are named {name!r}: give each its own name")
        seen.add(name)
        changed = tuple(k for k in settings if baseline.get(k) != settings[k])
        variants.append(Variant(index, name, settings, changed))
    return tuple(variants)


def check_variants(engine: str, variants: Sequence[Variant]) -> None:
    """Every variant's settings checked for ``engine`` before anything starts; ConfigError in one line naming the
    first variant that cannot be tried and why."""
    for variant in variants:
        try:
            check_settings(engine, variant.settings)
        except ConfigError as exc:
            raise ConfigError(f"{'the baseline' if variant.is_baseline else f'variant {variant.name}'}: {exc}") \
                from None


def fingerprint(engine: str, variants: Sequence[Variant], workload: Mapping[str, Any]) -> str:
    """A hash of what makes a tune the tune it is: the engine, each variant (name and settings, in order) and the
    workload. ``--resume`` carries on a saved tune only when this is the same."""
    document = {"engine": engine, "variants": [[v.name, sorted(v.settings.items())] for v in variants],
                "workload": workload}
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
