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


HOSTILE = "m\x1b[2J\x1b]8;;http://evil.example/\x07link\x9b31m\x00\u202etxt\u2066\u200b\x7f"
RAW = ("\x1b[2J", "\x1b]", "\x07", "\x9b", "\x00", "\u202e", "\u2066", "\u200b", "\x7f")
WRITTEN_OUT = "m\\x1b[2J\\x1b]8;;http://evil.example/\\x07link\\x9b31m\\x00\\u202etxt\\u2066\\u200b\\x7f"


@pytest.mark.parametrize("force_color", [False, True])
def test_a_console_writes_out_what_a_terminal_would_act_on(monkeypatch: pytest.MonkeyPatch,
                                                           force_color: bool) -> None:
    """A string printed, a table cell and a `Text` made elsewhere: each non-printable character written out, while
    rich's own escape codes still style the output when colour is on (``FORCE_COLOR``, ``style=``)."""
    if force_color:
        monkeypatch.setenv("FORCE_COLOR", "1")
    else:
        monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)
    out = io.StringIO()  # a pipe: no colour unless FORCE_COLOR asks
    monkeypatch.setattr("sys.stdout", out)
    console = make_console()
    table = Table("model", "n")
    table.add_row(HOSTILE, "1")
    console.print(table)
    console.print(f"model {HOSTILE}", style="bold")
    console.print(Text.assemble(("error", "red"), f" {HOSTILE}"))
    console.print("two\nlines\tand a tab")
    text = out.getvalue()
    assert not [c for c in RAW if c in text], repr(text)
    assert text.count(WRITTEN_OUT) == 2 and "two\nlines   and a tab" in text
    assert WRITTEN_OUT.replace("\\x07", "") in text  # a `Text` drops BEL itself
    table_row = next(line for line in text.splitlines() if WRITTEN_OUT in line and "1" in line.split(WRITTEN_OUT)[1])
    assert "│" in table_row  # the cell was measured as shown: the row is whole, its border after it
    assert ("\x1b[1m" in text and "\x1b[31m" in text) == force_color  # rich's own styles
