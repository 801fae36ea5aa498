"""A gateway process with a real vLLM as primary and the embedded llama.cpp engine as backup, and ways to make
vLLM slow (SIGSTOP: it holds every request, as a server stuck in a long batch does) for the tests here."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.conftest import SimServer, start_gateway
from tests.vllm.conftest import VllmServer


def gateway_config(vllm: VllmServer, llamacpp: Any, route: str = "", primary: str = "", tail: str = "") -> str:
    key = f'api_key = "{vllm.api_key}"\n' if vllm.api_key else ""
    return (f'[[upstreams]]\nname = "vllm"\nurl = "{vllm.openai_url}"\nmodel = "{vllm.model}"\n{key}{primary}\n'
            f'[[upstreams]]\nname = "llamacpp"\nurl = "{llamacpp.openai_url}"\nmodel = "{llamacpp.model}"\n'
            f'[[routes]]\nmodel = "chat"\nupstreams = ["vllm", "llamacpp"]\n{route}\n'
            f'[cache]\nenabled = false\n{tail}')


@contextlib.contextmanager
def gateway(path: Path, text: str) -> Iterator[SimServer]:
    path.write_text(text)
    server = start_gateway(path)
    try:
        yield server
    finally:
        server.stop()


def api_server(vllm: VllmServer) -> psutil.Process:
    """vLLM's API server: the process listening on its port, among `tokometer serve`'s descendants."""
    if vllm.serve is None:
        pytest.skip("this test stops or kills the vLLM it started (TOKOMETER_TEST_VLLM_URL points elsewhere)")
    port = int(vllm.root.rsplit(":", 1)[1])
    for process in vllm.processes():
        with contextlib.suppress(psutil.Error):
            if any(c.laddr and c.laddr.port == port and c.status == psutil.CONN_LISTEN
                   for c in process.net_connections("tcp")):
                return process
    raise AssertionError("no process of this vLLM listens on its port")


@contextlib.contextmanager
def stopped(vllm: VllmServer) -> Iterator[None]:
    """vLLM's API server held by SIGSTOP for the block (it accepts connections, answers nothing), then SIGCONT."""
    server = api_server(vllm)
    server.send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        server.send_signal(signal.SIGCONT)
