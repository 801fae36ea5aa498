"""Consoles of the command line: terminal-sized on a terminal, full-width into a pipe or a file."""

from __future__ import annotations

import io

import pytest
from rich.table import Table

from tokometer.cli.output import PIPE_WIDTH, make_console


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("stderr", [False, True])
def test_a_pipe_gets_the_full_width_whatever_columns_says(monkeypatch: pytest.MonkeyPatch, stderr: bool) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    pipe = io.StringIO()
    monkeypatch.setattr("sys.stderr" if stderr else "sys.stdout", pipe)
    console = make_console(stderr=stderr)
    assert console.width == PIPE_WIDTH and not console.is_terminal
    table = Table("decode tok/s/req p50", "output tok/s total")
    table.add_row("3,251.7", "1,234,567.8")
    console.print(table)
    console.print("[yellow]warning:[/yellow] " + "a long line that stays one line " * 5)
    text = pipe.getvalue()
    assert "decode tok/s/req p50" in text and "1,234,567.8" in text and "…" not in text
    assert "\x1b[" not in text and text.splitlines()[-1].startswith("warning: a long line")


def test_a_terminal_keeps_rich_s_own_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "77")
    monkeypatch.setattr("sys.stdout", _Terminal())
    assert make_console().width == 77
