"""Legacy ``/v1/completions`` through the gateway: every word of the answer reaches the client.

The gateway once read an OpenAI upstream's answer with the adapter its ``api`` named (``openai-chat`` by
default) whatever the endpoint, so the completion chunks of ``/v1/completions`` (``choices[0].text``, no
``delta``) looked empty: a streamed answer kept only its first event (relayed as a "role" event) and its
last (the finish), a non-streamed one came back with ``"text": ""``, and the usage still said 8 tokens.
Found with a real vLLM 0.32 (CPU build); these tests replay vLLM's exact bytes from a raw server, and run
the same requests against `tokometer sim`.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SimServer, start_gateway
from tests.vllm_bytes import ANSWER, PROMPT, VllmBytesServer


def post(url: str, body: dict[str, Any]) -> tuple[int, bytes]:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.status, response.read()


def sse_events(raw: bytes) -> list[Any]:
    """The events of an SSE body: JSON objects, or the string ``[DONE]``."""
    out: list[Any] = []
    for block in raw.split(b"\n\n"):
        for line in block.split(b"\n"):
            if line.startswith(b"data: "):
                payload = line[6:].strip()
                out.append("[DONE]" if payload == b"[DONE]" else json.loads(payload))
    return out


def choice_texts(events: list[Any], chat: bool) -> list[str]:
    """The text of each event that carried any (``delta.content`` for chat, ``text`` for completions)."""
    texts = []
    for event in events:
        if isinstance(event, dict) and event.get("choices"):
            choice = event["choices"][0]
            text = (choice.get("delta") or {}).get("content") if chat else choice.get("text")
            if text:
                texts.append(text)
    return texts


def usages(events: list[Any]) -> list[dict[str, int]]:
    return [e["usage"] for e in events if isinstance(e, dict) and e.get("usage")]


@pytest.fixture
def vllm_bytes() -> Iterator[VllmBytesServer]:
    server = VllmBytesServer("Qwen/Qwen2.5-0.5B-Instruct")
    server.start()
    yield server
    server.stop()


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[Callable[[str], SimServer]]:
    started: list[SimServer] = []

    def make(text: str) -> SimServer:
        path = tmp_path / f"gateway{len(started)}.toml"
        path.write_text(text)
        started.append(start_gateway(path))
        return started[-1]

    yield make
    for server in started:
        server.stop()


@pytest.mark.parametrize("api", ["openai-chat", "openai-completions"])
def test_vllm_completions_reach_the_client_whole(vllm_bytes: VllmBytesServer,
                                                 gateway: Callable[[str], SimServer], api: str) -> None:
    """Whichever OpenAI adapter the upstream is configured with, both endpoints keep every text event: the
    answer is read as the endpoint's chunks, not as the configured api's."""
    gw = gateway(f'[[upstreams]]\nname = "vllm"\nurl = "{vllm_bytes.url}"\napi = "{api}"\n'
                 '[[routes]]\nmodel = "m"\nupstreams = ["vllm"]\n')
    whole = "".join(ANSWER)

    status, raw = post(gw.openai_url + "/completions", {"model": "m", "prompt": PROMPT, "max_tokens": 8,
                                                        "stream": True,
                                                        "stream_options": {"include_usage": True}})
    events = sse_events(raw)
    assert status == 200
    assert choice_texts(events, chat=False) == list(ANSWER)
    assert events[-1] == "[DONE]"
    assert usages(events) == [{"prompt_tokens": 6, "total_tokens": 14, "completion_tokens": 8}]
    finishes = [e["choices"][0]["finish_reason"] for e in events if isinstance(e, dict) and e.get("choices")]
    assert finishes[-1] == "length" and finishes.count("length") == 1

    status, raw = post(gw.openai_url + "/completions", {"model": "m", "prompt": PROMPT, "max_tokens": 8})
    body = json.loads(raw)
    assert status == 200 and body["object"] == "text_completion"
    assert body["choices"][0]["text"] == whole
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 8

    status, raw = post(gw.openai_url + "/chat/completions", {"model": "m", "max_tokens": 8, "stream": True,
                                                             "messages": [{"role": "user", "content": PROMPT}]})
    events = sse_events(raw)
    assert choice_texts(events, chat=True) == list(ANSWER) and usages(events) == []  # usage not asked for
    status, raw = post(gw.openai_url + "/chat/completions", {"model": "m", "max_tokens": 8,
                                                             "messages": [{"role": "user", "content": PROMPT}]})
    body = json.loads(raw)
    assert body["choices"][0]["message"]["content"] == whole and body["usage"]["completion_tokens"] == 8


def test_sim_completions_through_the_gateway(sim_factory: Callable[..., SimServer],
                                            gateway: Callable[[str], SimServer]) -> None:
    """`tokometer sim` behind the gateway (its upstream left at the default ``openai-chat``): every text event
    the simulator sent (its trace) reaches the client, streamed; the non-streamed answer holds every word."""
    sim = sim_factory("--model", "m", "--ttft-ms", "2", "--itl-ms", "1")
    gw = gateway(f'[[upstreams]]\nname = "sim"\nurl = "{sim.openai_url}"\nmodel = "m"\n'
                 '[[routes]]\nmodel = "m"\nupstreams = ["sim"]\n')
    body = {"model": "m", "prompt": PROMPT, "max_tokens": 12, "ignore_eos": True}

    _, raw = post(gw.openai_url + "/completions", {**body, "stream": True, "stream_options": {"include_usage": True}})
    events = sse_events(raw)
    texts = choice_texts(events, chat=False)
    sent = sim.trace()[-1]
    assert len(sent["event_ns"]) == len(texts) == 12  # the simulator's words are one token each
    assert len("".join(texts).split()) == sum(sent["event_tokens"]) == 12
    assert usages(events)[-1]["completion_tokens"] == 12 and events[-1] == "[DONE]"

    _, raw = post(gw.openai_url + "/completions", body)
    answer = json.loads(raw)
    assert len(answer["choices"][0]["text"].split()) == answer["usage"]["completion_tokens"] == 12
