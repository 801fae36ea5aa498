"""The parallel lane's order (`tests.lane_order`): files with more tests marked ``engine`` or ``slow`` first, the
rest in collection order, each file's tests kept together and in order; checked on a real pytest collection and a
real pytest-xdist run with the lane's own arguments (`scripts/test_lanes.ENGINES_FIRST`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FILES = {
    "test_a_many.py": "def test_1(): pass\ndef test_2(): pass\ndef test_3(): pass\n",
    "test_b_engine.py": "import pytest\npytestmark = pytest.mark.engine\ndef test_1(): pass\n",
    "test_c_plain.py": "def test_1(): pass\n",
    "test_d_two.py": ("import pytest\n@pytest.mark.slow\ndef test_2(): pass\n@pytest.mark.engine\ndef test_1(): pass\n"
                      "def test_0(): pass\n"),
}


def _pytest(folder: Path, *args: str) -> list[str]:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from test_lanes import ENGINES_FIRST
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    (folder / "pytest.ini").write_text("[pytest]\nmarkers =\n    engine: e\n    slow: s\n")
    for name, text in FILES.items():
        (folder / name).write_text(text)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *ENGINES_FIRST, *args],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return [line.strip() for line in done.stdout.splitlines() if "::" in line]


def test_engine_and_slow_files_come_first_most_first(tmp_path: Path) -> None:
    assert _pytest(tmp_path, "--collect-only", "-q") == [
        "test_d_two.py::test_2", "test_d_two.py::test_1", "test_d_two.py::test_0", "test_b_engine.py::test_1",
        "test_a_many.py::test_1", "test_a_many.py::test_2", "test_a_many.py::test_3", "test_c_plain.py::test_1"]


def test_one_xdist_worker_runs_the_files_in_that_order(tmp_path: Path) -> None:
    ran = _pytest(tmp_path, "-n", "1", "--dist", "loadfile", "-v")
    files = list(dict.fromkeys(line.split("::")[0].split()[-1] for line in ran if "PASSED" in line))
    assert files == ["test_d_two.py", "test_b_engine.py", "test_a_many.py", "test_c_plain.py"], ran
