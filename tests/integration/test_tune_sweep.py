"""The sweep against real servers on loopback: each variant's "engine" is a `tokometer sim` process started with the
variant's settings as its flags (its own process group, stopped whole), measured by the real bench run and saved
in a real SQLite store; one variant's flag is refused, so that engine does not start; a real SIGINT cuts the sweep
and the cut tune is resumed."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tokometer.engines.handle import EngineHandle
from tokometer.engines.process import EngineProcess, free_port
from tokometer.engines.ready import wait_ready
from tokometer.store import ResultStore
from tokometer.tune.launch import LaunchedVariant, VariantStartFailed
from tokometer.tune.outcome import Startup, TuneRecord, Variant
from tokometer.tune.saved import load_tune
from tokometer.tune.sweep import bench_workload, run_tune
from tokometer.tune.variants import fingerprint, parse_set, parse_vary, plan_variants
from tokometer.util.errors import EngineError

_WORKLOAD = {"requests": 6, "concurrency": [1], "input_tokens": 16, "output_tokens": 8}


class _SimEngines:
    """Starts `tokometer sim` with a variant's settings as flags (``itl-ms=2`` -> ``--itl-ms 2``), timed from its
    process start to its first answer; the sim refusing a flag's value is a failed start with its own words."""

    def __init__(self) -> None:
        self.started: list[str] = []

    def __call__(self, variant: Variant) -> LaunchedVariant:
        self.started.append(variant.name)
        port = free_port()
        flags = [part for name, value in variant.settings.items() if name != "quantization"  # weights: none here
                 for part in (f"--{name}", value)]
        argv = [sys.executable, "-m", "tokometer", "sim", "--port", str(port), "--model", "sim-model", *flags]
        began = time.perf_counter()
        process = EngineProcess(argv, "sim")
        root = f"http://127.0.0.1:{port}"
        try:
            model = wait_ready(root, process, 60.0)
        except EngineError as exc:
            process.stop()
            raise VariantStartFailed(f"variant {variant.name} did not start: {exc}", process.log_tail(8),
                                     tuple(argv)) from None
        handle = EngineHandle(root, model, {"engine": "sim", "argv": argv}, process)
        return LaunchedVariant(handle, Startup(time.perf_counter() - began), tuple(argv))


class _Quiet:
    def variant_started(self, variant: Variant, done: int, total: int) -> None:
        pass

    def variant_finished(self, outcome: Any) -> None:
        pass

    def note(self, message: str) -> None:
        pass


class _CtrlCAtFirstRequestOf:
    """A bench observer that sends this process a real SIGINT when the first request of variant ``name`` ends."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.current = ""
        self.sent = False

    def step_started(self, index: int, step: Any, limits: Any) -> None:
        pass

    def request_done(self, record: Any) -> None:
        if self.current == self.name and not self.sent:
            self.sent = True
            os.kill(os.getpid(), signal.SIGINT)

    def step_finished(self, result: Any) -> None:
        pass


def _record(name: str) -> TuneRecord:
    variants = plan_variants(parse_set(["ttft-ms=5", "itl-ms=2"]),
                             vary=parse_vary(["itl-ms=1,oops", "ttft-ms=10"]))
    return TuneRecord(name, "sim", fingerprint("sim", variants, _WORKLOAD), 1234, _WORKLOAD, variants)


@pytest.fixture(autouse=True)
def _ctrl_c_as_python_does() -> None:
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        # these tests send SIGINT to their own process, as Ctrl-C does, and need Python's KeyboardInterrupt from
        # it; a runner that installed its own handler (or ignores SIGINT) would be interrupted instead. Under
        # pytest and pytest-xdist's workers, as `make test` and CI run them, the handler is Python's (0 skipped)
        pytest.skip("SIGINT is not Python's default handler in this process")


def test_a_sweep_of_real_servers_cut_by_ctrl_c_and_resumed(tmp_path: Path) -> None:
    store = ResultStore(f"sqlite:///{tmp_path / 'runs.db'}")
    try:
        record = _record("sims")
        engines, cut = _SimEngines(), _CtrlCAtFirstRequestOf("ttft-ms=10")

        def launch(variant: Variant) -> LaunchedVariant:
            cut.current = variant.name
            return engines(variant)

        end = run_tune(record, launch=launch, run_workload=bench_workload(record, store=store, observer=cut),
                       store=store, observer=_Quiet())
        assert end.interrupted and engines.started == ["baseline", "itl-ms=1", "itl-ms=oops", "ttft-ms=10"]
        saved = load_tune(store, "sims")
        assert saved is not None and saved == end.record
        statuses = [o.status for o in saved.outcomes]
        assert statuses == ["finished", "finished", "failed to start", "interrupted"]
        refused = saved.outcomes[2]
        assert refused.run_id is None and "oops" in (refused.engine_last_words or "") and "--itl-ms" in \
            refused.command_line
        _check_runs(store, saved, finished=(0, 1))
        first_runs = [o.run_id for o in saved.outcomes[:2]]

        again = _SimEngines()
        resumed = run_tune(saved, launch=again, run_workload=bench_workload(saved, store=store), store=store,
                           observer=_Quiet())
        assert not resumed.interrupted and again.started == ["ttft-ms=10", "baseline again"]  # finished and
        # refused ones kept; the baseline's second run, last
        assert resumed.record.baseline_again is not None and resumed.record.baseline_again.status == "finished"
        final = load_tune(store, "sims")
        assert final is not None and final == resumed.record and final.finished_at
        assert [o.status for o in final.outcomes] == ["finished", "finished", "failed to start", "finished"]
        assert [o.run_id for o in final.outcomes[:2]] == first_runs
        _check_runs(store, final, finished=(0, 1, 3))
    finally:
        store.close()


def _check_runs(store: ResultStore, record: TuneRecord, finished: tuple[int, ...]) -> None:
    """Each finished variant's run: completed, the tune's seed, labelled, its engine's command line and the tune
    block in its engine identity."""
    for index in finished:
        outcome = record.outcomes[index] if index < len(record.outcomes) else None
        assert outcome is not None and outcome.run_id is not None
        run = store.run(outcome.run_id)
        assert run is not None and run.status == "completed"
        assert run.label == f"tune {record.name}: {outcome.variant.name}"
        assert run.spec["seed"] == record.seed
        assert run.engine is not None and run.engine.argv == outcome.command_line
        assert run.engine.facts["tune"] == {"name": record.name, "variant": outcome.variant.name, "index": index,
                                            "settings": dict(outcome.variant.settings)}
        assert run.engine.facts["startup_s"] == pytest.approx(outcome.startup.first_s if outcome.startup else -1)
        assert f"--itl-ms {outcome.variant.settings['itl-ms']}" in " ".join(run.engine.argv)


class _KillAtFirstRequestOf:
    """A bench observer that SIGKILLs the engine of variant ``name`` when its first request ends."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.current: Variant | None = None
        self.handle: EngineHandle | None = None

    def step_started(self, index: int, step: Any, limits: Any) -> None:
        pass

    def request_done(self, record: Any) -> None:
        if self.current is not None and self.current.name == self.name and self.handle is not None:
            process, self.handle = self.handle.process, None
            assert process is not None
            os.killpg(process.pid, signal.SIGKILL)

    def step_finished(self, result: Any) -> None:
        pass


@pytest.mark.timing  # its premise, the kill landing before the run ends, is a time: run with the cores to itself
def test_an_engine_killed_during_its_run_is_run_failed_and_the_sweep_goes_on(tmp_path: Path) -> None:
    store = ResultStore(f"sqlite:///{tmp_path / 'runs.db'}")
    try:
        variants = plan_variants(parse_set(["ttft-ms=5", "itl-ms=2"]), vary=parse_vary(["itl-ms=1,3"]))
        # 60 requests of about 13 ms one after another: the kill, sent when the first ends, lands while the run
        # has most of its 0.8 s to go, however late a loaded host delivers that first request's end (with 6 the
        # run had 65 ms left and, beside the parallel lane's workers, once finished before the kill: 2026-12-06; with
        # 60, one of 21 runs beside two busy loops on this 2-core host still failed, not seen alone)
        record = TuneRecord("killed", "sim", "f", 99, {**_WORKLOAD, "requests": 60}, variants)
        engines, kill = _SimEngines(), _KillAtFirstRequestOf("itl-ms=1")

        def launch(variant: Variant) -> LaunchedVariant:
            launched = engines(variant)
            kill.current, kill.handle = variant, launched.handle
            return launched

        end = run_tune(record, launch=launch, run_workload=bench_workload(record, store=store, observer=kill),
                       store=store, observer=_Quiet())
        assert not end.interrupted and [o.status for o in end.record.outcomes] == \
            ["finished", "run failed", "finished"]
        died = end.record.outcomes[1]
        assert died.run_id is not None and "exited" in (died.error or "")
        run = store.run(died.run_id)
        assert run is not None and run.status == "failed"
        assert load_tune(store, "killed") == end.record
    finally:
        store.close()


def test_a_variant_that_changes_the_weights_gets_quality_against_the_running_baseline(tmp_path: Path) -> None:
    from tokometer.tune.quality import quality_against_baseline

    store = ResultStore(f"sqlite:///{tmp_path / 'runs.db'}")
    try:
        variants = plan_variants(parse_set(["ttft-ms=5", "itl-ms=2"]), vary=parse_vary(["quantization=Q8_0"]))
        record = TuneRecord("weights", "sim", "f", 5, _WORKLOAD, variants)
        engines = _SimEngines()
        end = run_tune(record, launch=engines, run_workload=bench_workload(record, store=store), store=store,
                       observer=_Quiet(), quality=lambda a, b: quality_against_baseline(a, b, items=2))
        assert engines.started == ["baseline", "quantization=Q8_0", "baseline again", "baseline", "quantization=Q8_0"]
        quality = end.record.outcomes[1].quality
        assert end.record.outcomes[0].quality is None and quality is not None
        assert quality.get("verdict") or quality.get("error")  # quality's own answer, whichever it is
        assert load_tune(store, "weights") == end.record
    finally:
        store.close()
