"""`tokometer top` against real `tokometer sim` processes under load: ``--once --json`` in each naming mode, and
the live view as a person sees it, in a real terminal (tmux), read back with ``capture-pane``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest
import uvloop

from tests.conftest import SimServer, require_llama_server, run_cli, start_gateway
from tests.helpers import bench
from tests.integration.test_observe_dcgm import _Exporter, _Handler, exporter_text
from tokometer.benchmark.run import run_benchmark
from tokometer.benchmark.spec import BenchSpec
from tokometer.observe.prometheus import parse

HAS_TTFT = {"vllm": True, "vllm-v0": True, "sglang": True, "llamacpp": False, "tgi": False}
HAS_KV = {"vllm": True, "vllm-v0": True, "sglang": True, "llamacpp": True, "tgi": False}


def _running(root: str) -> float:
    with urllib.request.urlopen(root + "/metrics", timeout=10) as response:
        snapshot = parse(response.read().decode(), time.perf_counter_ns())
    return snapshot.gauges.get("requests_running", 0.0)


def _under_load(sim: SimServer, seconds: float, concurrency: int = 4, output_tokens: int = 16,
                **extra: Any) -> AbstractContextManager[None]:
    """The simulator serving ``concurrency`` streams for at most ``seconds``: `_load`."""
    return _load(sim.root, sim.openai_url, seconds, concurrency, 8, output_tokens, 30, **extra)


@contextmanager
def _load(root: str, url: str, seconds: float, concurrency: int, input_tokens: int, output_tokens: int,
          start_s: float, **extra: Any) -> Iterator[None]:
    """The server at ``root`` serving ``concurrency`` streams for at most ``seconds`` (bench of ``url`` in a
    thread); entered once its metrics show one running (within ``start_s``). The load ends when the block does: its
    task is cancelled as Ctrl-C cancels a bench (the step in progress ends there), since what the block checks is
    done and the rest of ``seconds`` would only be waited out."""
    errors: list[BaseException] = []
    running: list[tuple[asyncio.AbstractEventLoop, asyncio.Task[Any]]] = []
    stopping = threading.Event()

    async def load() -> Any:
        task = asyncio.current_task()
        assert task is not None
        running.append((asyncio.get_running_loop(), task))
        spec = BenchSpec(url=url, concurrency=[concurrency], requests=None, duration_s=seconds,
                         input_tokens=input_tokens, output_tokens=output_tokens, tokenizer="none", server_metrics="off",
                         gpu_metrics="off", check=False, **extra)
        return await run_benchmark(spec)

    def run() -> None:
        try:
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                runner.run(load())
        except asyncio.CancelledError:
            if not stopping.is_set():  # pragma: no cover - reported below
                raise
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + start_s
    while _running(root) < 1:
        assert time.monotonic() < deadline, errors or "the load never reached the server"
        assert thread.is_alive() or errors, "the load ended before it started"
        time.sleep(0.1)
    try:
        yield
    finally:
        stopping.set()
        for loop, task in running:
            with contextlib.suppress(RuntimeError):  # the load ended by itself and its loop is closed
                loop.call_soon_threadsafe(task.cancel)
        thread.join(seconds + 30)
        assert not thread.is_alive(), "the load did not end"
        assert not errors, errors


@pytest.mark.timing
@pytest.mark.parametrize("mode", ["vllm", "vllm-v0", "sglang", "llamacpp", "tgi"])
def test_once_json_shows_the_load_in_every_naming_mode(sim_factory: Callable[..., SimServer], mode: str) -> None:
    sim = sim_factory("--ttft-ms", "30", "--itl-ms", "5", "--model", "m", "--metrics-names", mode)
    with _under_load(sim, seconds=4):
        done = run_cli("top", sim.root, "--once", "--json", "--interval", "1s", "--gpu-metrics", "off")
    assert done.returncode == 0, done.stderr
    view = json.loads(done.stdout)
    assert view["metrics_url"] == sim.root + "/metrics"
    assert view["source"] == f"tokometer-sim ({mode} names)"
    assert view["samples"] == 2 and view["gaps"] == 0 and view["no_answer_s"] is None
    assert 0.9 <= view["duration_s"] <= 3
    assert 1 <= view["requests_running"] <= 4
    assert view["requests_waiting"] == 0
    assert view["output_tok_s"] > 0 and view["prompt_tok_s"] > 0
    assert ("kv_cache_usage" in view["server"]["gauges"]) == HAS_KV[mode]
    assert view["preemptions"] in (0, None)
    ttft = view["latency_ms"]["ttft"]
    assert (ttft is not None) == HAS_TTFT[mode]
    if ttft is not None and ttft["count"]:
        # the bucket (20 ms, 40 ms] holds the simulator's 30 ms: too wide for a number, so a range
        assert ttft["p50"] is None
        assert {k: ttft["quantiles"]["p50"][k] for k in ("kind", "lower", "upper")} == {
            "kind": "range", "lower": pytest.approx(20.0), "upper": pytest.approx(40.0)}
    assert view["gpus"] == []


@pytest.mark.timing
def test_a_count_added_at_request_ends_says_when_the_window_is_too_short(sim_factory: Callable[..., SimServer]) -> None:
    """The simulator, in llama.cpp's names, counts a request's tokens as it ends (as llama-server does without its
    /slots, which the simulator does not serve): over one half-second interval of 2-second requests the count moves
    once at most, and the frame says that the window is too short for a rate, with no per-scrape max."""
    sim = sim_factory("--ttft-ms", "10", "--itl-ms", "10", "--model", "m", "--metrics-names", "llamacpp")
    with _under_load(sim, seconds=6, output_tokens=200):
        done = run_cli("top", sim.root, "--once", "--json", "--interval", "0.5s", "--gpu-metrics", "off")
        shown = run_cli("top", sim.root, "--once", "--interval", "0.5s", "--gpu-metrics", "off")
    assert done.returncode == 0, done.stderr
    view = json.loads(done.stdout)
    assert view["output_counted"] == "at request end" and view["output_in_progress"] is False
    assert view["output_moved"] <= 1 and view["output_too_short"] is True
    assert shown.returncode == 0, shown.stderr
    assert "the window is too short for a rate" in " ".join(shown.stdout.split())


@pytest.mark.timing
def test_once_json_through_the_gateway(sim_factory: Callable[..., SimServer], tmp_path: Path) -> None:
    sim = sim_factory("--ttft-ms", "30", "--itl-ms", "5", "--model", "m")
    config = tmp_path / "gateway.toml"
    config.write_text(f'[[upstreams]]\nname = "sim"\nurl = "{sim.openai_url}"\nmodel = "m"\n'
                      '[[routes]]\nmodel = "chat"\nupstreams = ["sim"]\n')
    gateway = start_gateway(config)
    try:
        with _under_load(gateway, seconds=4, model="chat"):
            done = run_cli("top", gateway.root, "--once", "--json", "--interval", "1s", "--gpu-metrics", "off")
    finally:
        gateway.stop()
    assert done.returncode == 0, done.stderr
    view = json.loads(done.stdout)
    assert view["source"] == "tokometer-gateway"
    assert 1 <= view["requests_running"] <= 4
    assert view["output_tok_s"] > 0
    ttft = view["latency_ms"]["ttft"]
    assert ttft is not None and ttft["count"] > 0
    p50 = ttft["quantiles"]["p50"]
    assert p50["lower"] <= 30 <= p50["upper"] and p50["kind"] in ("range", "value")
    assert (ttft["p50"] is None) == (p50["kind"] != "value")


def test_gpus_from_a_dcgm_exporter(sim_factory: Callable[..., SimServer]) -> None:
    """Two H100s from a DCGM exporter stand-in (tests/integration/test_observe_dcgm.py's text), beside the server."""
    sim = sim_factory("--ttft-ms", "1", "--itl-ms", "1")
    exporter = _Exporter(("127.0.0.1", 0), _Handler)
    exporter.body, exporter.status = exporter_text().encode(), 200
    thread = threading.Thread(target=exporter.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        dcgm = f"http://127.0.0.1:{exporter.server_address[1]}/metrics"
        done = run_cli("top", sim.root, "--once", "--json", "--interval", "0.3s", "--gpu-metrics", dcgm)
        shown = run_cli("top", sim.root, "--once", "--interval", "0.3s", "--gpu-metrics", dcgm)
    finally:
        exporter.shutdown()
        exporter.server_close()
        thread.join(5)
    assert done.returncode == 0, done.stderr
    first, second = json.loads(done.stdout)["gpus"]
    assert (first["index"], second["index"]) == (0, 1) and first["source"] == "dcgm"
    assert first["now"]["utilization"] == pytest.approx(0.97) and first["now"]["power_limit_w"] == 700
    assert first["now"]["throttle"] == ["power cap"] and second["now"]["throttle"] == ["thermal"]
    assert len(first["history"]["utilization"]) == 2 and first["window"]["samples"] == 2
    assert shown.returncode == 0, shown.stderr
    line = next(x for x in shown.stdout.splitlines() if x.startswith("0 NVIDIA H100 80GB HBM3 (power cap)"))
    assert "97%" in line and "74.9 / 79.2 GiB" in line and "698 / 700 W" in line and "71 °C" in line


def test_no_metrics_at_the_url_is_one_line_and_exit_2(sim_factory: Callable[..., SimServer]) -> None:
    sim = sim_factory("--ttft-ms", "1", "--itl-ms", "1")
    done = run_cli("top", sim.root + "/v1/models/metrics", "--once")
    assert done.returncode == 2
    assert done.stderr.startswith(f"tokometer: error: no server metrics at {sim.root}/v1/models/metrics")
    assert len(done.stderr.splitlines()) == 1
    refused = run_cli("top", "http://127.0.0.1:9/", "--once")
    assert refused.returncode == 2 and "no server metrics at http://127.0.0.1:9/metrics" in refused.stderr
    bad = run_cli("top", sim.root, "--window", "1s", "--interval", "1s")
    assert bad.returncode == 2 and "--window" in bad.stderr


def _require_tmux() -> str:
    path = shutil.which("tmux")
    if path is None:
        if os.environ.get("TOKOMETER_REQUIRE_TMUX") == "1":
            pytest.fail("tmux is required here but missing: apt-get install tmux")
        pytest.skip("no tmux (apt-get install tmux)")
    return path


class _Terminal:
    """A tmux server of the test's own (its own socket) running one command in a 100x30 window."""

    def __init__(self, tmux: str, command: str) -> None:
        self.base = [tmux, "-L", f"tokometer-top-test-{os.getpid()}"]
        subprocess.run([*self.base, "new-session", "-d", "-s", "top", "-x", "100", "-y", "30", command],
                       check=True, env={**os.environ, "TERM": "xterm-256color"})

    def screen(self) -> str:
        return subprocess.run([*self.base, "capture-pane", "-p", "-t", "top"], check=True, capture_output=True,
                              text=True).stdout

    def wait_for(self, pattern: str, timeout: float = 20) -> str:
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if re.search(pattern, screen, re.MULTILINE):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"{pattern!r} never appeared; the screen:\n{screen}")
            time.sleep(0.2)

    def keys(self, *keys: str) -> None:
        subprocess.run([*self.base, "send-keys", "-t", "top", *keys], check=True)

    def close(self) -> None:
        subprocess.run([*self.base, "kill-server"], capture_output=True)


def test_the_live_view_in_a_terminal(sim_factory: Callable[..., SimServer]) -> None:
    tmux = _require_tmux()
    sim = sim_factory("--ttft-ms", "30", "--itl-ms", "5", "--model", "m")
    top = shlex.join([sys.executable, "-m", "tokometer", "top", sim.root, "--interval", "0.5s", "--window", "10s",
                      "--gpu-metrics", "off"])
    terminal = _Terminal(tmux, f"{top}; echo EXIT=$?; sleep 60")
    try:
        with _under_load(sim, seconds=6):
            screen = terminal.wait_for(r"^requests running +[1-9]")
            running = re.search(r"^requests running +(\d+) +([\d.]+) +(\d+) +([▁▂▃▄▅▆▇█]+)", screen, re.MULTILINE)
            assert running, screen
            assert 1 <= int(running.group(1)) <= 4 and int(running.group(3)) <= 4
            screen = terminal.wait_for(r"^output tok/s +[\d,]*[1-9][\d,]*\.\d")
            assert "tokometer top" in screen and f"{sim.root}/metrics" in screen
            assert "tokometer-sim (vllm names)" in screen
            # the 30 ms TTFT lies in (20 ms, 40 ms]: too wide for a number, so shown as the bucket
            assert re.search(r"^TTFT +20–40 +", screen, re.MULTILINE), screen
            assert re.search(r"^ITL/TPOT +", screen, re.MULTILINE), screen
        sim.stop()  # the server goes away: the view says so and keeps going
        screen = terminal.wait_for(r"\(no answer for \d+ s")
        assert "EXIT=" not in screen
        terminal.keys("C-c")
        screen = terminal.wait_for(r"^EXIT=")
        assert "EXIT=0" in screen and "Traceback" not in screen
    finally:
        terminal.close()


@pytest.mark.parametrize(("stop", "status", "said"), [(signal.SIGINT, 0, ""),
                                                     (signal.SIGTERM, 143, "tokometer: terminated (SIGTERM)\n")])
def test_not_on_a_terminal_it_prints_frame_after_frame_until_stopped(
        sim_factory: Callable[..., SimServer], stop: signal.Signals, status: int, said: str) -> None:
    sim = sim_factory("--ttft-ms", "1", "--itl-ms", "1", "--metrics-names", "sglang")
    process = subprocess.Popen([sys.executable, "-m", "tokometer", "top", sim.root, "--interval", "0.3s",
                                "--window", "3s", "--gpu-metrics", "off"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None
    seen = []
    for line in process.stdout:
        seen.append(line)
        if sum(1 for x in seen if x.startswith("tokometer top")) == 3:
            break
    process.send_signal(stop)
    _, err = process.communicate(timeout=20)
    assert process.returncode == status, err
    assert err == said
    assert seen[0].startswith(f"tokometer top  {sim.root}/metrics  tokometer-sim (sglang names)")
    assert "requests running" in "".join(seen)


@pytest.mark.timing
@pytest.mark.engine
def test_once_json_against_the_embedded_engine() -> None:
    require_llama_server()
    from tokometer.engines import LlamaCppSettings, start_llamacpp

    with start_llamacpp(LlamaCppSettings(parallel=2)) as engine, _load(engine.root_url, engine.root_url + "/v1", 6, 2,
                                                                       16, 16, 60):
        # llama.cpp counts a request's tokens as it ends: 2 s holds some of 16 tokens' requests ending
        done = run_cli("top", engine.root_url, "--once", "--json", "--interval", "2s", "--gpu-metrics", "off")
    assert done.returncode == 0, done.stderr
    view = json.loads(done.stdout)
    assert view["source"] == "llamacpp"
    assert view["samples"] == 2
    assert view["requests_running"] is not None and view["requests_running"] >= 0
    assert view["server"]["gauges"]["requests_running"]["max"] >= 1
    assert view["output_tok_s"] is not None and view["output_tok_s"] > 0


@pytest.mark.timing  # its premise: the client reads each token within the frame it was made in
@pytest.mark.engine
def test_llamacpp_tokens_per_second_move_while_requests_generate() -> None:
    """The embedded engine (llama-server b11434) adds a request's tokens to tokens_predicted_total only when it
    ends, so frames from that counter alone say 0 tok/s while answers stream. top reads /slots beside /metrics:
    each frame taken while the answers decode counts the tokens the client received between its two scrapes
    (both stamped with perf_counter_ns, so the client's own event stamps are the truth), and the command's JSON
    says the count is live."""
    require_llama_server()
    from tokometer.engines import LlamaCppSettings, start_llamacpp
    from tokometer.observe.watch import Watch

    # 160 tokens an answer: about 9 s of decoding for two at once on the 2-core AMD EPYC VM (one thread, ~17.7 tokens/s
    # a slot), twice the 4.4 s the three frames and the command take once both decode
    with start_llamacpp(LlamaCppSettings(parallel=2)) as engine:
        results: list[Any] = []
        errors: list[BaseException] = []

        def run() -> None:
            try:
                results.append(bench(engine.root_url + "/v1", concurrency=[2], requests=2, input_tokens=16,
                                     output_tokens=160, tokenizer="none", server_metrics="off", gpu_metrics="off"))
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        def decoding() -> bool:  # both answers past their first token
            with urllib.request.urlopen(engine.root_url + "/slots", timeout=10) as response:
                slots = json.loads(response.read())
            return all(s["is_processing"] and s["next_token"][0]["n_decoded"] > 0 for s in slots)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 120
        while not decoding():
            assert time.monotonic() < deadline and thread.is_alive(), errors or "the engine never ran two requests"
            time.sleep(0.1)
        frames = []
        for _ in range(3):
            watch = Watch.open(engine.root_url, 1.0, "off", start=False)
            view = watch.once(1.0)
            stamps = [s.at_ns for s in watch.sampler.snapshots]
            if view.running == 2 and decoding():  # no answer ended in the frame
                frames.append((view, stamps[0], stamps[-1]))
        done = run_cli("top", engine.root_url, "--once", "--json", "--interval", "1s", "--gpu-metrics", "off")
        thread.join(300)
    assert not errors, errors
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["output_counted"] == "live" and shown["output_in_progress"] is True
    assert frames, "no frame was taken while both answers decoded"
    records = results[0].steps[0].records
    for view, start, end in frames:
        assert view.output_counted == "live" and view.output_in_progress
        received = sum(n for r in records for at, n in zip(r.event_ns, r.event_tokens, strict=True)
                       if start < at <= end)
        counted = view.server.counters["generation_tokens"]
        # a token is counted when made and received a moment later, and /slots is read just after /metrics
        assert abs(counted - received) <= max(6, 0.25 * received), (counted, received)
