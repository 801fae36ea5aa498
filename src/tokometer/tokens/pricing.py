"""Prices and credits per token: a user-editable TOML table, and what a count costs.

The shipped table (``tokens/data/prices.toml``) lists input/output prices per million tokens with
its source and date; it is a starting point. A user table (``--prices FILE``, ``$TOKOMETER_PRICES``
or ``<user config dir>/tokometer/prices.toml``) is read on top of it: its entries replace or add.

    [models."gpt-4o"]                 [credits.my-platform]
    input = 2.50     # per 1M tokens  price = 0.00002          # currency per credit
    output = 10.00                    [models."my-model"]
    context = 128000                  platform = "my-platform"
    tokenizer = "tiktoken:o200k_base" input_credits = 1000000  # credits per 1M input tokens
                                      output_credits = 2000000
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Final

from tokometer.util.errors import ConfigError
from tokometer.util.limits import MAX_CREDITS, MAX_PRICE, MAX_TOKENS
from tokometer.util.readlimit import read_toml
from tokometer.util.shown import clipped

MAX_PRICE_FILE_BYTES: Final = 16 << 20
"""A user's price table (``--prices``, ``$TOKOMETER_PRICES``, the user's own): 16 MiB, thousands of times the
shipped one; read whole by `read_toml`, so ``/dev/zero`` or an endless FIFO is one error, not the memory."""

__all__ = ["Cost", "ModelPrice", "PriceTable", "user_price_file"]

_PER = 1_000_000


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """One model's row: prices per million tokens (money and/or credits), context, tokenizer."""

    model: str
    input: float | None = None
    output: float | None = None
    input_credits: float | None = None
    output_credits: float | None = None
    platform: str | None = None
    credit_price: float | None = None
    context: int | None = None
    tokenizer: str | None = None
    source: str = ""


@dataclass(frozen=True, slots=True)
class Cost:
    """What ``input_tokens`` in and ``output_tokens`` out cost under one price row."""

    price: ModelPrice
    input_tokens: int
    output_tokens: int
    currency: str
    input_cost: float | None
    output_cost: float | None
    credits: float | None

    @property
    def total(self) -> float | None:
        if self.input_cost is None and self.output_cost is None:
            return None
        return (self.input_cost or 0.0) + (self.output_cost or 0.0)


def user_price_file() -> Path:
    """``<user config dir>/tokometer/prices.toml`` (it need not exist)."""
    import platformdirs

    return Path(platformdirs.user_config_dir("tokometer")) / "prices.toml"


def _read(text: str, where: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"price table {where} is not valid TOML: {exc}") from None


def _number(row: dict[str, Any], key: str, where: str) -> float | None:
    value = row.get(key)
    if value is None:
        return None
    most = MAX_CREDITS if key.endswith("_credits") else MAX_PRICE
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= most:  # NaN too
        raise ConfigError(f"price table {where}: {key} must be a number from 0 to {most:g} "
                          f"(got {clipped(str(value))})")
    return float(value)


@dataclass
class PriceTable:
    """Rows by model name, the platforms' credit prices, and where the numbers come from."""

    models: dict[str, dict[str, Any]] = field(default_factory=dict)
    credits: dict[str, dict[str, Any]] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, path: str | Path | None = None, *, include_default: bool = True) -> PriceTable:
        """The shipped table, with ``path`` (or the user's table, if there is one) read over it."""
        table = cls()
        if include_default:
            text = resources.files("tokometer.tokens").joinpath("data/prices.toml").read_text(encoding="utf-8")
            table._merge(_read(text, "(shipped)"), "shipped table")
        chosen = Path(path).expanduser() if path else None
        if chosen is None and os.environ.get("TOKOMETER_PRICES"):
            chosen = Path(os.environ["TOKOMETER_PRICES"]).expanduser()
        if chosen is None and user_price_file().is_file():
            chosen = user_price_file()
        if chosen is not None:
            data = read_toml(chosen, MAX_PRICE_FILE_BYTES, "a price table is a list of [models.NAME] tables",
                             f"price table {chosen}")
            table._merge(data, str(chosen))
        return table

    def _merge(self, data: dict[str, Any], where: str) -> None:
        for section in ("models", "credits"):
            rows = data.get(section, {})
            if not isinstance(rows, dict) or not all(isinstance(r, dict) for r in rows.values()):
                raise ConfigError(f"price table {where}: [{section}.NAME] entries must be tables")
            target = self.models if section == "models" else self.credits
            for name, row in rows.items():
                target[name] = {**row, "_source": where}
        if isinstance(data.get("meta"), dict):
            self.meta.update(data["meta"])
        self.files.append(where)

    def names(self) -> list[str]:
        return sorted(self.models)

    def get(self, model: str) -> ModelPrice | None:
        """The row for ``model`` (exact name, else case-insensitive), or None."""
        row = self.models.get(model)
        if row is None:
            lowered = {name.lower(): name for name in self.models}
            name = lowered.get(model.lower())
            row = self.models.get(name) if name else None
            model = name or model
        if row is None:
            return None
        where = f"{row['_source']} [models.{model!r}]"
        platform = row.get("platform")
        credit_price = None
        if platform is not None:
            if platform not in self.credits:
                raise ConfigError(f"price table {where}: platform {platform!r} has no [credits.{platform}] entry")
            credit_price = _number(self.credits[platform], "price", f"[credits.{platform}]")
        context = row.get("context")
        context = context if isinstance(context, int) and 1 <= context <= MAX_TOKENS else None
        return ModelPrice(
            model=model, input=_number(row, "input", where), output=_number(row, "output", where),
            input_credits=_number(row, "input_credits", where), output_credits=_number(row, "output_credits", where),
            platform=platform, credit_price=credit_price, context=context,
            tokenizer=row.get("tokenizer") if isinstance(row.get("tokenizer"), str) else None,
            source=str(row["_source"]))

    def require(self, model: str) -> ModelPrice:
        price = self.get(model)
        if price is None:
            known = ", ".join(self.names()[:12])
            raise ConfigError(f"no price for {model!r} in the price table ({', '.join(self.files)}); known: "
                              f"{known}; add a [models.\"{model}\"] entry to {user_price_file()} or give --prices")
        return price

    def cost(self, model: str | ModelPrice, input_tokens: int, output_tokens: int = 0) -> Cost:
        """What ``input_tokens`` in and ``output_tokens`` out cost for ``model``."""
        price = model if isinstance(model, ModelPrice) else self.require(model)
        currency = str(self.meta.get("currency", "USD"))
        input_cost = output_cost = credits = None
        if price.input is not None:
            input_cost = input_tokens * price.input / _PER
        if price.output is not None and output_tokens:
            output_cost = output_tokens * price.output / _PER
        if price.input_credits is not None or price.output_credits is not None:
            credits = (input_tokens * (price.input_credits or 0.0)
                       + output_tokens * (price.output_credits or 0.0)) / _PER
            if price.credit_price is not None and input_cost is None and output_cost is None:
                input_cost = input_tokens * (price.input_credits or 0.0) / _PER * price.credit_price
                if output_tokens:
                    output_cost = output_tokens * (price.output_credits or 0.0) / _PER * price.credit_price
        return Cost(price=price, input_tokens=input_tokens, output_tokens=output_tokens, currency=currency,
                    input_cost=input_cost, output_cost=output_cost, credits=credits)
