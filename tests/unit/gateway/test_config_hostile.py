"""A gateway config written to hurt: a pipe whose writer never writes is one ``ConfigError`` naming the file,
and through ``tokometer gateway --check`` exit status 2 and one line, no traceback, no wait."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import run_cli_here
from tokometer.util import readlimit


def _refused_by_the_command(path: Path, said: str) -> None:
    """``tokometer gateway --config PATH --check``: exit 2, one ``tokometer: error:`` line naming the file and
    saying ``said``."""
    done = run_cli_here("gateway", "--config", str(path), "--check")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"tokometer: error: {path}") and said in lines[0], done.stderr


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
