"""The embedded engine for real: llama-server + the bundled Gemma 3 270M on loopback.

The binary comes from the normal lookup ($TOKOMETER_LLAMA_SERVER, PATH, or the cache-dir build
made by ``python -m tokometer.engines.build``); the module is skipped if there is none.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.conftest import require_llama_server
from tests.helpers import kill_parent_and_expect_child_gone
from tokometer.engines import EngineHandle, LlamaCppSettings, find_llama_server, start_llamacpp
from tokometer.engines.build import built_binary_path, read_build_info
from tokometer.engines.cpu import cpu_fingerprint
from tokometer.engines.smoke import SMOKE_TOKENS, smoke_run
from tokometer.util.errors import EngineError

pytestmark = pytest.mark.engine

PROMPT = "The capital of France is"


def _llama_children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True) if "llama-server" in p.name()}


def _post(url: str, body: dict[str, Any], timeout: float = 120.0) -> bytes:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        data: bytes = response.read()
        return data


def _sse(raw: bytes) -> list[dict[str, Any]]:
    events = []
    for line in raw.decode().splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            events.append(json.loads(line.removeprefix("data: ")))
    return events


def _tokenize(engine: EngineHandle, text: str) -> list[int]:
    tokens: list[int] = json.loads(_post(engine.root_url + "/tokenize", {"content": text, "add_special": False}))[
        "tokens"]
    return tokens


@pytest.fixture(scope="module")
def engine() -> Iterator[EngineHandle]:
    require_llama_server()
    with start_llamacpp(LlamaCppSettings(parallel=2)) as handle:
        yield handle
    assert not handle.alive()


def test_streamed_completion_has_tokens_and_timings(engine: EngineHandle) -> None:
    # ignore_eos: the answer runs to n_predict, so every counted token has text. (When the model stops on
    # EOS instead, predicted_n counts the EOS token too, which has no text: tokenize(text) is one short.)
    body = {"prompt": PROMPT, "n_predict": 24, "temperature": 0, "stream": True, "return_tokens": True,
            "ignore_eos": True}
    events = _sse(_post(engine.root_url + "/completion", body))
    final = events[-1]
    assert final["stop"] is True and final["stop_type"] == "limit"
    text = "".join(event.get("content", "") for event in events)
    assert text.strip()
    timings = final["timings"]
    assert timings["predicted_n"] == final["tokens_predicted"] == 24
    # prompt_n leaves out what the slot's prompt cache held (cache_n: with --swa-full, at least the BOS an
    # earlier request left there)
    assert timings["prompt_n"] + timings.get("cache_n", 0) == final["tokens_evaluated"] \
        == len(_tokenize(engine, PROMPT)) + 1  # + BOS
    assert timings["predicted_ms"] > 0 and timings["predicted_per_second"] > 0
    streamed_ids = [token for event in events for token in event.get("tokens", [])]
    assert len(streamed_ids) == 24
    assert _tokenize(engine, text) == streamed_ids  # greedy output is the canonical tokenisation of its text


def test_streamed_chat_has_usage_and_timings(engine: EngineHandle) -> None:
    body = {"model": engine.model, "messages": [{"role": "user", "content": "Name three colours."}],
            "max_tokens": 16, "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}
    events = _sse(_post(engine.openai_url + "/chat/completions", body))
    text = "".join(choice.get("delta", {}).get("content") or "" for e in events for choice in e.get("choices", []))
    assert text
    last = events[-1]
    finish = next(c["finish_reason"] for e in events for c in e.get("choices", []) if c.get("finish_reason"))
    assert last["model"] == engine.model
    completion_tokens = last["usage"]["completion_tokens"]
    assert last["timings"]["predicted_n"] == completion_tokens
    eos = 1 if finish == "stop" else 0  # an end-of-turn token is counted but has no text
    assert len(_tokenize(engine, text)) + eos == completion_tokens


def test_metrics_endpoint(engine: EngineHandle) -> None:
    with urllib.request.urlopen(engine.root_url + "/metrics", timeout=10) as response:
        assert b"llamacpp:" in response.read()


def test_identity(engine: EngineHandle) -> None:
    identity = engine.identity
    json.dumps(identity)  # JSON-able
    assert identity["engine"] == "llama.cpp" and identity["engine_version"]
    assert identity["model"] == engine.model == "gemma-3-270m-q4_k_m"
    assert identity["model_sha256"] == "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
    assert identity["quantization"] == "Q4_K_M"
    assert identity["parallel"] == 2 and identity["ctx_size"] == 8192 and identity["ctx_per_slot"] == 4096
    assert identity["threads"] >= 1
    host = identity["host"]
    assert host["cpu_model"] and host["physical_cores"] >= 1 and host["ram_bytes"] > 2**30
    assert engine.openai_url == engine.root_url + "/v1"


def test_busy_port_is_one_clear_error() -> None:
    before = _llama_children()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(EngineError, match=f"port {port} on 127.0.0.1 is already in use"):
            start_llamacpp(LlamaCppSettings(port=port, parallel=1, ctx_size=2048))
    assert _llama_children() == before


def test_busy_port_seen_by_the_engine_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    # Skip our own probe, so llama-server tries to bind, fails and exits: the same one-line error.
    monkeypatch.setattr("tokometer.engines.llamacpp.port_in_use", lambda host, port: False)
    before = _llama_children()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(EngineError, match="already in use"):
            start_llamacpp(LlamaCppSettings(port=port, parallel=1, ctx_size=2048))
    assert _llama_children() == before


def test_missing_model_file(tmp_path: Path) -> None:
    with pytest.raises(EngineError, match="model file not found"):
        start_llamacpp(LlamaCppSettings(model_path=tmp_path / "missing.gguf"))


def test_not_a_gguf_file(tmp_path: Path) -> None:
    fake = tmp_path / "fake.gguf"
    fake.write_bytes(b"not a model")
    with pytest.raises(EngineError, match="not a GGUF file"):
        start_llamacpp(LlamaCppSettings(model_path=fake))


def test_engine_that_exits_at_start_leaves_nothing() -> None:
    before = _llama_children()
    with pytest.raises(EngineError, match=r"llama-server exited with status 1 .*invalid argument"):
        start_llamacpp(LlamaCppSettings(parallel=1, ctx_size=2048, extra_args=("--no-such-flag",)))
    assert _llama_children() == before


def test_killed_engine_is_noticed() -> None:
    before = _llama_children()
    handle = start_llamacpp(LlamaCppSettings(parallel=1, ctx_size=2048))
    try:
        assert handle.alive() and handle.exit_code() is None
        assert handle.process is not None
        os.kill(handle.process.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while handle.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not handle.alive()
        assert handle.exit_code() == -signal.SIGKILL
        with pytest.raises(EngineError, match=r"^llama-server was killed by SIGKILL \(killed\) while in use: perhaps "
                                              "out of memory"):
            handle.check()
    finally:
        handle.stop()
    handle.stop()  # idempotent
    assert "llama" in handle.log_tail(50).lower()  # the log is kept after stop
    assert _llama_children() == before


def test_the_engine_passes_the_smoke_run() -> None:
    # The real build (or the user's own llama-server) loads the bundled model and generates tokens; the
    # lookup has recorded that the cached build runs on this CPU, so later starts skip the smoke run.
    require_llama_server()
    binary = Path(find_llama_server())
    result = smoke_run(binary)
    assert result.ok and not result.skipped, result.detail
    assert result.detail.startswith(f"generated {SMOKE_TOKENS} tokens in ")
    if binary == built_binary_path():
        assert cpu_fingerprint() in read_build_info()["verified_cpus"]


def test_engine_dies_with_its_sigkilled_parent() -> None:
    # tokometer killed outright (no atexit, no stop()) must not leave llama-server running.
    require_llama_server()
    script = textwrap.dedent("""
        import time
        from tokometer.engines import LlamaCppSettings, start_llamacpp
        engine = start_llamacpp(LlamaCppSettings(parallel=1, ctx_size=2048))
        print(engine.process.pid, engine.process.log_path, flush=True)
        time.sleep(120)
        """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        line = parent.stdout.readline()
        assert line, "the engine did not start"
        pid_text, log_path = line.split()
        engine = psutil.Process(int(pid_text))
        assert "llama-server" in engine.name()
    except BaseException:
        parent.kill()
        raise
    kill_parent_and_expect_child_gone(parent, engine, log_path)
