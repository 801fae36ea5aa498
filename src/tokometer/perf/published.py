"""Published serving figures the estimate is checked against, and the check.

``data/published-serving.csv`` holds throughput at maximum load as engine makers publish it, each row with
its source: model, hardware, GPUs (TP), weight and KV format, prompt and answer lengths, and the output
tokens per second over the whole deployment. `compare_published` sets each beside `serving.max_load` for
the same deployment at the stated `Efficiency`: the test (tests/unit/perf/test_perf_published.py) and
docs/commands/estimate.md show how far apart they are (``bench/published_serving.py`` prints the table).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from importlib import resources

from tokometer.perf.hardware import resolve_hardware
from tokometer.perf.loaders import resolve_model
from tokometer.perf.maxload import max_load
from tokometer.perf.roofline import Deployment, Efficiency

__all__ = ["Checked", "PublishedFigure", "compare_published", "published_figures"]


@dataclass(frozen=True)
class PublishedFigure:
    model: str
    hardware: str
    tp: int
    weight_dtype: str
    kv_dtype: str
    input_tokens: int
    output_tokens: int
    output_tok_s: float
    engine: str
    source: str
    note: str

    def deployment(self) -> Deployment:
        return Deployment(resolve_model(self.model), resolve_hardware(self.hardware), self.weight_dtype,
                          self.kv_dtype, tp=self.tp)


@dataclass(frozen=True)
class Checked:
    figure: PublishedFigure
    expected_tok_s: float
    batch: int
    bound: str

    @property
    def error(self) -> float:
        """Expected / published − 1: +0.2 = the estimate is 20 % faster than published."""
        return self.expected_tok_s / self.figure.output_tok_s - 1


def published_figures() -> list[PublishedFigure]:
    """Every row of ``data/published-serving.csv``."""
    text = resources.files("tokometer.perf").joinpath("data/published-serving.csv").read_text("utf-8")
    return [PublishedFigure(model=row["model"], hardware=row["hardware"], tp=int(row["tp"]),
                            weight_dtype=row["weight_dtype"], kv_dtype=row["kv_dtype"],
                            input_tokens=int(row["input_tokens"]), output_tokens=int(row["output_tokens"]),
                            output_tok_s=float(row["output_tok_s"]), engine=row["engine"], source=row["source"],
                            note=row["note"]) for row in csv.DictReader(io.StringIO(text))]


def compare_published(efficiency: Efficiency | None = None,
                      figures: list[PublishedFigure] | None = None) -> list[Checked]:
    """Each published figure beside `max_load` of its deployment (expected, at ``efficiency``)."""
    out = []
    for f in figures if figures is not None else published_figures():
        load = max_load(f.deployment(), f.input_tokens, f.output_tokens, efficiency or Efficiency())
        if load is not None:
            out.append(Checked(f, load.output_tok_s, load.batch, load.bound))
    return out
