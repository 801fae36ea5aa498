"""The price table: the shipped one, a user's read over it, money and credits."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tokometer.tokens import PriceTable
from tokometer.util.errors import ConfigError


@pytest.fixture(autouse=True)
def _no_user_table(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("TOKOMETER_PRICES", raising=False)
    monkeypatch.setattr("tokometer.tokens.pricing.user_price_file", lambda: tmp_path / "absent.toml")


def test_shipped_table_has_source_date_and_rows() -> None:
    table = PriceTable.load()
    assert table.meta["source"] and table.meta["date"] and "starting point" in table.meta["note"]
    row = table.require("gpt-4o")
    assert (row.input, row.output, row.tokenizer) == (2.5, 10.0, "tiktoken:o200k_base")
    assert table.get("GPT-4O") == row  # case-insensitive
    for name in table.names():
        price = table.require(name)
        assert price.input is not None and price.output is not None and price.context


def test_cost_per_million() -> None:
    table = PriceTable.load()
    cost = table.cost("gpt-4o", 1_000, 500)
    assert cost.input_cost == pytest.approx(0.0025)
    assert cost.output_cost == pytest.approx(0.005)
    assert cost.total == pytest.approx(0.0075)
    assert table.cost("gpt-4o", 1_000).output_cost is None


def test_user_table_overrides_and_adds_credits(tmp_path: Path) -> None:
    mine = tmp_path / "prices.toml"
    mine.write_text("""
[models."gpt-4o"]
input = 1.0
output = 2.0

[credits.cloud]
price = 0.00002

[models."my-model"]
platform = "cloud"
input_credits = 1000000
output_credits = 2000000
""", encoding="utf-8")
    table = PriceTable.load(mine)
    assert table.require("gpt-4o").input == 1.0
    assert table.require("gpt-4o-mini").input == 0.15  # shipped rows stay
    cost = table.cost("my-model", 2_500, 100)
    assert cost.credits == pytest.approx(2_700)  # 1 credit per input token, 2 per output token
    assert cost.total == pytest.approx(2_700 * 0.00002)


def test_bad_tables_are_one_line_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[models.x\ninput = 1", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid TOML"):
        PriceTable.load(bad)
    bad.write_text('[models."x"]\ninput = "cheap"', encoding="utf-8")
    with pytest.raises(ConfigError, match="input must be a number"):
        PriceTable.load(bad).require("x")
    bad.write_text('[models."x"]\nplatform = "nowhere"\ninput_credits = 1', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"no \[credits.nowhere\] entry"):
        PriceTable.load(bad).require("x")
    with pytest.raises(ConfigError, match="no price for 'unknown-model'"):
        PriceTable.load().require("unknown-model")
    with pytest.raises(ConfigError, match=r"cannot read .*missing\.toml: No such file"):
        PriceTable.load(tmp_path / "missing.toml")
    bad.write_bytes(b'[models."x"]\ninput = 1 # caf\xe9')
    with pytest.raises(ConfigError, match=r"price table .*bad\.toml: not UTF-8 text \(byte 28\)"):
        PriceTable.load(bad)


def test_an_endless_table_is_one_error_and_a_fifo_with_no_writer_is_empty(tmp_path: Path) -> None:
    """``--prices /dev/zero`` had read until memory ran out: a table is read whole up to 16 MiB, then refused;
    a FIFO nobody writes to reads as an empty table rather than waiting for a writer forever."""
    with pytest.raises(ConfigError, match=r"^/dev/zero is larger than 16 MiB: a price table is a list of"):
        PriceTable.load("/dev/zero")
    fifo = tmp_path / "prices.toml"
    os.mkfifo(fifo)
    shipped = PriceTable.load(fifo).require("gpt-4o")  # the shipped rows, nothing read over them
    assert shipped.input is not None and shipped.input > 0
