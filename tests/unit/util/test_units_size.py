"""Sizes as people write them (`tokometer.util.units.byte_size`), for options such as ``bench --max-event-bytes``."""

from __future__ import annotations

import pytest

from tokometer.util.units import byte_size


@pytest.mark.parametrize(("text", "size"), [("65536", 65536), ("1MiB", 1048576), ("512 KiB", 524288),
                                            ("1.5m", 1572864), ("2MB", 2_000_000), ("1GiB", 1 << 30),
                                            ("3k", 3072), ("10b", 10)])
def test_sizes(text: str, size: int) -> None:
    assert byte_size(text) == size


@pytest.mark.parametrize("text", ["", "lots", "1 MiBs", "-1MiB", "1e6"])
def test_not_sizes(text: str) -> None:
    assert byte_size(text) is None
