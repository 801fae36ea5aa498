"""tokometer bench against the real embedded engine (llama-server + bundled Gemma 3 270M)."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.conftest import require_llama_server, run_cli
from tests.helpers import bench
from tokometer.engines import EngineHandle, LlamaCppSettings, start_llamacpp
from tokometer.tokens import ServerTokenizer

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def engine() -> Iterator[EngineHandle]:
    require_llama_server()
    with start_llamacpp(LlamaCppSettings(parallel=4)) as handle:
        yield handle


@pytest.mark.timing
def test_single_request_and_concurrency_4_counted_by_the_server(engine: EngineHandle) -> None:
    result = bench(engine.openai_url, concurrency=[1, 4], requests=4, input_tokens=32, output_tokens=24,
                   ignore_eos=True)
    for step in result.steps:
        s = step.summary
        assert s.requests_failed == 0, s.error_examples  # also: llama.cpp's closed keep-alives are retried
        assert s.output_tokens_source == {"usage": 4}
        assert s.output_tokens_total == 4 * 24
        assert s.server_prefill_ms.count == 4 and s.server_decode_tok_s.count == 4  # llama.cpp's own timings
        assert s.ttft_ms.p50 is not None and s.tpot_ms.p50 is not None
    # continuous batching: four at once give more in total, each one slower
    one, four = result.steps[0].summary, result.steps[1].summary
    assert four.output_throughput_tok_s > one.output_throughput_tok_s
    assert four.decode_speed_tok_s.p50 is not None and one.decode_speed_tok_s.p50 is not None
    assert four.decode_speed_tok_s.p50 < one.decode_speed_tok_s.p50


def test_token_counts_agree_with_the_models_tokenizer(engine: EngineHandle) -> None:
    tokenizer = ServerTokenizer(engine.root_url)
    result = bench(engine.root_url, api="llamacpp", concurrency=[2], requests=4, input_tokens=48,
                   output_tokens=20, ignore_eos=True)
    step = result.steps[0]
    assert step.summary.requests_failed == 0
    for record in step.records:
        assert record.output_tokens_source == "native"
        assert record.output_tokens == 20 == len(tokenizer.encode(record.output_text))
        # exact-length synthetic prompt: 48 tokens of content, plus the BOS token the server adds
        assert record.input_tokens == 48 + 1
        assert sum(record.event_tokens) == 20  # per-event token ids streamed by the server


def test_bench_without_url_starts_and_stops_the_embedded_engine(tmp_path: Path) -> None:
    require_llama_server()
    out = tmp_path / "embedded.json"
    done = run_cli("bench", "-c", "1,2", "-n", "2", "--output-tokens", "8", "--input-tokens", "16",
                   "--json", str(out), "--store", str(tmp_path / "runs.db"), timeout=300)
    assert done.returncode == 0, done.stderr
    data = json.loads(out.read_text())
    engine = data["engine"]
    assert engine["engine"] == "llama.cpp" and engine["engine_version"]
    assert engine["parallel"] == 4 and engine["threads"] >= 1 and engine["ctx_size"] == 4 * 4096
    assert engine["quantization"] == "Q4_K_M" and engine["model_architecture"] == "gemma3"
    assert engine["model_sha256"] == "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
    assert engine["host"]["physical_cores"] >= 1 and engine["host"]["ram_bytes"] > 0
    assert [s["summary"]["requests_completed"] for s in data["steps"]] == [2, 2]
    assert not [p for p in psutil.process_iter(["name"]) if p.info["name"] == "llama-server"
                and p.ppid() == 1 and str(tmp_path) in " ".join(p.cmdline())]


def _wait_until_it_answers(engine: psutil.Process, deadline: float) -> None:
    """Until the engine's /health answers 200 (a fixed sleep lost the race on a loaded 2-core host)."""
    import urllib.request

    while time.monotonic() < deadline:
        ports = [c.laddr.port for c in engine.net_connections("tcp") if c.status == psutil.CONN_LISTEN]
        for port in ports:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                pass
        time.sleep(0.2)
    raise AssertionError("the embedded engine never answered /health")


def _engine_of(bench_process: subprocess.Popen[str], deadline: float, not_pids: frozenset[int] = frozenset()) -> int:
    """The pid of the llama-server the bench process runs now (other than ``not_pids``)."""
    while time.monotonic() < deadline:
        with contextlib.suppress(psutil.Error):
            engines = [c for c in psutil.Process(bench_process.pid).children(recursive=True)
                       if "llama-server" in c.name() and c.pid not in not_pids
                       and c.status() != psutil.STATUS_ZOMBIE]
            if engines:
                return int(engines[-1].pid)
        time.sleep(0.2)
    raise AssertionError("the embedded engine did not start")


def test_engine_crash_during_a_run_is_one_clear_error(tmp_path: Path) -> None:
    require_llama_server()
    bench_process = subprocess.Popen(
        [sys.executable, "-m", "tokometer", "bench", "-c", "1", "-n", "200", "--output-tokens", "64",
         "--no-store", "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 180
    first = _engine_of(bench_process, deadline)
    with contextlib.suppress(psutil.NoSuchProcess):  # the first engine may answer and be stopped between two looks
        _wait_until_it_answers(psutil.Process(first), deadline)
    # the start-up's second (warm) start replaces the first engine (`tokometer.engines.startup`); the run uses it.
    # On a loaded host a start may be tried again (another port: `launch_llamacpp`), so an engine that goes before
    # it answers is followed to the next one (seen beside the other lanes: NoSuchProcess here).
    seen = {first}
    while True:
        engine_pid = _engine_of(bench_process, deadline, not_pids=frozenset(seen))
        try:
            _wait_until_it_answers(psutil.Process(engine_pid), deadline)
            break
        except psutil.NoSuchProcess:
            seen.add(engine_pid)
    time.sleep(12)  # the run past its check request and its tokenizer, measuring (200 requests take minutes); were
    # it still preparing on a loaded host, the run fails the same way (`run_benchmark` names the engine's exit)
    psutil.Process(engine_pid).send_signal(signal.SIGKILL)
    stdout, stderr = bench_process.communicate(timeout=120)
    assert bench_process.returncode == 1, (stdout, stderr)  # a run that failed part-way, not bad input (2)
    lines = stderr.strip().splitlines()
    assert lines[-1].startswith("tokometer: error: the engine exited during the run (exit code -9)")
    assert "the engine exited during the run" not in stdout  # said once, on stderr
    assert "Traceback" not in stderr
    assert not psutil.pid_exists(engine_pid) or psutil.Process(engine_pid).status() == psutil.STATUS_ZOMBIE


def test_a_repeated_seed_is_answered_from_the_prompt_cache_and_said_so(engine: EngineHandle) -> None:
    """The second of two runs with the same --seed sends the same prompts: llama.cpp answers them from its
    slots' cache (its own ``timings.cache_n``), and the report says so; a fresh seed (the default) does not."""
    args = {"api": "openai-completions", "concurrency": [1], "requests": 3, "input_tokens": 96, "output_tokens": 4,
            "server_metrics": "off"}
    first = bench(engine.openai_url, seed=7, **args).steps[0]
    again = bench(engine.openai_url, seed=7, **args).steps[0]
    fresh = bench(engine.openai_url, **args)
    assert again.summary.prompt_cache_reported == 3
    assert again.summary.prompt_cache_hit_rate is not None and again.summary.prompt_cache_hit_rate > 0.5
    assert any("came from the server's prompt cache" in w for w in again.warnings), again.warnings
    assert first.summary.prompt_cache_hit_rate is not None and first.summary.prompt_cache_hit_rate < 0.10
    assert fresh.spec.seed is not None and fresh.spec.seed != 7
    rate = fresh.steps[0].summary.prompt_cache_hit_rate
    assert rate is not None and rate < 0.10, rate
    assert not any("prompt cache" in w for w in fresh.steps[0].warnings)
