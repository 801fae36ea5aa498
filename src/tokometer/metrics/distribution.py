"""`Distribution`: count, mean, std, min, percentiles and max of a sample."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Final

import numpy as np

__all__ = ["PERCENTILES", "Distribution"]

PERCENTILES: Final[tuple[float, ...]] = (50.0, 90.0, 95.0, 99.0, 99.9)


@dataclass(frozen=True, slots=True)
class Distribution:
    """Summary statistics of one metric. Percentiles interpolate linearly
    between closest ranks (numpy's default); an empty sample has count 0 and
    ``None`` everywhere else."""

    count: int
    mean: float | None
    std: float | None
    min: float | None
    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    p99_9: float | None
    max: float | None

    @classmethod
    def of(cls, values: Iterable[float], scale: float = 1.0) -> Distribution:
        """Summarise ``values``, each multiplied by ``scale`` (e.g. 1e-6 for ns -> ms)."""
        data = np.fromiter(values, dtype=np.float64)
        if data.size == 0:
            return cls(0, None, None, None, None, None, None, None, None, None)
        if scale != 1.0:
            data *= scale
        p50, p90, p95, p99, p999 = (float(x) for x in np.percentile(data, PERCENTILES))
        return cls(
            count=int(data.size),
            mean=float(data.mean()),
            std=float(data.std(ddof=1)) if data.size > 1 else 0.0,
            min=float(data.min()),
            p50=p50,
            p90=p90,
            p95=p95,
            p99=p99,
            p99_9=p999,
            max=float(data.max()),
        )

    def stat(self, key: str) -> float | None:
        """One statistic by its JSON name: ``p50``, ``p99.9``, ``mean``, ``max``."""
        value = getattr(self, key.replace(".", "_"))
        return None if value is None else float(value)

    def to_json(self) -> dict[str, float | int | None]:
        out = asdict(self)
        out["p99.9"] = out.pop("p99_9")
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Distribution:
        """The distribution `to_json` wrote; an absent one (a file older than the metric) reads as empty."""
        if not data:
            return cls.of(())

        def num(key: str) -> float | None:
            value = data.get(key)
            return float(value) if value is not None else None

        return cls(count=int(data.get("count") or 0), mean=num("mean"), std=num("std"), min=num("min"),
                   p50=num("p50"), p90=num("p90"), p95=num("p95"), p99=num("p99"), p99_9=num("p99.9"),
                   max=num("max"))
