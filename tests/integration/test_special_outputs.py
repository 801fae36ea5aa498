"""Outputs that are not regular files (issue 31, deliverable 6): written in place, never replaced, and a failed
write is one line naming the file, exit status 2.

Every case is real: ``/dev/full`` (ENOSPC; as root, where replacing the node would be possible), a FIFO made
with ``mkfifo`` and read by a thread, a pipe's descriptor handed to the command as ``/dev/fd/N`` (a shell's
process substitution), standard output as ``-`` and ``/dev/stdout``, a symbolic link, a Unix socket and a
directory. The commands run in a subprocess, against a real simulator on loopback.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import bench_stored, run_cli

_QUIET = ("--no-check", "--tokenizer", "none", "--server-metrics", "off", "--gpu-metrics", "off", "-q")


def _one_error_line(stderr: str, *fragments: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tokometer: error: "), stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    from tests.conftest import start_sim

    sim = start_sim("--ttft-ms", "1", "--itl-ms", "1")
    try:
        yield sim.openai_url
    finally:
        sim.stop()


@pytest.fixture(scope="module")
def stored(sim_url: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], Path]:
    """``--store STORE RUN`` of one saved run, and the ``bench --json`` file of the same run."""
    directory = tmp_path_factory.mktemp("run")
    store, result = directory / "runs.db", directory / "result.json"
    run = bench_stored(store, "--url", sim_url, *_QUIET, "-c", "1", "-n", "3", "--output-tokens", "4",
                       "--json", str(result))
    return ["--store", str(store), str(run)], result


def _bench(sim_url: str, *outputs: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tokometer", "bench", "--url", sim_url, *_QUIET, "--no-store",
                           "-c", "1", "-n", "2", "--output-tokens", "4", *outputs],
                          capture_output=True, text=True, timeout=120)


def _node(path: str) -> tuple[int, int, int]:
    info = os.lstat(path)
    return stat.S_IFMT(info.st_mode), info.st_rdev, info.st_ino


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/dev/full"), reason="needs root and /dev/full")
def test_bench_and_report_to_dev_full_fail_and_leave_the_device(sim_url: str, stored: tuple[list[str], Path]) -> None:
    before = _node("/dev/full")
    done = _bench(sim_url, "--json", "/dev/full")
    assert done.returncode == 2, done.stderr
    _one_error_line(done.stderr, "cannot write /dev/full", "No space left on device")
    reported = run_cli("report", str(stored[1]), "--format", "json", "-o", "/dev/full")
    assert reported.returncode == 2
    _one_error_line(reported.stderr, "cannot write /dev/full", "No space left on device")
    assert _node("/dev/full") == before and stat.S_ISCHR(before[0])


def test_a_fifo_is_written_in_place(stored: tuple[list[str], Path], tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    before = _node(str(fifo))
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    done = run_cli("report", str(stored[1]), "--format", "json", "-o", str(fifo))
    reader.join(30)
    assert done.returncode == 0, done.stderr
    assert json.loads(got[0])["schema"].startswith("tokometer.bench")
    assert _node(str(fifo)) == before and stat.S_ISFIFO(before[0])


def test_a_fifo_whose_reader_goes_away_is_one_line(stored: tuple[list[str], Path], tmp_path: Path) -> None:
    """The HTML page (~1 MB) is larger than a pipe holds: the writer meets EPIPE once the reader has gone."""
    pytest.importorskip("plotly")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    def read_a_little() -> None:
        with fifo.open("rb") as handle:
            handle.read(10)

    reader = threading.Thread(target=read_a_little)
    reader.start()
    done = run_cli("report", *stored[0], "-o", str(fifo))
    reader.join(30)
    assert done.returncode == 2
    _one_error_line(done.stderr, f"cannot write {fifo}", "Broken pipe")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


@pytest.mark.parametrize("name", ["-", "/dev/stdout"])
def test_standard_output_by_name(sim_url: str, stored: tuple[list[str], Path], name: str) -> None:
    done = run_cli("report", str(stored[1]), "--format", "json", "-o", name)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["schema"].startswith("tokometer.bench")  # stdout holds the file alone
    assert "wrote" in done.stderr
    benched = _bench(sim_url, "--json", name)
    assert benched.returncode == 0, benched.stderr
    assert json.loads(benched.stdout)["status"] == "completed"  # the summary table went to stderr
    assert "TTFT" in benched.stderr


def test_two_outputs_to_standard_output_are_refused(sim_url: str) -> None:
    done = _bench(sim_url, "--json", "-", "--csv", "/dev/stdout")
    assert done.returncode == 2
    _one_error_line(done.stderr, "--json and --csv both write standard output")


def test_a_descriptor_as_process_substitution_gives_it(stored: tuple[list[str], Path]) -> None:
    read_end, write_end = os.pipe()
    child = subprocess.Popen([sys.executable, "-m", "tokometer", "report", str(stored[1]), "--format", "csv", "-o",
                              f"/dev/fd/{write_end}"], pass_fds=(write_end,), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        text = pipe.read().decode()
    _, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    assert text.splitlines()[0].startswith("step,")


def test_a_link_to_a_device_writes_the_device_and_keeps_the_link(stored: tuple[list[str], Path],
                                                                   tmp_path: Path) -> None:
    link = tmp_path / "out.json"
    link.symlink_to("/dev/null")
    done = run_cli("report", str(stored[1]), "--format", "json", "-o", str(link))
    assert done.returncode == 0, done.stderr
    assert link.is_symlink() and os.readlink(link) == "/dev/null"
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_directory_and_a_socket_are_refused_before_the_run(sim_url: str, tmp_path: Path) -> None:
    done = _bench(sim_url, "--json", str(tmp_path))
    assert done.returncode == 2
    _one_error_line(done.stderr, f"{tmp_path} is a directory")
    path = tmp_path / "sock"
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(path))
        done = _bench(sim_url, "--csv", str(path))
        assert done.returncode == 2
        _one_error_line(done.stderr, f"cannot write {path}", "socket")
        assert stat.S_ISSOCK(os.lstat(path).st_mode)
    finally:
        server.close()


def test_standard_output_whose_reader_goes_away_is_one_line(stored: tuple[list[str], Path]) -> None:
    """The page (~1 MB) to a pipe whose reader leaves after 10 bytes: the kernel takes part of a write without
    an error, so only writing the rest again meets EPIPE, which must not be lost."""
    pytest.importorskip("plotly")
    child = subprocess.Popen([sys.executable, "-m", "tokometer", "report", *stored[0], "-o", "-"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert child.stdout is not None and child.stderr is not None
    child.stdout.read(10)
    child.stdout.close()
    with child.stderr:
        err = child.stderr.read().decode()
    assert child.wait(60) == 2, err
    _one_error_line(err, "cannot write standard output", "Broken pipe")
