"""The gateway with a real vLLM as primary and llama.cpp as backup: hedging and the circuit breaker when vLLM
is slowed (its API server held by SIGSTOP), and the official `openai` SDK as the client — which found that
the gateway dropped the text of streamed ``/v1/completions`` from vLLM."""

from __future__ import annotations

import http.client
import json
import time
import urllib.request
from pathlib import Path
from typing import Any

from tests.vllm.conftest import VllmServer
from tests.vllm.gateway_front import gateway, gateway_config, stopped

_CHAT = {"model": "chat", "messages": [{"role": "user", "content": "Name three colours."}], "max_tokens": 12,
         "temperature": 0}


def _post(url: str, body: dict[str, Any], timeout: float = 120) -> tuple[dict[str, Any], dict[str, str]]:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read()), {k.lower(): v for k, v in response.headers.items()}


def test_a_stalled_vllm_is_hedged_onto_llamacpp(vllm: VllmServer, llamacpp: Any, tmp_path: Path) -> None:
    config = gateway_config(vllm, llamacpp, route='hedge_after = "1s"', primary="retries = 0")
    with gateway(tmp_path / "gw.toml", config) as gw:
        answer, headers = _post(gw.openai_url + "/chat/completions", _CHAT)  # vLLM answers when it is well
        assert headers["x-tokometer-upstream"] == "vllm", headers
        with stopped(vllm):
            started = time.monotonic()
            answer, headers = _post(gw.openai_url + "/chat/completions", _CHAT)
            took = time.monotonic() - started
        assert headers["x-tokometer-upstream"] == "llamacpp" and headers["x-tokometer-hedge"] == "hedge", headers
        assert answer["choices"][0]["message"]["content"]
        assert 1.0 <= took < 30  # the hedge went out after 1 s, and llama.cpp answered


def test_the_breaker_opens_on_a_stalled_vllm_and_closes_when_it_recovers(vllm: VllmServer, llamacpp: Any,
                                                                         tmp_path: Path) -> None:
    cooldown_s = 15
    config = gateway_config(vllm, llamacpp, primary="retries = 0\nfirst_token_timeout_s = 1\nbreaker_failures = 2\n"
                                                    f"breaker_cooldown_s = {cooldown_s}")
    with gateway(tmp_path / "gw.toml", config) as gw:
        with stopped(vllm):
            for _ in range(2):  # each waits out vLLM's first-token limit, then falls back
                _, headers = _post(gw.openai_url + "/chat/completions", _CHAT)
                assert headers["x-tokometer-upstream"] == "llamacpp"
            with urllib.request.urlopen(gw.root + "/health", timeout=10) as response:
                health = json.loads(response.read())
            state = health["upstreams"]["vllm"]["state"]
            assert health["upstreams"]["vllm"]["consecutive_failures"] >= 2, health
            # open, or already half-open when llama.cpp's two answers outlasted the cooldown on a busy host (a
            # circuit is half-open only after it was open)
            assert state in ("open", "half-open"), health
            if state == "open":
                _, headers = _post(gw.openai_url + "/chat/completions", _CHAT)
                assert headers["x-tokometer-upstream"] == "llamacpp"  # straight to the backup
        time.sleep(cooldown_s)  # past the cooldown: one trial request goes to vLLM, which answers again
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            _, headers = _post(gw.openai_url + "/chat/completions", _CHAT)
            if headers["x-tokometer-upstream"] == "vllm":
                break
            time.sleep(1)
        assert headers["x-tokometer-upstream"] == "vllm"


def test_the_openai_sdk_through_the_gateway_gets_what_vllm_sends(vllm: VllmServer, llamacpp: Any,
                                                                 tmp_path: Path) -> None:
    import openai

    direct = openai.OpenAI(base_url=vllm.openai_url, api_key=vllm.api_key or "none", max_retries=0)
    config = gateway_config(vllm, llamacpp).replace('model = "chat"', f'model = "{vllm.model}"', 1)
    with gateway(tmp_path / "gw.toml", config) as gw:
        via = openai.OpenAI(base_url=gw.openai_url, api_key="none", max_retries=0)
        ask: dict[str, Any] = {"model": vllm.model, "prompt": "The capital of France is", "max_tokens": 8,
                               "temperature": 0}
        want = direct.completions.create(**ask)
        got = via.completions.create(**ask)
        assert want.choices[0].text and got.choices[0].text == want.choices[0].text
        assert got.usage is not None and want.usage is not None
        assert got.usage.completion_tokens == want.usage.completion_tokens
        streamed = "".join(c.choices[0].text for c in via.completions.create(**ask, stream=True) if c.choices)
        assert streamed == want.choices[0].text  # every text event relayed, not only some of them
        chat: dict[str, Any] = {"model": vllm.model, "messages": [{"role": "user", "content": "Say hello."}],
                                "max_tokens": 8, "temperature": 0}
        want_chat = direct.chat.completions.create(**chat).choices[0].message.content
        assert via.chat.completions.create(**chat).choices[0].message.content == want_chat
        parts = [c.choices[0].delta.content or "" for c in
                 via.chat.completions.create(**chat, stream=True, stream_options={"include_usage": True})
                 if c.choices]
        assert "".join(parts) == want_chat
        assert [m.id for m in via.models.list().data]


def test_least_load_reads_vllms_own_metrics_and_routes_around_its_load(vllm: VllmServer, llamacpp: Any,
                                                                       tmp_path: Path) -> None:
    """Least-load routing reads vLLM's ``vllm:num_requests_running``/``waiting`` and KV-cache use from its
    ``/metrics`` (shown in the gateway's ``/health``); while vLLM holds a long answer the gateway never saw, the
    gateway's requests go to llama.cpp; idle, to vLLM (the list's first on a tie)."""
    config = gateway_config(vllm, llamacpp, route='routing = "least-load"\nscrape_interval_s = 0.2')
    long = {"model": vllm.model, "max_tokens": 2000, "ignore_eos": True, "stream": True,
            "messages": [{"role": "user", "content": "Tell a long story."}]}
    with gateway(tmp_path / "gw.toml", config) as gw:
        _, headers = _post(gw.openai_url + "/chat/completions", _CHAT)
        assert headers["x-tokometer-upstream"] == "vllm"  # idle: the list's first
        host, port = vllm.root.removeprefix("http://").rsplit(":", 1)
        held = http.client.HTTPConnection(host, int(port), timeout=600)  # a long answer the gateway never sees
        held.request("POST", "/v1/chat/completions", json.dumps(long), {"Content-Type": "application/json",
                                                                        **vllm.headers()})
        deadline = time.monotonic() + 120
        load: dict[str, Any] = {}
        routed = []
        try:
            # llama.cpp is chosen only while vLLM's reading is fresh and shows its load (stale, the two tie and
            # the list's first wins): on a loaded host a scrape can go stale between the look at /health and the
            # request, so a request routed to vLLM then is looked at again, not taken as the answer
            while time.monotonic() < deadline and "llamacpp" not in routed:
                with urllib.request.urlopen(gw.root + "/health", timeout=10) as response:
                    load = json.loads(response.read())["upstreams"]["vllm"].get("load", {})
                if load.get("held", 0) >= 1 and load.get("fresh"):
                    assert 0 <= load["kv_usage"] <= 1, load
                    routed.append(_post(gw.openai_url + "/chat/completions", _CHAT)[1]["x-tokometer-upstream"])
                time.sleep(0.2)
            assert "llamacpp" in routed, (routed, load)
        finally:
            held.close()  # vLLM aborts a streamed request whose client has gone
