"""The Ollama launcher against the simulator speaking Ollama's model list and OpenAI completions on loopback.

No Ollama daemon is needed: the simulator answers ``/api/tags``, ``/v1/models`` and ``/v1/completions``;
it has no ``/api/pull``, which exercises the pull error path.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import SimServer
from tokometer.engines.ollama import start_ollama
from tokometer.engines.process import free_port
from tokometer.util.errors import EngineError


def test_ready_model_on_a_running_daemon(sim_factory: Callable[..., SimServer]) -> None:
    sim = sim_factory("--model", "llama3.2:1b")
    with start_ollama("llama3.2:1b", sim.root, pull=False) as handle:
        assert handle.model == "llama3.2:1b"
        assert handle.openai_url == sim.root + "/v1"
        assert handle.identity["engine"] == "ollama"
        assert handle.identity["daemon_started_by_tokometer"] is False
        assert handle.alive() and handle.exit_code() is None
    assert start_ollama("llama3.2:1b", sim.root, pull=False).alive()  # a daemon we did not start is left alone


def test_missing_model_without_pull(sim_factory: Callable[..., SimServer]) -> None:
    sim = sim_factory("--model", "llama3.2:1b")
    with pytest.raises(EngineError, match=r"model 'qwen2.5:7b' is not in Ollama .* `ollama pull qwen2.5:7b`"):
        start_ollama("qwen2.5:7b", sim.root, pull=False)


def test_failed_pull_is_one_clear_error(sim_factory: Callable[..., SimServer]) -> None:
    sim = sim_factory("--model", "llama3.2:1b")
    with pytest.raises(EngineError, match=r"ollama could not pull 'qwen2.5:7b': HTTP 404"):
        start_ollama("qwen2.5:7b", sim.root)


def test_no_daemon_and_no_ollama(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(EngineError, match=r"Ollama is not running at .* `ollama` is not on PATH"):
        start_ollama("llama3.2:1b", url)
