"""Last of this directory (it kills the shared vLLM): the gateway resumes an answer on llama.cpp when vLLM's
API server is SIGKILLed mid-answer, and nothing of that vLLM is left running afterwards — not its engine
core, not its workers (4 GB) — and `tokometer serve` says what happened."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Any

import psutil

from tests.integration.gateway_streams import metrics, stream_chat
from tests.vllm.conftest import VllmServer
from tests.vllm.gateway_front import api_server, gateway, gateway_config


def test_resume_on_llamacpp_when_vllm_is_killed_and_nothing_of_it_survives(vllm: VllmServer, llamacpp: Any,
                                                                         tmp_path: Path) -> None:
    server = api_server(vllm)
    family = vllm.processes()
    names = {p.name() for p in family}
    assert any(n.startswith("VLLM::") for n in names), names  # the engine core (and workers) beside the API server
    killed = threading.Event()

    def kill_after_three(n: int) -> None:
        if n == 3 and not killed.is_set():
            killed.set()
            server.send_signal(signal.SIGKILL)  # mid-answer: no ending, no shutdown of its own

    config = gateway_config(vllm, llamacpp, primary="retries = 0")
    ask = {"model": "chat", "messages": [{"role": "user", "content": "Tell me a long story about a cat."}],
           "max_tokens": 40, "temperature": 0, "stream_options": {"include_usage": True}}
    with gateway(tmp_path / "gw.toml", config) as gw:
        out = stream_chat(gw.openai_url, ask, on_content=kill_after_three, timeout=300)
        values = metrics(gw.root)
    assert killed.is_set()
    assert out.status == 200 and not out.errors, out.events[-3:]
    assert out.dones == 1 and len(out.usages) == 1 and out.finish_reasons
    assert values['tokometer_gateway_resumes_total{outcome="resumed",reason="reset",route="chat"}'] == 1
    # nothing of that vLLM is left: the reaper took the engine core and workers along
    _, alive = psutil.wait_procs(family, timeout=30)
    assert not alive, [(p.pid, p.name()) for p in alive]
    assert vllm.serve is not None
    code = vllm.serve.wait(60)
    assert code != 0
    assert vllm.log is not None
    deadline = time.monotonic() + 5
    while "SIGKILL" not in vllm.log.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "vllm was killed by SIGKILL" in vllm.log.read_text(), vllm.log.read_text()[-2000:]
