"""`StoredSpec`: a run's `BenchSpec` as it was saved (JSON), read through typed attributes.

A saved spec outlives the code that wrote it: an older tokometer wrote fewer fields, a store may be edited by
hand, an imported run holds only a few (``url``, ``model``, ``label``, ``import``). So it is kept as the JSON it
was saved as (a read-only mapping: ``dict(spec)`` is it again) and each field that code reasons about is read
here, once, typed, with what a missing or malformed value means: the field's default, as `BenchSpec` has it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any, Literal

from tokometer.metrics import SLO

__all__ = ["DEFAULT_STEADY_TOLERANCE", "StoredSpec"]

DEFAULT_STEADY_TOLERANCE = 0.1
"""``--steady-tolerance``'s default (`BenchSpec.steady_tolerance`), for a spec that holds none."""


_PROMPT_KEYS = ("input_tokens", "output_tokens", "dataset", "prompt", "ignore_eos")


def _positive(value: Any) -> float | None:
    """``value`` as a positive finite number; None for anything else (bench validated it; a store edited by hand
    may not hold one)."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < math.inf
    return float(value) if ok else None


def _numbers(value: Any) -> tuple[float, ...]:
    return tuple(float(v) for v in value) if isinstance(value, (list, tuple)) else ()


class StoredSpec(Mapping[str, Any]):
    """A saved spec: the JSON as saved (``spec[name]``, ``dict(spec)``) and its fields typed (``spec.find_max``)."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any] | None = None) -> None:
        self._data: dict[str, Any] = dict(data or {})

    @classmethod
    def of(cls, data: Mapping[str, Any] | None) -> StoredSpec:
        """``data`` read as a saved spec: itself when it is one already."""
        return data if isinstance(data, StoredSpec) else cls(data)

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __eq__(self, other: object) -> bool:
        return dict(self._data) == (dict(other) if isinstance(other, Mapping) else other)

    __hash__ = None  # type: ignore[assignment]  # mutable-looking: as a dict

    def __repr__(self) -> str:
        return f"StoredSpec({self._data!r})"

    @property
    def find_max(self) -> Literal["rate", "concurrency"] | None:
        """What ``--find-max`` searched for; None for a sweep."""
        kind = self._data.get("find_max")
        return kind if kind in ("rate", "concurrency") else None

    @property
    def slo(self) -> str | None:
        """``--slo``: the objectives of a find-max search (``ttft_p99=2s,...``), as given."""
        value = self._data.get("slo")
        return str(value) if value else None

    @property
    def search(self) -> str:
        """How ``--find-max`` searched: ``bisect`` (the default) or ``ramp``."""
        return str(self._data.get("search") or "bisect")

    @property
    def rate(self) -> tuple[float, ...]:
        """``--rate`` values, in order."""
        return _numbers(self._data.get("rate"))

    @property
    def concurrency(self) -> tuple[float, ...]:
        """``--concurrency`` values, in order."""
        return _numbers(self._data.get("concurrency"))

    @property
    def prompt_shape(self) -> dict[str, Any]:
        """What the prompts were, as saved: ``input_tokens``, ``output_tokens``, ``dataset``, ``prompt`` and
        ``ignore_eos`` (None each where not saved): two runs whose prompts differ are not alike."""
        return {key: self._data.get(key) for key in _PROMPT_KEYS}

    @property
    def gpus(self) -> Any:
        """``--gpus`` as saved: `tokometer.gpu_count.gpu_count` judges whether it is a usable count."""
        return self._data.get("gpus")

    @property
    def imported(self) -> Mapping[str, Any]:
        """What ``tokometer import`` saved of another tool's run (``import``: the tool, its version, its own
        numbers); empty for a run tokometer measured (and for a value that is not an object)."""
        value = self._data.get("import")
        return value if isinstance(value, Mapping) else {}

    @property
    def slo_limits(self) -> SLO:
        """The per-request limits of goodput (``--slo-ttft-ms``, ``--slo-tpot-ms``, ``--slo-e2e-ms``)."""
        return SLO(_positive(self._data.get("slo_ttft_ms")), _positive(self._data.get("slo_tpot_ms")),
                   _positive(self._data.get("slo_e2e_ms")))

    @property
    def steady_tolerance(self) -> float:
        """``--steady-tolerance`` (below 1), else its default."""
        value = _positive(self._data.get("steady_tolerance"))
        return value if value is not None and value < 1 else DEFAULT_STEADY_TOLERANCE

    @property
    def time_slice_s(self) -> float | None:
        """``--time-slice``: the width of a step's time slices in seconds; None without."""
        return _positive(self._data.get("time_slice_s"))
