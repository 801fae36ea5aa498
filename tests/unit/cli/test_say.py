"""The command line's lines for a person (`tokometer.cli.say`): what a terminal would act on is written out, and
every ``click.echo`` of the command line that is not a file's content goes through `say`."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tokometer.cli.say import say

CLI = Path(__file__).resolve().parents[3] / "src" / "tokometer" / "cli"

CONTENTS = {
    ("count.py", "dumps"): "JSON written whole (the price table: ASCII escapes)",
    ("count.py", "dumps_readable"): "JSON written whole, its C1, bidi and zero-width characters escaped",
    ("compare.py", "dumps"): "JSON written whole",
    ("doctor.py", "dumps"): "JSON written whole",
    ("quality.py", "dumps"): "JSON written whole",
    ("runs.py", "dumps"): "JSON written whole",
    ("serve.py", "dumps"): "JSON written whole",
    ("top.py", "dumps"): "JSON written whole",
    ("report.py", "text"): "a run's JSON document written to standard output whole (--format json)",
    ("gateway.py", "text"): "the shipped Grafana dashboard, written to standard output whole",
    ("gateway.py", "digest"): "a key's hash: hex digits",
    ("serve.py", "shlex.join"): "the engine's command line (--dry-run): its words whole, as a shell takes them",
    ("terminate.py", "'tokometer: terminated (SIGTERM)'"): "a constant",
    ("say.py", "printable"): "say itself",
}
"""``click.echo`` calls of the command line that write no line for a person, by file and what they write (the
function called, the name, or the constant), and why."""


def test_say_writes_out_what_a_terminal_would_act_on(capsys: pytest.CaptureFixture[str]) -> None:
    say("model m\x1b[2J\x9b\u202e\n  next\tline", err=True)
    say("done")
    captured = capsys.readouterr()
    assert captured.err == "model m\\x1b[2J\\x9b\\u202e\n  next\tline\n" and captured.out == "done\n"


def _written(call: ast.Call) -> str:
    first = call.args[0] if call.args else None
    if isinstance(first, ast.Call):
        return ast.unparse(first.func)
    return ast.unparse(first) if first is not None else ""


def test_every_line_for_a_person_goes_through_say() -> None:
    """A ``click.echo`` whose text is an f-string, a phrase or anything not listed in `CONTENTS` is a line for a
    person that may carry a peer's text: write it with `say`, or list it there with the reason it is a file's
    content."""
    found = set()
    for path in sorted(CLI.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "click.echo":
                found.add((path.name, _written(node)))
    stray = sorted(found - set(CONTENTS))
    assert not stray, f"write these with tokometer.cli.say.say (or say in CONTENTS why they are no line): {stray}"
    assert set(CONTENTS) <= found, f"no longer written, drop from CONTENTS: {sorted(set(CONTENTS) - found)}"
