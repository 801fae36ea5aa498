"""An import of any size stays within a fixed memory (issue 31, deliverable 4): 200 MB files that are not what
an import takes (zeros, tiny lines, tiny JSON objects, AIPerf-like records missing their fields, one huge
string) are refused in one line, exit status 2, and the command's peak RSS stays under `RSS_BOUND_MB`.

Each import runs in a child of a small Python process that reports ``getrusage(RUSAGE_CHILDREN)``'s peak, so
no other child of the test run is counted. Before the streaming reader these files took 300-840 MB each
(and a file of ``[]`` or of numbers 6-10 GB); the files are generated in well under a second (zeros sparse).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

SIZE = 200 * 2**20
RSS_BOUND_MB = 160
"""The peak RSS allowed: the interpreter and tokometer's imports (~55 MB) plus the reader's window, one line
or one string at most (16 Mi characters), held twice while it grows."""

_MEASURE = ("import resource, subprocess, sys\n"
            "done = subprocess.run([sys.executable, '-m', 'tokometer', 'import', *sys.argv[1:]],"
            " capture_output=True, text=True)\n"
            "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)\n"
            "sys.stderr.write(done.stderr)\n")


def _zeros(path: Path) -> None:
    with path.open("wb") as handle:
        handle.truncate(SIZE)  # sparse


def _repeated(unit: bytes) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        block = unit * (2**20 // len(unit))
        with path.open("wb") as handle:
            for _ in range(SIZE // len(block)):
                handle.write(block)
    return write


def _huge_line(path: Path) -> None:
    with path.open("wb") as handle:
        handle.write(b'{"benchmarks": ["')
        block = b"x" * 2**20
        for _ in range(SIZE // len(block)):
            handle.write(block)
        handle.write(b'"]}')


def _huge_jsonl(path: Path) -> None:
    """A valid AIPerf record (a failed request), then one line of 200 MB."""
    with path.open("wb") as handle:
        handle.write(b'{"metadata": {"request_start_ns": 1, "request_end_ns": 2}, "error": {"message": "x"}}\n')
        block = b"x" * 2**20
        for _ in range(SIZE // len(block)):
            handle.write(block)


FILES = {"zeros.json": _zeros, "tiny-lines.txt": _repeated(b"1\n"), "tiny-objects.jsonl": _repeated(b"{}\n"),
         "aiperf-like.jsonl": _repeated(b'{"metadata":{},"metrics":{}}\n'), "one-huge-string.json": _huge_line,
         "one-huge-line.jsonl": _huge_jsonl}


@pytest.mark.parametrize("name", sorted(FILES))
def test_a_200_mb_file_is_refused_within_a_fixed_memory(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    FILES[name](path)
    assert path.stat().st_size >= SIZE - 2**20
    done = subprocess.run([sys.executable, "-c", _MEASURE, str(path), "--store", str(tmp_path / "runs.db")],
                          capture_output=True, text=True, timeout=300)
    status, peak_mb = (int(word) for word in done.stdout.split())
    lines = done.stderr.strip().splitlines()
    assert status == 2 and len(lines) == 1 and lines[0].startswith("tokometer: error: ") and str(path) in lines[0], \
        done.stderr
    assert peak_mb < RSS_BOUND_MB, f"{name}: {peak_mb} MB peak RSS"
    print(f"{name}: {peak_mb} MB peak RSS; {lines[0]}")


def test_a_200_mb_sharegpt_list_is_read_a_conversation_at_a_time(tmp_path: Path) -> None:
    """20,000 conversations with 10 KB answers: only the prompts are kept (~450 MB peak when parsed whole)."""
    path = tmp_path / "sharegpt.json"
    entry = (b'{"conversations": [{"from": "human", "value": "hello there"}, {"from": "gpt", "value": "'
             + b"y" * 10_000 + b'"}]}')
    count = SIZE // len(entry)
    with path.open("wb") as handle:
        handle.write(b"[")
        for index in range(count):
            handle.write(entry if index == 0 else b"," + entry)
        handle.write(b"]")
    load = (f"from tokometer.datasets.files import ShareGPTSource; print(len(ShareGPTSource({str(path)!r})))")
    measure = ("import resource, subprocess, sys\n"
               f"done = subprocess.run([sys.executable, '-c', {load!r}], capture_output=True, text=True)\n"
               "print(done.stdout.strip(), resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)\n"
               "sys.stderr.write(done.stderr)\n")
    done = subprocess.run([sys.executable, "-c", measure], capture_output=True, text=True, timeout=300)
    prompts, peak_mb = (int(word) for word in done.stdout.split())
    assert prompts == count, done.stderr
    assert peak_mb < RSS_BOUND_MB, f"{peak_mb} MB peak RSS"
