"""The hardware file (`estimate --hardware-file`) and a tune's ``model=`` file are read within bounds: a file far
larger than any hardware table, or a FIFO nobody writes to, is one line naming it, never the machine's memory or a
wait for a writer that never comes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tokometer.perf.hardware import hardware_table
from tokometer.tune.settings import check_settings
from tokometer.util.errors import ConfigError


def test_an_oversized_hardware_file_is_one_line(tmp_path: Path) -> None:
    big = tmp_path / "hw.toml"
    big.write_bytes(b"# " + b"x" * (2 << 20) + b"\n")
    with pytest.raises(ConfigError, match="larger than 1 MiB") as caught:
        hardware_table(big)
    assert "\n" not in str(caught.value)


def test_a_hardware_file_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "hw.toml"
    bad.write_bytes(b"name = \"\xff\"\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        hardware_table(bad)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_fifos_without_a_writer_are_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="no hardware file"):
        hardware_table(fifo)  # not a regular file: refused before it is opened
    with pytest.raises(ConfigError, match="model"):
        check_settings("llamacpp", {"model": str(fifo)})
