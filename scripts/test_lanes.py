"""Run the whole test suite in lanes, so that it fits a 2-core CI machine: `make test` calls this.

Three lanes, each a pytest run of its own:

- ``vllm``: ``tests/vllm`` in one process, started first and left running beside the next lane. Its
  tests share one real vLLM (start-up takes minutes) and run in file order (the last one kills it).
- ``parallel``: every other test not marked ``timing``, spread over worker processes (pytest-xdist,
  ``--dist loadfile``: a file's tests stay on one worker, so its module fixtures start once). These tests
  check behaviour, not time: most of their wall time is spent waiting on the servers they start.
- ``timing``: the tests marked ``timing`` (they check times against a schedule or a model of the server),
  one at a time, after the other two lanes have finished, so that nothing else competes for the cores.

Each lane writes its own JUnit XML; the script prints every lane's output (the vLLM lane's once it is done),
then one closing line over all lanes, and exits non-zero when any lane failed.

    python scripts/test_lanes.py [--workers N] [--lanes vllm,parallel,timing] [-- PYTEST_ARGS...]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LANES = ("vllm", "parallel", "timing")
SUITES = ("tests/unit", "tests/fuzz", "tests/integration")
NO_TESTS_COLLECTED = 5


@dataclass
class Lane:
    """One pytest run of the suite: its name, arguments, and (once done) exit status, time and counts."""

    name: str
    args: list[str]
    process: subprocess.Popen[bytes] | None = None
    log: Path | None = None
    status: int | None = None
    seconds: float = 0.0

    def junit(self, folder: Path) -> Path:
        return folder / f"{self.name}.xml"


def lane_args(name: str, workers: int) -> list[str]:
    """pytest's arguments for lane ``name``."""
    if name == "vllm":
        return ["tests/vllm"]
    if name == "parallel":
        return [*SUITES, "-m", "not timing", "-n", str(workers), "--dist", "loadfile"]
    return [*SUITES, "-m", "timing"]


def start(lane: Lane, folder: Path, extra: list[str], to_log: bool) -> None:
    """Start ``lane``'s pytest; its output goes to a log file when ``to_log``, else to this terminal."""
    command = [sys.executable, "-m", "pytest", "-q", "--durations=15", f"--junitxml={lane.junit(folder)}",
               *lane.args, *extra]
    print(f"== lane {lane.name}: {' '.join(command[1:])}", flush=True)
    output = None
    if to_log:
        lane.log = folder / f"{lane.name}.log"
        output = lane.log.open("wb")
    lane.seconds = time.monotonic()
    lane.process = subprocess.Popen(command, cwd=ROOT, stdout=output, stderr=subprocess.STDOUT if output else None)
    if output is not None:
        output.close()


def finish(lane: Lane) -> None:
    """Wait for ``lane``; print its log if it wrote one."""
    assert lane.process is not None
    lane.status = lane.process.wait()
    lane.seconds = time.monotonic() - lane.seconds
    if lane.log is not None:
        print(f"== lane {lane.name} (run beside the others): its output", flush=True)
        sys.stdout.write(lane.log.read_text(errors="replace"))
    print(f"== lane {lane.name}: exit status {lane.status} in {lane.seconds:.0f} s", flush=True)


def counts(path: Path) -> dict[str, int]:
    """Passed, failed, errors and skipped of one lane's JUnit XML (all zero when it wrote none)."""
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    if not path.exists():
        return totals
    for suite in ET.parse(path).getroot().iter("testsuite"):
        for key in totals:
            totals[key] += int(suite.get(key, "0"))
    return totals


def summary(lanes: list[Lane], folder: Path) -> tuple[str, bool]:
    """The closing line over all lanes, and whether every lane passed."""
    total = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for lane in lanes:
        for key, value in counts(lane.junit(folder)).items():
            total[key] += value
    failed = total["failures"] + total["errors"]
    passed = total["tests"] - failed - total["skipped"]
    ok = all(lane.status in (0, NO_TESTS_COLLECTED) for lane in lanes) and failed == 0 and passed > 0
    return f"lanes: {passed} passed, {failed} failed, {total['skipped']} skipped", ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=int(os.environ.get("TOKOMETER_TEST_WORKERS", "4")),
                        help="worker processes of the parallel lane (default 4, or TOKOMETER_TEST_WORKERS)")
    parser.add_argument("--lanes", default=",".join(LANES), help="which lanes, comma-separated (default: all)")
    parser.add_argument("pytest_args", nargs="*", help="more arguments for every lane's pytest (after --)")
    options = parser.parse_args()
    chosen = [name.strip() for name in options.lanes.split(",") if name.strip()]
    unknown = sorted(set(chosen) - set(LANES))
    if unknown or options.workers < 1:
        parser.error(f"lanes are {', '.join(LANES)}; workers at least 1")
    lanes = [Lane(name, lane_args(name, options.workers)) for name in LANES if name in chosen]
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tokometer-lanes-") as tmp:
        folder = Path(tmp)
        beside = [lane for lane in lanes if lane.name == "vllm"]
        for lane in beside:
            start(lane, folder, options.pytest_args, to_log=True)
        for lane in lanes:
            if lane.name == "parallel":
                start(lane, folder, options.pytest_args, to_log=False)
                finish(lane)
        for lane in beside:
            finish(lane)
        for lane in lanes:
            if lane.name == "timing":
                start(lane, folder, options.pytest_args, to_log=False)
                finish(lane)
        line, ok = summary(lanes, folder)
    for lane in lanes:
        print(f"   {lane.name}: exit status {lane.status}, {lane.seconds:.0f} s")
    print(f"all lanes: {time.monotonic() - started:.0f} s")
    print(line)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
