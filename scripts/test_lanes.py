"""Run the whole test suite in lanes, so that it fits a 2-core CI machine: `make test` calls this.

Three lanes, each a pytest run of its own:

- ``vllm``: ``tests/vllm`` in one process, started first and left running beside the next lane. Its
  tests share one real vLLM (start-up takes minutes) and run in file order (the last one kills it).
- ``parallel``: every other test not marked ``timing``, spread over worker processes (pytest-xdist,
  ``--dist loadfile``: a file's tests stay on one worker, so its module fixtures start once; the files that start
  engines first, `ENGINES_FIRST`). These tests check behaviour, not time: most of their wall time is spent waiting
  on the servers they start.
- ``timing``: the tests marked ``timing`` (they check times against a schedule or a model of the server),
  one at a time, after the other two lanes have finished, so that nothing else competes for the cores.

A test that fails in the ``parallel`` or the ``vllm`` lane is run once more, alone, after the ``timing`` lane
(lane ``alone``): four workers, the embedded engine and vLLM on two cores can hold a process back for hundreds of
milliseconds, and a test whose premise is a time (a stream's gaps, a 50 ms deadline, vLLM's CPU build streaming
evenly) then fails through no fault of the code. One that passes alone counts as passed, and the closing lines
name it: it belongs in the ``timing`` lane (mark it; a vLLM test's premise is then a quiet host). One that fails
alone too has failed; a lane is forgiven only when every test it failed passed alone. Nothing else is rerun.

Before the lanes that collect every test module start, the package and the tests are byte-compiled once
(`byte_compile`): with ``PYTHONDONTWRITEBYTECODE`` set, every process would otherwise compile them again.

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
TESTS_FAILED = 1
NO_TESTS_COLLECTED = 5
ENGINES_FIRST = ("-p", "tests.lane_order", "--no-loadscope-reorder")
"""The parallel lane's files that start engines go to its workers first (`tests.lane_order`), so none starts last."""


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
        return [*SUITES, "-m", "not timing", "-n", str(workers), "--dist", "loadfile", *ENGINES_FIRST]
    return [*SUITES, "-m", "timing"]


def byte_compile() -> None:
    """Compile the package and the tests once, into the ``__pycache__`` folders git ignores, before a lane starts.

    Where ``PYTHONDONTWRITEBYTECODE`` is set (CI images and sandboxes often set it) Python writes no bytecode for
    what it imports, so each of the hundreds of ``tokometer`` processes the tests start (the CLI, the simulator,
    the gateway) compiled the package's modules again (0.3-0.5 s of CPU each), and each pytest process (a lane,
    each worker of the parallel lane) rewrote the asserts of every test module as it collected them (12 s of its
    20 s collection on this 2-core machine). Both are written here once; every process after reads them, with the
    variable set or not (it stops writing, not reading), and checks each against its source as always."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}

    def run(*commands: list[str]) -> None:
        started = [subprocess.Popen([sys.executable, "-m", *command], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL) for command in commands]
        for process in started:
            process.wait()

    run(["compileall", "-q", "-j", "0", "src", "tests", "scripts"])
    # collecting is what makes pytest rewrite a test module's asserts and cache them (its own .pyc): two halves of
    # the suite side by side, one a core
    collect = ["pytest", "-q", "--collect-only", "-p", "no:cacheprovider"]
    run([*collect, "tests/unit", "tests/fuzz"], [*collect, "tests/integration", "tests/vllm"])


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


def failed_tests(path: Path) -> list[str]:
    """The node ids of the tests that failed or erred in one lane's JUnit XML (``classname`` and ``name``)."""
    if not path.exists():
        return []
    found = []
    for case in ET.parse(path).getroot().iter("testcase"):
        if case.find("failure") is None and case.find("error") is None:
            continue
        parts = case.get("classname", "").split(".")
        for cut in range(len(parts), 0, -1):  # the module is the longest prefix that is a file; a class follows
            module = Path(*parts[:cut]).with_suffix(".py")
            if (ROOT / module).is_file():
                found.append("::".join([module.as_posix(), *parts[cut:], case.get("name", "")]))
                break
    return sorted(set(found))


def counts(path: Path) -> dict[str, int]:
    """Passed, failed, errors and skipped of one lane's JUnit XML (all zero when it wrote none)."""
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    if not path.exists():
        return totals
    for suite in ET.parse(path).getroot().iter("testsuite"):
        for key in totals:
            totals[key] += int(suite.get(key, "0"))
    return totals


RERUN = ("parallel", "vllm")
"""The lanes whose failed tests are run again alone."""


def summary(lanes: list[Lane], folder: Path, confirmed: list[str]) -> tuple[str, bool]:
    """The closing line over all lanes, and whether every lane passed: a test of a `RERUN` lane that passed
    when run again alone (``confirmed``) counts as passed, its first failure not."""
    total = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for lane in lanes:
        if lane.name != "alone":
            for key, value in counts(lane.junit(folder)).items():
                total[key] += value
    failed = total["failures"] + total["errors"] - len(confirmed)
    passed = total["tests"] - failed - total["skipped"]
    # a rerun lane's "tests failed" (1) is forgiven when every one of them passed alone; any other exit status
    # (interrupted, an internal error, a collection error) is not
    def forgiven(lane: Lane) -> bool:
        return (lane.name in RERUN and lane.status == TESTS_FAILED
                and set(failed_tests(lane.junit(folder))) <= set(confirmed))

    ok = failed == 0 and passed > 0 and all(
        lane.status in (0, NO_TESTS_COLLECTED) or forgiven(lane) for lane in lanes if lane.name != "alone")
    return f"lanes: {passed} passed, {failed} failed, {total['skipped']} skipped", ok


def run_alone(failed: list[str], folder: Path, extra: list[str]) -> tuple[Lane, list[str]]:
    """Run the failed tests of the `RERUN` lanes again, one at a time; the lane, and those that passed alone."""
    lane = Lane("alone", failed)
    start(lane, folder, extra, to_log=False)
    finish(lane)
    still = set(failed_tests(lane.junit(folder)))
    ran = counts(lane.junit(folder))["tests"]
    return lane, [test for test in failed if test not in still] if ran else []


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
        byte_compile()  # beside the vLLM lane's start (minutes), before the lanes that collect every test module
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
        confirmed: list[str] = []
        failed = [test for name in RERUN for test in failed_tests(Lane(name, []).junit(folder))]
        if failed:
            alone, confirmed = run_alone(failed, folder, options.pytest_args)
            lanes.append(alone)
        line, ok = summary(lanes, folder, confirmed)
    for lane in lanes:
        print(f"   {lane.name}: exit status {lane.status}, {lane.seconds:.0f} s")
    for test in confirmed:
        print(f"   failed beside the others, passed alone (mark it timing if its premise is a time): {test}")
    print(f"all lanes: {time.monotonic() - started:.0f} s")
    print(line)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
