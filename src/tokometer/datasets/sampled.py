"""`Sampled`: a number that is fixed or drawn from a small distribution, as ``--turns`` and ``--think-time`` take it.

The forms, for counts (``--turns``) and for durations (``--think-time``, with a unit: ``500ms``, ``2s``, ``1m``;
a bare number is seconds):

- ``4`` / ``2s``: always that;
- ``2-6`` / ``1s-3s``: uniform between the two, both included (counts are whole);
- ``exp:4`` / ``exp:2s``: exponential with that mean (counts are rounded, at least 1).

Draws come from the caller's `random.Random`, so a seeded run repeats them exactly.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Literal

from tokometer.util.errors import ConfigError

__all__ = ["Sampled", "parse_seconds"]

_UNITS = {"ms": 1e-3, "s": 1.0, "m": 60.0}
_NUMBER = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ms|s|m)?\s*$")


def parse_seconds(text: str, what: str) -> float:
    """``500ms``, ``2s``, ``1m`` or a bare number of seconds."""
    match = _NUMBER.match(text)
    if match is None:
        raise ConfigError(f"{what}: {text!r} is not a duration (e.g. 500ms, 2s, 1m)")
    return float(match.group(1)) * _UNITS[match.group(2) or "s"]


@dataclass(frozen=True, slots=True)
class Sampled:
    """A fixed value, a uniform range or an exponential mean; ``whole`` values are counts."""

    kind: Literal["fixed", "uniform", "exp"]
    low: float
    high: float
    whole: bool = False

    @classmethod
    def parse(cls, text: str, what: str, *, whole: bool = False) -> Sampled:
        """Read ``text`` (see the module docstring); ``what`` names the option in errors."""
        text = str(text).strip()

        def one(part: str) -> float:
            if whole:
                if not part.strip().isdigit():
                    raise ConfigError(f"{what}: {part!r} is not a whole number (forms: 4, 2-6, exp:4)")
                return float(int(part))
            return parse_seconds(part, what)

        if text.startswith("exp:"):
            mean = one(text[4:])
            if mean <= 0:
                raise ConfigError(f"{what}: the mean of exp: must be positive")
            return cls("exp", mean, mean, whole)
        if "-" in text:
            low_text, high_text = text.split("-", 1)
            low, high = one(low_text), one(high_text)
            if high < low:
                raise ConfigError(f"{what}: the range {text!r} runs backwards")
            return cls("uniform", low, high, whole)
        value = one(text)
        return cls("fixed", value, value, whole)

    def check_at_least(self, minimum: float, what: str) -> Sampled:
        """This value, or a ConfigError when it can fall below ``minimum``."""
        if self.kind != "exp" and self.low < minimum:
            raise ConfigError(f"{what} must be at least {minimum:g}")
        return self

    @property
    def mean(self) -> float:
        return (self.low + self.high) / 2

    def draw(self, rng: random.Random) -> float:
        """One value (a whole one for counts; an exponential count is at least 1)."""
        if self.kind == "fixed":
            return self.low
        if self.kind == "uniform":
            return float(rng.randint(int(self.low), int(self.high))) if self.whole else rng.uniform(self.low, self.high)
        value = rng.expovariate(1.0 / self.low)
        return float(max(1, round(value))) if self.whole else value

    def describe(self) -> str:
        unit = "" if self.whole else " s"
        if self.kind == "fixed":
            return f"{self.low:g}{unit}"
        if self.kind == "uniform":
            return f"{self.low:g}-{self.high:g}{unit} (uniform)"
        return f"exponential, mean {self.low:g}{unit}"
