"""Nothing half-written (issue 22 G): every output is the old file or the whole new one, and a failure names it.

The failures are real: a 64 KiB tmpfs mounted for the test (a full disk, ENOSPC; skipped where mounting is
not permitted), ``RLIMIT_FSIZE`` set in the child process (EFBIG, with SIGXFSZ ignored so the write fails
instead of killing it), ``/dev/full`` as standard output, and SIGTERM sent to a command while it writes.
The commands run as a user runs them, in a subprocess, against a real simulator on loopback.
"""

from __future__ import annotations

import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import SimServer, bench_stored, run_cli

_QUIET = ("--no-check", "--tokenizer", "none", "--server-metrics", "off", "--gpu-metrics", "off", "-q")


def _one_error_line(stderr: str, *fragments: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tokometer: error: "), stderr
    assert "Traceback" not in stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


@pytest.fixture(scope="module")
def stored_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    """``--store STORE RUN``: the arguments of a report of one saved run."""
    from tests.conftest import start_sim

    sim = start_sim("--ttft-ms", "2", "--itl-ms", "1")
    try:
        store = tmp_path_factory.mktemp("store") / "runs.db"
        run = bench_stored(store, "--url", sim.openai_url, *_QUIET, "-c", "1", "-n", "4", "--output-tokens", "8")
        yield ["--store", str(store), str(run)]
    finally:
        sim.stop()


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs: a full disk for real (needs the right to mount, as root in a container has)."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        # a full disk needs a filesystem of its own, and mounting one needs CAP_SYS_ADMIN: the CI machine and
        # `make test` run as root and mount it (0 skipped there); a developer's unprivileged shell cannot, and no
        # other way makes a write fail for want of space (a file size limit fails differently, EFBIG)
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fsize_limit(limit: int) -> Callable[[], None]:
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead of killing the process
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def test_report_on_a_full_disk_keeps_the_old_page_and_names_the_file(stored_run: list[str], tiny_disk: Path) -> None:
    old = tiny_disk / "report.html"
    old.write_text("<html>the previous report</html>")
    done = run_cli("report", *stored_run, "-o", str(old))  # a page of ~1 MB: it cannot fit
    line = _one_error_line(done.stderr, str(old), "No space left on device", "previous report.html is unchanged")
    assert done.returncode == 2, line
    assert old.read_text() == "<html>the previous report</html>"
    assert _leftovers(tiny_disk) == []


def test_bench_json_and_csv_past_the_file_size_limit(sim_factory: Callable[..., SimServer], tmp_path: Path) -> None:
    sim = sim_factory("--ttft-ms", "2", "--itl-ms", "1")
    json_path, csv_path = tmp_path / "run.json", tmp_path / "run.csv"
    json_path.write_text('{"old": true}\n')
    done = subprocess.run([sys.executable, "-m", "tokometer", "bench", "--url", sim.openai_url, *_QUIET, "--no-store",
                           "-c", "1", "-n", "2", "--output-tokens", "4", "--json", str(json_path), "--csv",
                           str(csv_path)], capture_output=True, text=True, timeout=120, preexec_fn=_fsize_limit(4096))
    assert done.returncode == 2, done.stderr
    _one_error_line(done.stderr, str(json_path), "File too large", "previous run.json is unchanged")
    assert json_path.read_text() == '{"old": true}\n'
    assert _leftovers(tmp_path) == []


def test_standard_output_on_a_full_device_is_one_line() -> None:
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "tokometer", "estimate", "--help"], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=60)
    assert done.returncode == 2
    _one_error_line(done.stderr, "cannot write to standard output", "No space left on device")


def test_sigterm_in_the_middle_of_a_write_leaves_the_old_file(tmp_path: Path) -> None:
    """The write is stopped by a real SIGTERM while the temporary file is half full."""
    target = tmp_path / "out.json"
    target.write_text("previous\n")
    script = (f"import os, signal, time\nfrom tokometer.util.atomicfile import atomic_open\n"
              f"with atomic_open({str(target)!r}) as f:\n    f.write('half of the new')\n    f.flush()\n"
              f"    print('writing', flush=True)\n    time.sleep(30)\n")
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline() == "writing\n"
    assert len(_leftovers(tmp_path)) == 1  # the new version is being written beside the old one
    child.send_signal(signal.SIGTERM)
    _, err = child.communicate(timeout=30)
    assert child.returncode == 143 and "Traceback" not in err, err
    assert target.read_text() == "previous\n"
    assert _leftovers(tmp_path) == []


def test_report_killed_at_any_moment_is_the_old_page_or_the_new(stored_run: list[str], tmp_path: Path) -> None:
    page = tmp_path / "existing.html"
    page.write_text("<html>old</html>")
    for delay in (0.3, 0.6, 0.9, 1.2, 1.5, 1.8, 2.4, 3.0):
        child = subprocess.Popen([sys.executable, "-m", "tokometer", "report", *stored_run, "-o",
                                  str(page)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        child.send_signal(signal.SIGTERM)
        child.wait(60)
        text = page.read_text()
        assert text == "<html>old</html>" or (text.rstrip().endswith("</html>") and len(text) > 10_000), text[-200:]
        assert _leftovers(tmp_path) == []
        if text != "<html>old</html>":
            break
    done = run_cli("report", *stored_run, "-o", str(page))
    assert done.returncode == 0 and page.read_text().rstrip().endswith("</html>")


def test_a_replaced_file_keeps_its_mode_and_a_link_its_target(tmp_path: Path) -> None:
    from tokometer.util.atomicfile import write_atomic

    real = tmp_path / "real.csv"
    real.write_text("old")
    real.chmod(0o640)
    link = tmp_path / "link.csv"
    link.symlink_to(real)
    write_atomic(link, "new")
    assert link.is_symlink() and real.read_text() == "new" and real.stat().st_mode & 0o777 == 0o640
    assert _leftovers(tmp_path) == []
