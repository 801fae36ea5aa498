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
import socket
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SimServer, start_gateway
from tests.http_servers import RawServer

PROMPT = "The capital of France is"
ANSWER = (" the", " capital", " of", " the", " country", " of", " France", ".")
"""What vLLM 0.32 (CPU) streamed for ``PROMPT`` with ``max_tokens`` 8: eight text events."""

_HEAD = (b"HTTP/1.1 200 OK\r\ndate: Tue, 01 Dec 2026 12:00:00 GMT\r\nserver: uvicorn\r\n"
         b"content-type: text/event-stream; charset=utf-8\r\ntransfer-encoding: chunked\r\n\r\n")
"""uvicorn's head for vLLM's StreamingResponse: each ``yield`` of the generator becomes one HTTP chunk."""


def _chunked(parts: list[bytes]) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


def vllm_completion_events(model: str, answer: tuple[str, ...] = ANSWER, prompt_tokens: int = 6) -> list[bytes]:
    """vLLM 0.32's ``/v1/completions`` stream, byte for byte: each chunk is
    ``CompletionStreamResponse.model_dump_json(exclude_unset=True)`` (so ``logprobs``, ``stop_reason``,
    ``prompt_token_ids`` and ``token_ids`` come as ``null`` in every event, the finish rides on the last text
    event), then with ``include_usage`` the usage chunk (``exclude_none=True``, vLLM's key order), then
    ``[DONE]`` (vllm/entrypoints/openai/completion/serving.py, checked against the installed source)."""
    head = f'{{"id":"cmpl-9f2c","object":"text_completion","created":1764590000,"model":"{model}","choices":'
    events = []
    for n, text in enumerate(answer):
        finish = '"length"' if n == len(answer) - 1 else "null"
        events.append(f'data: {head}[{{"index":0,"text":{json.dumps(text)},"logprobs":null,"finish_reason":'
                      f'{finish},"stop_reason":null,"prompt_token_ids":null,"token_ids":null}}]}}\n\n'.encode())
    total = prompt_tokens + len(answer)
    events.append(f'data: {head}[],"usage":{{"prompt_tokens":{prompt_tokens},"total_tokens":{total},'
                  f'"completion_tokens":{len(answer)}}}}}\n\n'.encode())
    events.append(b"data: [DONE]\n\n")
    return events


def vllm_chat_events(model: str, answer: tuple[str, ...] = ANSWER, prompt_tokens: int = 6) -> list[bytes]:
    """vLLM 0.32's ``/v1/chat/completions`` stream, byte for byte: the role event (with ``prompt_token_ids``
    and ``prompt_text`` as ``null``), content deltas (``token_ids`` null), the finish on the last one
    (``stop_reason`` too), the usage chunk, ``[DONE]`` (vllm/entrypoints/openai/chat_completion/serving.py)."""
    head = f'{{"id":"chatcmpl-4a1b","object":"chat.completion.chunk","created":1764590000,"model":"{model}",' \
           '"choices":'
    events = [f'data: {head}[{{"index":0,"delta":{{"role":"assistant","content":""}},"logprobs":null,'
              f'"finish_reason":null}}],"prompt_token_ids":null,"prompt_text":null}}\n\n'.encode()]
    for n, text in enumerate(answer):
        last = n == len(answer) - 1
        finish = '"length","stop_reason":null' if last else "null"
        events.append(f'data: {head}[{{"index":0,"delta":{{"content":{json.dumps(text)}}},"logprobs":null,'
                      f'"finish_reason":{finish},"token_ids":null}}]}}\n\n'.encode())
    total = prompt_tokens + len(answer)
    events.append(f'data: {head}[],"usage":{{"prompt_tokens":{prompt_tokens},"total_tokens":{total},'
                  f'"completion_tokens":{len(answer)}}}}}\n\n'.encode())
    events.append(b"data: [DONE]\n\n")
    return events


class VllmBytesServer(RawServer):
    """A raw-socket server written for these tests: answers ``POST /v1/completions`` and
    ``POST /v1/chat/completions`` with vLLM 0.32's exact stream for `ANSWER` (as uvicorn frames it), whatever
    the request asks; the gateway always asks its upstream for a stream with usage."""

    def __init__(self, model: str) -> None:
        super().__init__(self._answer)
        self.model = model

    def _answer(self, conn: socket.socket) -> None:
        chat = self.heads[-1].startswith(b"POST /v1/chat/completions")
        events = vllm_chat_events(self.model) if chat else vllm_completion_events(self.model)
        conn.sendall(_HEAD)
        for event in events:
            conn.sendall(_chunked([event])[:-5])  # one HTTP chunk per event, as uvicorn writes them
        conn.sendall(b"0\r\n\r\n")


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
