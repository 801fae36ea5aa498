"""Least-load routing in front of two real llama.cpp engines (the embedded engine, bundled model): one kept
busy by requests sent to it directly, which the gateway never saw, reads as busy in its own ``/metrics``
(``llamacpp:requests_processing``), and the gateway's requests go to the other."""

from __future__ import annotations

import contextlib
import json
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import require_llama_server, start_gateway
from tests.integration.test_gateway import _post


@pytest.fixture(scope="module")
def two_engines() -> Iterator[tuple[Any, Any]]:
    from tokometer.engines import LlamaCppSettings, start_llamacpp

    require_llama_server()
    with start_llamacpp(LlamaCppSettings(parallel=2)) as first, start_llamacpp(LlamaCppSettings(parallel=2)) as second:
        yield first, second


def _health(root: str) -> dict[str, Any]:
    with urllib.request.urlopen(root + "/health?detail=1", timeout=10) as response:
        answer: dict[str, Any] = json.loads(response.read())
    return answer


def _quietly(url: str, body: dict[str, Any]) -> None:
    """A long request the test does not wait for (cut when the engine stops at the module's end)."""
    with contextlib.suppress(OSError):
        _post(url, body, timeout=600)


def test_least_load_routes_around_a_busy_llamacpp(two_engines: tuple[Any, Any], tmp_path: Path) -> None:
    first, second = two_engines
    path = tmp_path / "gateway.toml"
    path.write_text(f'[[upstreams]]\nname = "busy"\nurl = "{first.openai_url}"\n'
                    f'[[upstreams]]\nname = "idle"\nurl = "{second.openai_url}"\n'
                    '[[routes]]\nmodel = "chat"\nupstreams = ["busy", "idle"]\nrouting = "least-load"\n'
                    'scrape_interval_s = 0.2\n[cache]\nenabled = false\n')
    gw = start_gateway(path)
    body = {"model": "chat", "max_tokens": 2, "messages": [{"role": "user", "content": "Say hi."}]}
    long = {"max_tokens": 2000, "ignore_eos": True, "messages": [{"role": "user", "content": "Tell a long story."}]}
    threads = [threading.Thread(target=_quietly, args=(first.openai_url + "/chat/completions", long), daemon=True)
               for _ in range(2)]
    try:
        assert _post(gw.openai_url + "/chat/completions", body)[0] == 200  # starts the readings
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            load = _health(gw.root)["upstreams"]["busy"].get("load", {})
            if load.get("held", 0) >= 2 and load.get("fresh"):
                break
            time.sleep(0.1)
        assert _health(gw.root)["upstreams"]["busy"]["load"]["held"] >= 2
        served = Counter(_post(gw.openai_url + "/chat/completions", body)[1]["x-tokometer-upstream"]
                         for _ in range(4))
        assert served == {"idle": 4}
    finally:
        gw.stop()  # the long answers are not waited for: the engines' stop ends them
