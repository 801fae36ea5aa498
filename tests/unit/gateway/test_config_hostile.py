"""A gateway config written to hurt: YAML aliases that make a small file stand for a huge one ("billion
laughs"), nesting past the parsers' depth, a pipe whose writer never writes. Each is one ``ConfigError`` naming
the file, and through ``tokometer gateway --check`` exit status 2 and one line, no traceback, no wait."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import run_cli_here
from tokometer.gateway.config import load_config
from tokometer.util import readlimit
from tokometer.util.errors import ConfigError

_UPSTREAM = "upstreams:\n  - name: a\n    url: http://h:1/v1\n"


def _laughs() -> str:
    """A gateway config whose one route's upstream list is nine levels of ten aliases each: under 1 KiB standing for
    a billion names."""
    levels = ['      - &n0 "a"'] + [f"      - &n{i} [{', '.join([f'*n{i - 1}'] * 10)}]" for i in range(1, 10)]
    return _UPSTREAM + "routes:\n  - model: m\n    upstreams:\n" + "\n".join(levels) + "\n"


def _refused_by_the_command(path: Path, said: str) -> None:
    """``tokometer gateway --config PATH --check``: exit 2, one ``tokometer: error:`` line naming the file and
    saying ``said``."""
    done = run_cli_here("gateway", "--config", str(path), "--check")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"tokometer: error: {path}") and said in lines[0], done.stderr


def test_yaml_aliases_are_refused_before_anything_is_built(tmp_path: Path) -> None:
    """The first alias is the error, at its line: the loader refuses it while composing, so nothing is expanded."""
    path = tmp_path / "g.yaml"
    path.write_text(_laughs())
    assert len(path.read_bytes()) < 1024
    with pytest.raises(ConfigError, match=r"g\.yaml: line 8: YAML aliases \(\*n0\) are not accepted .*: write the "
                                          r"value out in full$"):
        load_config(path, {})
    _refused_by_the_command(path, "YAML aliases (*n0) are not accepted")
    path.write_text(_UPSTREAM + "routes:\n  - &r {model: m, upstreams: [a]}\n  - <<: *r\n    model: n\n")
    with pytest.raises(ConfigError, match=r"line 6: YAML aliases \(\*r\) are not accepted"):  # a merge key's too
        load_config(path, {})


def test_a_yaml_anchor_without_an_alias_is_plain_yaml(tmp_path: Path) -> None:
    path = tmp_path / "g.yml"
    path.write_text(_UPSTREAM + "routes:\n  - &r\n    model: m\n    upstreams: [a]\n")
    assert [r.model for r in load_config(path, {}).routes] == ["m"]


@pytest.mark.parametrize(("name", "text", "kind"), [
    ("flow.yaml", "routes: " + "[" * 100_000, "YAML"),
    ("block.yaml", "routes:\n" + "".join(" " * i + "-\n" for i in range(1, 3000)), "YAML"),
    ("array.toml", "routes = " + "[" * 100_000, "TOML"),
    ("table.toml", "routes = " + "{a = " * 100_000, "TOML"),
])
def test_nesting_past_the_parser_is_one_error(tmp_path: Path, name: str, text: str, kind: str) -> None:
    """Python's YAML and TOML parsers recurse once a level: past the stack that is a RecursionError, said in words."""
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError, match=rf"^{path}: not valid {kind}: nested too deep$"):
        load_config(path, {})
    _refused_by_the_command(path, f"not valid {kind}: nested too deep")


def test_a_config_pipe_whose_writer_never_writes_ends_at_the_deadline(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """``--config`` a FIFO a writer holds open without writing: one line once `READ_DEADLINE_S` (shortened here) has
    passed; with no writer at all it is an empty file, at once."""
    monkeypatch.setattr(readlimit, "READ_DEADLINE_S", 0.3)
    fifo = tmp_path / "g.toml"
    os.mkfifo(fifo)
    _refused_by_the_command(fifo, "upstreams: Field required")  # nobody writing: empty
    holder = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader, so that opening the writer does not wait
    writer = os.open(fifo, os.O_WRONLY)
    try:
        _refused_by_the_command(fifo, "not read within 0.3 s")
    finally:
        os.close(writer)
        os.close(holder)
