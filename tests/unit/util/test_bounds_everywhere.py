"""Every number from outside has a declared bound (`tokometer.util.limits`), by construction.

Two walks, so that a new option or config key without a bound fails here rather than in a user's hands:

- every int or float field of the specs and configs a command builds (bench's spec, the gateway's config, the
  simulator's, the embedded engine's settings) has a lower and an upper bound, and every float is finite;
- every numeric option of every command is a range with both ends, or stands for such a field (a bench
  `SpecOption`, or a simulator option passed to `SimConfig` under its own name).
"""

from __future__ import annotations

import importlib
import math
import types
import typing
from typing import Any

import annotated_types
import click
import pytest
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from tokometer.benchmark.spec import BenchSpec
from tokometer.cli import _COMMANDS
from tokometer.cli.options import FiniteFloat
from tokometer.cli.specoption import SpecOption
from tokometer.gateway.config import GatewayConfig
from tokometer.sim.config import SimConfig

CHECKED_ELSEWHERE = {
    (BenchSpec, "ramp_from"): "BenchSpec._check_ramp: 0, or MIN_RAMP_LOAD to MAX_RAMP_LOAD",
    (BenchSpec, "time_slice_s"): "BenchSpec._check_slices: MIN_SLICE_S to MAX_SLICE_S",
    (SimConfig, "metrics_buckets"): "SimConfig._check_buckets: up to MAX_SECONDS each, at most MAX_BUCKETS",
}
"""Fields whose range a validator of their model checks (with a message of its own), and where."""


def _models(model: type[BaseModel], seen: set[type[BaseModel]] | None = None) -> list[type[BaseModel]]:
    """``model`` and every model its fields hold."""
    seen = set() if seen is None else seen
    if model in seen:
        return []
    seen.add(model)
    out = [model]
    for info in model.model_fields.values():
        for inner in _leaves(info.annotation):
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                out += _models(inner, seen)
    return out


def _leaves(annotation: Any) -> list[Any]:
    """The types inside ``annotation`` (``list[X] | None`` -> ``[X, None]``)."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is typing.Annotated:
        return _leaves(args[0])
    if not args:
        return [annotation]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType, list, tuple, dict):
        return [leaf for arg in args for leaf in _leaves(arg)]
    return [annotation]


def _numeric(annotation: Any) -> bool:
    return any(leaf in (int, float) for leaf in _leaves(annotation))


def _constraints(info: FieldInfo) -> list[Any]:
    """The field's constraints, on it and inside its (list item's) ``Annotated`` type."""
    found = list(info.metadata)
    stack: list[Any] = [info.annotation]
    while stack:
        annotation = stack.pop()
        if typing.get_origin(annotation) is typing.Annotated:
            found += list(annotation.__metadata__)
        stack += list(typing.get_args(annotation))
    return found


def _bounded(model: type[BaseModel], info: FieldInfo) -> tuple[bool, bool, bool]:
    """(has a lower bound, has an upper bound, refuses NaN and infinity)."""
    found = _constraints(info)
    low = any(isinstance(c, (annotated_types.Ge, annotated_types.Gt)) for c in found)
    high = any(isinstance(c, (annotated_types.Le, annotated_types.Lt)) for c in found)
    finite = model.model_config.get("allow_inf_nan") is False or any(
        getattr(c, "allow_inf_nan", None) is False for c in found)
    return low, high, finite


SPECS = [m for root in (BenchSpec, GatewayConfig, SimConfig) for m in _models(root)]


@pytest.mark.parametrize("model", SPECS, ids=lambda m: m.__name__)
def test_every_number_of_every_spec_has_both_bounds_and_is_finite(model: type[BaseModel]) -> None:
    unbounded = []
    for name, info in model.model_fields.items():
        if not _numeric(info.annotation) or (model, name) in CHECKED_ELSEWHERE or name == "faults":
            continue  # faults: a share each, checked by SimConfig._known_rates
        low, high, finite = _bounded(model, info)
        if not (low and high and (finite or float not in _leaves(info.annotation))):
            unbounded.append(f"{name} (low {low}, high {high}, finite {finite})")
    assert not unbounded, f"{model.__name__}: declare a bound from tokometer.util.limits for {unbounded}"


def _field_of(command: str, option: click.Parameter) -> tuple[type[BaseModel], str] | None:
    """The spec field a numeric option stands for, where its bound lives."""
    if isinstance(option, SpecOption):
        spec = option.spec()
        return (spec, option.field) if isinstance(spec, type) and issubclass(spec, BaseModel) else None
    if command == "sim" and option.name in SimConfig.model_fields:
        return SimConfig, option.name
    return None


def _range_ends(kind: click.ParamType[Any, Any]) -> bool:
    """Whether a click range has both ends, each finite (a float range refusing NaN, which passes any end)."""
    if not isinstance(kind, (click.IntRange, FiniteFloat)):
        return False
    ends = (kind.min, kind.max)
    return all(end is not None and math.isfinite(end) for end in ends)


@pytest.mark.parametrize("command", sorted(_COMMANDS))
def test_every_numeric_option_of_every_command_is_bounded(command: str) -> None:
    cli = importlib.import_module(_COMMANDS[command][0]).command
    unbounded = []
    for option in cli.params:
        if not isinstance(option.type, (click.types.IntParamType, click.types.FloatParamType)):
            continue
        field = _field_of(command, option)
        if field is not None:
            model, name = field
            info = model.model_fields[name]
            if (model, name) in CHECKED_ELSEWHERE or all(_bounded(model, info)[:2]):
                continue
        if not _range_ends(option.type):
            unbounded.append(option.opts[0])
    assert not unbounded, f"tokometer {command}: give {unbounded} a range from tokometer.util.limits"
