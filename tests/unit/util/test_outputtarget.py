"""`output_target`: what each kind of output name is, decided in one place."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from tokometer.util.errors import OutputError
from tokometer.util.outputtarget import is_standard_output, output_target
from tokometer.util.paths import writable_file_problem


def test_standard_output_by_every_name() -> None:
    for name in ("-", "/dev/stdout", "/proc/self/fd/1", f"/proc/{os.getpid()}/fd/1", "/dev/fd/1"):
        assert output_target(name).kind == "stdout", name
        assert is_standard_output(name)
    assert not is_standard_output(None) and not is_standard_output("out.json")


def test_another_descriptor_is_written_through() -> None:
    read_end, write_end = os.pipe()
    try:
        target = output_target(f"/dev/fd/{write_end}")
        assert (target.kind, target.fd) == ("descriptor", write_end)
        assert output_target("/dev/stderr").kind == "descriptor"
    finally:
        os.close(read_end)
        os.close(write_end)


def test_special_files_are_written_in_place(tmp_path: Path) -> None:
    assert output_target("/dev/null").kind == "in_place"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "to-fifo"
    link.symlink_to(fifo)
    assert output_target(fifo).kind == "in_place" and output_target(link).path == link
    assert writable_file_problem(fifo) is None and writable_file_problem(Path("-")) is None


def test_regular_files_resolve_their_links(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_text("{}")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    assert output_target(link).kind == "file" and output_target(link).path == real
    assert output_target(tmp_path / "new" / "out.json").kind == "file"
    assert output_target(real / "below").kind == "file"  # the writer names the file in the way


def test_directories_block_devices_and_sockets_are_refused(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match="is a directory"):
        output_target(tmp_path)
    path = tmp_path / "sock"
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(path))
        with pytest.raises(OutputError, match="socket"):
            output_target(path)
        assert "socket" in (writable_file_problem(path) or "")
    finally:
        server.close()
    block = next((p for p in ("/dev/loop0", "/dev/sda", "/dev/vda") if Path(p).is_block_device()), None)
    if block is not None:
        with pytest.raises(OutputError, match="block device"):
            output_target(block)
