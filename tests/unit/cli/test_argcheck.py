"""No option that needs a value takes the next option as it, in any command (`tokometer.cli.argcheck`):
``estimate --json --explain`` had written the estimate to a file named ``--explain``."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from tests.conftest import run_cli_here
from tokometer.cli import _COMMANDS, cli
from tokometer.cli.argcheck import swallowed_option


def _value_options() -> list[tuple[str, str]]:
    """(command, option) for every option of every command that needs a value."""
    ctx = click.Context(cli)
    found = []
    for name in sorted(_COMMANDS):
        command = cli.get_command(ctx, name)
        assert command is not None
        found += [(name, param.opts[-1]) for param in command.params if isinstance(param, click.Option)
                  and not (param.is_flag or param.count or param._flag_needs_value)]
    return found


@pytest.mark.parametrize(("command", "option"), _value_options())
def test_every_option_that_needs_a_value_refuses_the_next_option(command: str, option: str) -> None:
    done = run_cli_here(command, option, "--help")
    assert done.returncode == 2 and done.stdout == "", (done.stdout[:200], done.stderr)
    assert done.stderr == (f"tokometer: error: {option} needs a value and would take the option --help as it: give "
                           f"{option} its value before --help, or write {option}=--help if that is its value (see "
                           f"'tokometer {command} --help')\n")


def test_the_estimate_writes_no_file_named_after_an_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    done = run_cli_here("estimate", "--model", "llama-3.1-8b", "--hardware", "H100", "--json", "--explain")
    assert done.returncode == 2 and "--json needs a value and would take the option --explain" in done.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args", [
    ["--seed", "-1"], ["--label", "--not-an-option"], ["--json=--explain"], ["--label", "x", "--", "--seed"],
    ["--find-max", "--rate", "5"]])
def test_a_value_that_only_looks_like_an_option_is_left_as_given(args: list[str]) -> None:
    ctx = click.Context(cli)
    bench = cli.get_command(ctx, "bench")
    assert bench is not None and swallowed_option(bench, args) is None
