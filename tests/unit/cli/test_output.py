"""Consoles of the command line: terminal-sized on a terminal, full-width into a pipe or a file; strings printed as
they are (no rich markup, emoji codes or highlighting read in them)."""

from __future__ import annotations

import io

import pytest
from rich.table import Table
from rich.text import Text

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
    console.print(Text.assemble(("warning:", "yellow"), " " + "a long line that stays one line " * 5))
    text = pipe.getvalue()
    assert "decode tok/s/req p50" in text and "1,234,567.8" in text and "…" not in text
    assert "\x1b[" not in text and text.splitlines()[-1].startswith("warning: a long line")


def test_a_terminal_keeps_rich_s_own_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "77")
    monkeypatch.setattr("sys.stdout", _Terminal())
    assert make_console().width == 77


DATA = "m[/x] [bold]E[max][/bold] :thumbs_up: [red]"


@pytest.mark.parametrize("stderr", [False, True])
@pytest.mark.parametrize("terminal", [False, True])
def test_a_console_prints_brackets_in_data_as_they_are(monkeypatch: pytest.MonkeyPatch, terminal: bool,
                                                       stderr: bool) -> None:
    """No console the command line makes reads markup: a closing tag of no open one is no MarkupError, a tag
    is not swallowed, an emoji code stays text, on a terminal (with colour) as into a pipe."""
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setenv("COLUMNS", "120")
    out = _Terminal() if terminal else io.StringIO()
    monkeypatch.setattr("sys.stderr" if stderr else "sys.stdout", out)
    console = make_console(stderr=stderr)
    assert console.is_terminal is terminal
    console.print(DATA)
    table = Table("label")
    table.add_row(DATA)
    console.print(table)
    lines = out.getvalue().splitlines()
    assert lines[0] == DATA and any(DATA in line for line in lines[1:])
    assert "\x1b[" not in lines[0]  # nothing of it styled
    assert ("\x1b[" in out.getvalue()) is terminal  # while the table's own header is, on a terminal
