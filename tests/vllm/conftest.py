"""A real vLLM (its CPU build, in a venv of its own) for the tests of this directory, started once.

`tokometer serve --engine vllm` starts it the way a user would: the venv and the bundled model that
``make test`` prepared (``tokometer serve --engine vllm --prepare``), the device detected (CPU here),
an API key, a small KV cache. It is shared by every test here (start-up takes minutes) and the
files are numbered in the order they must run: the last one kills vLLM with SIGKILL mid-answer.

Without the prepared venv the tests are skipped, unless ``TOKOMETER_REQUIRE_VLLM=1`` (``make test``),
where they fail. ``TOKOMETER_TEST_VLLM_URL`` (with ``TOKOMETER_TEST_VLLM_KEY`` and
``TOKOMETER_TEST_VLLM_MODEL``) points the tests at a vLLM already running instead, for development;
the tests that need to start or kill their own then skip.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

API_KEY = "tokometer-vllm-test-key"
MAX_MODEL_LEN = 2048
START_TIMEOUT_S = 1500  # on a loaded 2-core machine vLLM's CPU warm-up alone has taken 5+ minutes
# vLLM's own flags for the servers of these tests: eager PyTorch, no torch.compile. On a fresh machine (no compile
# cache: ~/.cache/vllm and inductor's) the CPU build compiles and warms its graph before it answers: measured on
# 2 cores at load 3-5, the shared vLLM's fixture took 440 s compiled against 92 s eager, the pooling one 250 s
# against 83 s, and the find-max test ran no slower (97 s compiled, 86 s eager). What the tests check (counts
# against the server's own, verdicts that follow their own measurements, agreement of log-probabilities, what
# survives a kill) does not depend on the kernels being compiled; `tokometer serve` keeps vLLM's compiled default.
TEST_VLLM_ARGS = ("--enforce-eager",)


@dataclass
class VllmServer:
    """The running vLLM: its root URL, model name, key and (when started here) the `tokometer serve` process."""

    root: str
    model: str
    api_key: str | None
    serve: subprocess.Popen[str] | None = None
    log: Path | None = None
    identity: dict[str, Any] = field(default_factory=dict)

    @property
    def openai_url(self) -> str:
        return self.root + "/v1"

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def call(self, path: str, body: dict[str, Any] | None = None, timeout: float = 120) -> Any:
        """``GET`` (or ``POST`` JSON ``body``) ``path``; the parsed JSON answer."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.root + path, data, {"Content-Type": "application/json",
                                                                  **self.headers()})
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read())

    def metrics(self) -> str:
        request = urllib.request.Request(self.root + "/metrics", headers=self.headers())
        with urllib.request.urlopen(request, timeout=30) as response:
            text: str = response.read().decode()
            return text

    def key_args(self) -> list[str]:
        return ["--api-key", self.api_key] if self.api_key else []

    def processes(self) -> list[psutil.Process]:
        """Every process of this vLLM: `tokometer serve`'s descendants (the reaper, API server, engine core,
        workers)."""
        if self.serve is None:
            return []
        try:
            children: list[psutil.Process] = psutil.Process(self.serve.pid).children(recursive=True)
            return children
        except psutil.NoSuchProcess:
            return []


def require_vllm() -> None:
    """Skip (or, with TOKOMETER_REQUIRE_VLLM=1, fail) when vLLM's venv or the converted model is missing."""
    from tokometer.engines.vllm_env import find_prepared_env
    from tokometer.engines.vllm_model import find_bundled_checkpoint

    missing = [what for what, found in (("vLLM's venv", find_prepared_env()),
                                        ("the bundled model converted for vLLM", find_bundled_checkpoint()))
               if found is None]
    if missing:
        message = f"{' and '.join(missing)} not prepared: run `tokometer serve --engine vllm --prepare`"
        if os.environ.get("TOKOMETER_REQUIRE_VLLM") == "1":
            pytest.fail(message)
        pytest.skip(message)


def _read_ready_line(process: subprocess.Popen[str], log: Path, timeout_s: float) -> dict[str, Any]:
    assert process.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not selector.select(timeout=1.0):
            if process.poll() is not None:
                break
            continue
        line = process.stdout.readline()
        if not line:
            break
        if line.startswith("{"):
            return dict(json.loads(line))
    process.kill()
    raise RuntimeError(f"tokometer serve --engine vllm did not become ready: {log.read_text()[-3000:]}")


def start_vllm_serve(*extra: str, vllm_args: tuple[str, ...] = ()) -> VllmServer:
    """`tokometer serve --engine vllm --json` on a free port (``extra``: serve's options; ``vllm_args``: vLLM's
    own, after ``--``); returns once vLLM answered a real request."""
    from tokometer.engines.process import free_port

    log = Path(tempfile.mkstemp(prefix="tokometer-test-vllm-", suffix=".log")[1])
    port = free_port()
    argv = [sys.executable, "-m", "tokometer", "serve", "--engine", "vllm", "--port", str(port), "--json",
            "--kv-cache-gb", "1", "--max-model-len", str(MAX_MODEL_LEN), *extra, "--", "--api-key", API_KEY,
            *TEST_VLLM_ARGS, *vllm_args]
    with log.open("w") as err:
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, text=True)
    ready = _read_ready_line(process, log, START_TIMEOUT_S)
    return VllmServer(ready["url"], ready["model"], API_KEY, process, log, ready.get("identity", {}))


def stop_vllm_serve(server: VllmServer) -> None:
    if server.serve is None:
        return
    if server.serve.poll() is None:
        server.serve.send_signal(signal.SIGTERM)  # as Ctrl-C; SIGINT may be ignored in a background job
        try:
            server.serve.wait(60)
        except subprocess.TimeoutExpired:
            server.serve.kill()
            server.serve.wait()
    if server.serve.stdout:
        server.serve.stdout.close()


@pytest.fixture(scope="session")
def vllm() -> Iterator[VllmServer]:
    """The shared vLLM of this directory."""
    url = os.environ.get("TOKOMETER_TEST_VLLM_URL")
    if url:
        yield VllmServer(url.rstrip("/"), os.environ.get("TOKOMETER_TEST_VLLM_MODEL", "gemma-3-270m-bf16"),
                         os.environ.get("TOKOMETER_TEST_VLLM_KEY") or None)
        return
    require_vllm()
    # each answer's cached prompt tokens in its usage: what the agents' test holds against vLLM's hit counter
    server = start_vllm_serve(vllm_args=("--enable-prompt-tokens-details",))
    try:
        yield server
    finally:
        stop_vllm_serve(server)
        if server.log is not None:
            server.log.unlink(missing_ok=True)


LORA_ADAPTER = "tenant-lora"
"""The name the LoRA of `lora_ngram_vllm` is served under."""
NGRAM_SPEC: dict[str, Any] = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4,
                              "prompt_lookup_min": 2}
"""The speculative decoding of `lora_ngram_vllm`: n-gram prompt lookup (which the CPU build runs), 3 tokens a draft."""


@dataclass
class LoraNgramVllm:
    """The vLLM of ``test_8_lora.py`` and ``test_8b_speculative.py`` and, when PEFT could not make the LoRA, why."""

    server: VllmServer
    lora_missing: str | None


@pytest.fixture(scope="session")
def _lora_ngram_server() -> Iterator[LoraNgramVllm]:
    if os.environ.get("TOKOMETER_TEST_VLLM_URL"):
        pytest.skip("starts a vLLM of its own, with a LoRA and speculative decoding")
    require_vllm()
    from tokometer.engines.vllm_lora import bundled_lora
    from tokometer.util.errors import EngineError

    lora: tuple[str, ...] = ()
    missing = None
    try:
        lora = ("--enable-lora", "--lora-modules", f"{LORA_ADAPTER}={bundled_lora()}", "--max-lora-rank", "8",
                "--max-loras", "1")
    except EngineError as exc:  # PEFT could not be installed (no package index here): the LoRA tests say so
        missing = str(exc)
    server = start_vllm_serve(vllm_args=(*lora, "--speculative-config", json.dumps(NGRAM_SPEC)))
    try:
        yield LoraNgramVllm(server, missing)
    finally:
        stop_vllm_serve(server)
        if server.log is not None:
            server.log.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def lora_ngram_vllm(request: pytest.FixtureRequest, _lora_ngram_server: LoraNgramVllm) -> Iterator[LoraNgramVllm]:
    """A vLLM of its own for the LoRA tenants and the speculative decoding tests: the bundled model serving its
    LoRA (made with PEFT, `tokometer.engines.vllm_lora`; ``--enable-lora --lora-modules``) and drafting with
    n-gram prompt lookup (``--speculative-config``, `NGRAM_SPEC`).

    One start for both files (a vLLM start is 45-60 s on 2 cores): neither's tests see the other's flag at work
    (the LoRA tests ask for answers whose lengths and adapters vLLM's usage and model names say, which drafting
    does not change; the speculative tests send the base model, no adapter), and the counters the speculative
    tests hold against are read before and after their own run. Stopped after the last module that uses it (not
    at the session's end), so that it is not up beside the later files' vLLMs."""
    yield _lora_ngram_server
    items = request.session.items
    mine = [i for i, item in enumerate(items) if getattr(item, "module", None) is request.module]
    later = items[max(mine) + 1:] if mine else []
    if not any("lora_ngram_vllm" in getattr(item, "fixturenames", ()) for item in later):
        stop_vllm_serve(_lora_ngram_server.server)


@pytest.fixture(scope="session")
def llamacpp() -> Iterator[Any]:
    """The embedded llama.cpp engine (bundled model, 2 slots), beside vLLM."""
    from tests.conftest import require_llama_server
    from tokometer.engines import LlamaCppSettings, start_llamacpp

    require_llama_server()
    with start_llamacpp(LlamaCppSettings(parallel=2)) as handle:
        yield handle
