"""The gateway serving Anthropic Messages and OpenAI Responses clients, translated to and from every upstream.

Real servers on loopback: the gateway (`tokometer gateway`) in front of `tokometer sim` speaking OpenAI chat
(and, as upstreams, the Messages and Responses APIs), read by raw HTTP/SSE, by `tokometer bench --api
anthropic-messages|openai-responses` and by the official ``anthropic`` and ``openai`` Python SDKs. Tool calls
come from a raw asyncio HTTP server written for the purpose (`_ToolServer`: it answers every chat request with
a stream of OpenAI tool-call deltas and keeps the requests it got), since the simulator sends none.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SimServer
from tests.helpers import bench
from tests.integration.gateway_streams import gateway_factory, metrics
from tokometer.gateway.auth import hash_key

__all__ = ["gateway_factory"]  # the fixture, used by name

MS = 1e6


def _upstream(name: str, url: str, model: str = "sim-model", extra: str = "") -> str:
    return f'[[upstreams]]\nname = "{name}"\nurl = "{url}"\nmodel = "{model}"\n{extra}\n'


def _route(*upstreams: str, extra: str = "") -> str:
    names = ", ".join(f'"{u}"' for u in upstreams)
    return f'[[routes]]\nmodel = "m"\nupstreams = [{names}]\n{extra}\n'


class _Answer:
    """A whole HTTP answer: status, headers (lower-case names), body."""

    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status_code, self.headers, self.body = status, headers, body

    def json(self) -> Any:
        return json.loads(self.body)


def _post(url: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> _Answer:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json",
                                                                      **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return _Answer(response.status, {k.lower(): v for k, v in response.headers.items()}, response.read())
    except urllib.error.HTTPError as error:
        with error:
            return _Answer(error.code, {k.lower(): v for k, v in error.headers.items()}, error.read())


def _events(body: bytes) -> list[tuple[str, dict[str, Any]]]:
    """The named SSE events of a stream: (the ``event:`` name, the ``data:`` JSON), checking they agree."""
    out = []
    for block in body.decode().split("\n\n"):
        if not block.strip():
            continue
        lines = dict(line.split(": ", 1) for line in block.split("\n"))
        data = json.loads(lines["data"])
        assert lines["event"] == data["type"]
        out.append((lines["event"], data))
    return out


def _stream(url: str, body: dict[str, Any], headers: dict[str, str] | None = None
            ) -> tuple[_Answer, list[tuple[str, dict[str, Any]]]]:
    answer = _post(url, {**body, "stream": True}, headers)
    return answer, _events(answer.body) if answer.status_code == 200 else []


def _messages_body(text: str = "hello there", max_tokens: int = 12, **extra: Any) -> dict[str, Any]:
    return {"model": "m", "max_tokens": max_tokens, "messages": [{"role": "user", "content": text}], **extra}


def _anthropic_text(events: list[tuple[str, dict[str, Any]]]) -> str:
    return "".join(d["delta"]["text"] for name, d in events
                   if name == "content_block_delta" and d["delta"]["type"] == "text_delta")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.mark.timing
def test_anthropic_client_in_front_of_an_openai_chat_upstream(sim_factory: Callable[..., SimServer],
                                                              gateway_factory: Callable[[str], SimServer],
                                                              tmp_path: Path) -> None:
    """Anthropic's event sequence, thinking block included, from an OpenAI-chat simulator; the gateway's log and
    metrics measure the answer as bench does."""
    sim = sim_factory("--ttft-ms", "40", "--itl-ms", "3", "--reasoning-tokens", "3")
    log = tmp_path / "requests.jsonl"
    gw = gateway_factory(_upstream("sim", sim.openai_url) + _route("sim") + f'[log]\npath = "{log}"\n'
                         "[cache]\nenabled = false\n")
    response, events = _stream(gw.root + "/v1/messages", _messages_body(system="be brief"))
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    names = [name for name, _ in events]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    blocks = [d["content_block"]["type"] for name, d in events if name == "content_block_start"]
    assert blocks == ["thinking", "text"]
    assert names.count("content_block_stop") == 2
    thinking = [d for name, d in events if name == "content_block_delta" and d["delta"]["type"] == "thinking_delta"]
    assert len(thinking) == 3 and all(d["index"] == 0 for d in thinking)
    assert len(_anthropic_text(events).split()) == 12 - 3
    delta = events[-2][1]
    assert delta["delta"]["stop_reason"] == "max_tokens" and delta["usage"]["output_tokens"] == 12
    start = events[0][1]["message"]
    assert start["role"] == "assistant" and start["content"] == [] and start["model"] == "sim-model"
    sent = sim.trace()[-1]
    assert sent["path"] == "/v1/chat/completions"
    # bench, speaking Messages to the gateway: its TTFT against the gateway's log and metrics of the same answers
    result = bench(gw.root + "/v1", api="anthropic-messages", model="m", concurrency=[1], requests=6,
                   input_tokens=8, output_tokens=16, tokenizer="none")
    summary = result.steps[0].summary
    assert summary.requests_failed == 0, summary.error_examples
    assert summary.output_tokens_total == 6 * 16 and summary.output_tokens_source == {"usage": 6}
    assert summary.ttft_ms.p50 == pytest.approx(40.0, abs=15.0)
    values = metrics(gw.root)
    labels = '{route="m",upstream="sim"}'
    assert values[f"gen_ai_server_time_to_first_token_seconds_count{labels}"] == 7
    assert values[f"gen_ai_server_time_per_output_token_seconds_count{labels}"] == 7
    assert values['tokometer_gateway_tokens_total{route="m",type="output",upstream="sim"}'] == 12 + 6 * 16
    gw.stop()
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(lines) == 7 and all(line["status"] == 200 and line["ttft_ms"] >= 40 for line in lines)
    assert {line["api"] for line in lines} == {"anthropic-messages"}
    gateway_ttft = sorted(line["ttft_ms"] for line in lines[1:])
    assert summary.ttft_ms.p50 is not None
    assert gateway_ttft[3] <= summary.ttft_ms.p50 + 1  # the gateway's first token is before the client's
    assert summary.ttft_ms.p50 - gateway_ttft[3] < 15


def test_responses_client_in_front_of_an_openai_chat_upstream(sim_factory: Callable[..., SimServer],
                                                              gateway_factory: Callable[[str], SimServer]) -> None:
    sim = sim_factory("--ttft-ms", "30", "--itl-ms", "3", "--reasoning-tokens", "2")
    gw = gateway_factory(_upstream("sim", sim.openai_url) + _route("sim") + "[cache]\nenabled = false\n")
    response, events = _stream(gw.root + "/v1/responses", {"model": "m", "input": "hi there", "max_output_tokens": 10,
                                                            "instructions": "be brief"})
    assert response.status_code == 200
    names = [name for name, _ in events]
    assert names[:2] == ["response.created", "response.in_progress"] and names[-1] == "response.incomplete"
    assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
    assert names.count("response.reasoning_text.delta") == 2 and names.count("response.output_text.delta") == 8
    final = events[-1][1]["response"]
    assert final["usage"]["output_tokens"] == 10 and final["incomplete_details"] == {"reason": "max_output_tokens"}
    assert [item["type"] for item in final["output"]] == ["reasoning", "message"]
    text = "".join(d["delta"] for name, d in events if name == "response.output_text.delta")
    assert final["output"][1]["content"][0]["text"] == text
    sent = json.loads(json.dumps(sim.trace()[-1]))
    assert sent["path"] == "/v1/chat/completions"
    result = bench(gw.root + "/v1", api="openai-responses", model="m", concurrency=[1], requests=8,
                   input_tokens=8, output_tokens=16, tokenizer="none")
    summary = result.steps[0].summary
    assert summary.requests_failed == 0, summary.error_examples
    assert summary.output_tokens_total == 8 * 16 and summary.ttft_ms.p50 == pytest.approx(30.0, abs=20.0)
    assert summary.tpot_ms.p50 == pytest.approx(3.0, rel=0.3)


def test_the_official_sdks_read_the_gateway(sim_factory: Callable[..., SimServer],
                                            gateway_factory: Callable[[str], SimServer]) -> None:
    """``anthropic`` and ``openai``, streamed and not, against the gateway in front of an OpenAI-chat simulator."""
    anthropic = pytest.importorskip("anthropic")
    openai = pytest.importorskip("openai")
    sim = sim_factory("--ttft-ms", "5", "--itl-ms", "1")
    gw = gateway_factory(_upstream("sim", sim.openai_url) + _route("sim") + "[cache]\nenabled = false\n")
    claude = anthropic.Anthropic(base_url=gw.root, api_key="unused", max_retries=0)
    with claude.messages.stream(model="m", max_tokens=8, messages=[{"role": "user", "content": "hello"}]) as stream:
        streamed = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert len(streamed.split()) == 8 and final.content[0].text == streamed
    assert final.stop_reason == "max_tokens" and final.usage.output_tokens == 8
    whole = claude.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
    assert whole.type == "message" and len(whole.content[0].text.split()) == 5 and whole.usage.output_tokens == 5
    with pytest.raises(anthropic.NotFoundError) as caught:
        claude.messages.create(model="nope", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
    assert caught.value.body["error"]["type"] == "not_found_error"
    claude.close()
    client = openai.OpenAI(base_url=gw.root + "/v1", api_key="unused", max_retries=0)
    kinds = []
    text = ""
    for event in client.responses.create(model="m", input="hello", max_output_tokens=6, stream=True):
        kinds.append(event.type)
        if event.type == "response.output_text.delta":
            text += event.delta
        if event.type in ("response.completed", "response.incomplete"):
            assert event.response.usage is not None and event.response.usage.output_tokens == 6
            assert event.response.output_text == text
    assert kinds[0] == "response.created" and len(text.split()) == 6
    answer = client.responses.create(model="m", input=[{"role": "user", "content": "hi"}], max_output_tokens=4)
    assert len(answer.output_text.split()) == 4 and answer.usage is not None and answer.usage.output_tokens == 4
    client.close()


def test_fallback_resume_budget_and_cache_on_messages(sim_factory: Callable[..., SimServer],
                                                      gateway_factory: Callable[[str], SimServer],
                                                      tmp_path: Path) -> None:
    """A dead first upstream falls back; one that breaks mid-answer is resumed on the next (one message); an
    answer is cached and replayed in Anthropic's events, and to a Responses client asking the same; a key's
    budget refuses in Anthropic's error shape."""
    backup = sim_factory("--ttft-ms", "5", "--itl-ms", "1", "--model", "b")
    breaking = sim_factory("--ttft-ms", "5", "--itl-ms", "1", "--fault-after-tokens", "4", "--fault", "reset=1")
    dead = f"http://127.0.0.1:{_free_port()}/v1"
    secret = "s3cret"
    log = tmp_path / "requests.jsonl"
    gw = gateway_factory(_upstream("dead", dead, extra="retries = 0") + _upstream("breaking", breaking.openai_url)
                         + _upstream("backup", backup.openai_url)
                         + '[[routes]]\nmodel = "m"\nupstreams = ["dead", "backup"]\n'
                         + '[[routes]]\nmodel = "r"\nupstreams = ["breaking", "backup"]\n'
                         + f'[[keys]]\nname = "team"\nsha256 = "{hash_key(secret)}"\ntokens_per_period = 60\n'
                         + f'[log]\npath = "{log}"\n')
    auth = {"x-api-key": secret, "anthropic-version": "2023-06-01"}
    ask = _messages_body("fall back please", 6, temperature=0)
    response, events = _stream(gw.root + "/v1/messages", ask, auth)
    assert response.status_code == 200 and response.headers["x-tokometer-upstream"] == "backup"
    assert response.headers["x-tokometer-fallback"] == "1" and len(_anthropic_text(events).split()) == 6
    first = _anthropic_text(events)
    response, events = _stream(gw.root + "/v1/messages", {**_messages_body("resume please", 12), "model": "r"}, auth)
    assert response.status_code == 200
    assert [name for name, _ in events].count("message_start") == 1
    assert len(_anthropic_text(events).split()) == 12 and events[-2][1]["usage"]["output_tokens"] == 12
    # the cache: the same request again is a hit, replayed as Anthropic events; a Responses client asking the
    # same (the same chat request inside the gateway) gets the same answer from it
    time.sleep(0.1)  # the answer is stored right after it ends
    response, again = _stream(gw.root + "/v1/messages", ask, auth)
    assert response.headers["x-tokometer-cache"] == "hit" and _anthropic_text(again) == first
    assert again[-2][1]["usage"]["output_tokens"] == 6 and again[-1][0] == "message_stop"
    response, replayed = _stream(gw.root + "/v1/responses", {
        "model": "m", "input": "fall back please", "max_output_tokens": 6, "temperature": 0},
        {"authorization": f"Bearer {secret}"})
    assert response.headers["x-tokometer-cache"] == "hit"
    assert "".join(d["delta"] for name, d in replayed if name == "response.output_text.delta") == first
    # the budget: 60 tokens; each fresh answer costs its prompt and completion
    statuses = []
    for n in range(20):
        answer = _post(gw.root + "/v1/messages", {**_messages_body(f"question {n}", 6), "stream": True}, auth)
        statuses.append(answer.status_code)
        if answer.status_code == 429:
            break
        time.sleep(0.05)  # charging happens right after each answer
    assert statuses[-1] == 429
    error = answer.json()
    assert error["type"] == "error" and error["error"]["type"] == "rate_limit_error"
    assert "budget" in error["error"]["message"]
    gw.stop()
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert lines[0]["fallback"] and lines[0]["upstream"] == "backup" and lines[0]["ttft_ms"] is not None
    assert lines[1]["resumes"] == 1 and lines[1]["served_by"] == ["breaking", "backup"]
    assert lines[2]["cache_hit"] and lines[3]["cache_hit"]
    assert [line["api"] for line in lines[:4]] == ["anthropic-messages"] * 3 + ["openai-responses"]


@pytest.mark.parametrize("api", ["anthropic-messages", "openai-responses"])
def test_a_late_primary_is_hedged_for_messages_and_responses(sim_factory: Callable[..., SimServer],
                                                             gateway_factory: Callable[[str], SimServer],
                                                             api: str) -> None:
    primary = sim_factory("--ttft-ms", "3000", "--itl-ms", "1")
    backup = sim_factory("--ttft-ms", "20", "--itl-ms", "1")
    gw = gateway_factory(_upstream("primary", primary.openai_url, extra="retries = 0")
                         + _upstream("backup", backup.openai_url)
                         + _route("primary", "backup", extra='hedge_after = "150ms"') + "[cache]\nenabled = false\n")
    started = time.perf_counter()
    if api == "anthropic-messages":
        response, events = _stream(gw.root + "/v1/messages", _messages_body("hedge me", 6))
        text = _anthropic_text(events)
    else:
        response, events = _stream(gw.root + "/v1/responses", {"model": "m", "input": "hedge me",
                                                                "max_output_tokens": 6})
        text = "".join(d["delta"] for name, d in events if name == "response.output_text.delta")
    assert time.perf_counter() - started < 1.5  # long before the primary's 3 s first token
    assert response.headers["x-tokometer-upstream"] == "backup" and response.headers["x-tokometer-hedge"] == "hedge"
    assert len(text.split()) == 6
    assert metrics(gw.root)['tokometer_gateway_hedges_total{outcome="hedge",route="m"}'] == 1


def test_errors_are_answered_in_the_clients_shape(sim_factory: Callable[..., SimServer],
                                                  gateway_factory: Callable[[str], SimServer]) -> None:
    sim = sim_factory("--ttft-ms", "1", "--itl-ms", "1")
    gw = gateway_factory(_upstream("sim", sim.openai_url) + _route("sim"))
    answer = _post(gw.root + "/v1/messages", {"model": "m", "messages": [{"role": "user", "content": "x"}]})
    assert answer.status_code == 400
    assert answer.json() == {"type": "error", "error": {"type": "invalid_request_error",
                                                        "message": "invalid request: max_tokens: Field required"}}
    answer = _post(gw.root + "/v1/responses", {"model": "m", "input": "x", "previous_response_id": "r1"})
    assert answer.status_code == 400 and "previous_response_id" in answer.json()["error"]["message"]
    answer = _post(gw.root + "/v1/responses", {"model": "m", "input": "x",
                                                         "tools": [{"type": "web_search"}]})
    assert answer.status_code == 400 and "web_search" in answer.json()["error"]["message"]


@pytest.mark.parametrize("api", ["anthropic-messages", "openai-responses"])
def test_responses_and_messages_upstreams_serve_chat_and_messages_clients(sim_factory: Callable[..., SimServer],
                                                                          gateway_factory: Callable[[str], SimServer],
                                                                          api: str) -> None:
    """Upstreams that speak the Messages or Responses API: an OpenAI chat client and an Anthropic client get
    their own protocol back, with the upstream's usage."""
    sim = sim_factory("--ttft-ms", "5", "--itl-ms", "1")
    gw = gateway_factory(_upstream("sim", sim.openai_url, extra=f'api = "{api}"') + _route("sim")
                         + "[cache]\nenabled = false\n")
    response = _post(gw.root + "/v1/chat/completions", {
        "model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 7, "stream": True,
        "stream_options": {"include_usage": True}})
    chunks = [json.loads(line[6:]) for line in response.body.decode().split("\n\n") if line.startswith("data: {")]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert len(text.split()) == 7 and chunks[-1]["usage"]["completion_tokens"] == 7
    assert sim.trace()[-1]["path"] == ("/v1/messages" if api == "anthropic-messages" else "/v1/responses")
    response, events = _stream(gw.root + "/v1/messages", _messages_body("hello", 5))
    assert len(_anthropic_text(events).split()) == 5 and events[-2][1]["usage"]["output_tokens"] == 5


class _ToolServer:
    """A raw asyncio HTTP server that answers every request with a stream of two tool calls (the first's
    arguments in three pieces) in OpenAI chat's events, or (``api``) the Messages or Responses API's, keeping each
    request body it got."""

    CALLS = (("call_1", "get_weather", ['{"city"', ': "Par', 'is"}']), ("call_2", "get_time", ['{}']))

    def __init__(self, api: str = "openai-chat") -> None:
        self.api = api
        self.bodies: list[dict[str, Any]] = []
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.port = 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        assert self.ready.wait(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self.ready.set()
        self.loop.run_forever()
        server.close()
        self.loop.run_until_complete(server.wait_closed())
        self.loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(
            b"content-length")))
        body = json.loads(await asyncio.wait_for(reader.readexactly(length), 10))
        self.bodies.append(body)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n")
        if self.api != "openai-chat":
            await self._named_events(writer)
            return

        def chunk(delta: dict[str, Any] | None, finish: str | None = None,
                  usage: dict[str, int] | None = None) -> bytes:
            choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
            payload: dict[str, Any] = {"id": "chatcmpl-t", "object": "chat.completion.chunk", "created": 1,
                                       "model": "tools", "choices": choices}
            if usage:
                payload["usage"] = usage
            return b"data: " + json.dumps(payload).encode() + b"\n\n"

        writer.write(chunk({"role": "assistant", "content": ""}))
        for index, (ident, name, pieces) in enumerate(self.CALLS):
            writer.write(chunk({"tool_calls": [{"index": index, "id": ident, "type": "function",
                                                "function": {"name": name, "arguments": ""}}]}))
            for piece in pieces:
                await writer.drain()
                await asyncio.sleep(0.002)
                writer.write(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
        writer.write(chunk({}, "tool_calls") + chunk(None, usage={"prompt_tokens": 20, "completion_tokens": 9,
                                                                  "total_tokens": 29}) + b"data: [DONE]\n\n")
        await writer.drain()
        writer.close()

    async def _named_events(self, writer: asyncio.StreamWriter) -> None:
        """The same two calls in the Messages API's events (``tool_use`` blocks) or the Responses API's
        (``function_call`` items)."""

        def event(payload: dict[str, Any]) -> bytes:
            return f"event: {payload['type']}\ndata: {json.dumps(payload)}\n\n".encode()

        anthropic = self.api == "anthropic-messages"
        if anthropic:
            writer.write(event({"type": "message_start", "message": {"id": "msg_t", "type": "message", "role":
                                "assistant", "content": [], "model": "tools", "usage": {"input_tokens": 20,
                                                                                        "output_tokens": 1}}}))
        else:
            writer.write(event({"type": "response.created", "response": {"id": "resp_t", "status": "in_progress"}}))
        for index, (ident, name, pieces) in enumerate(self.CALLS):
            if anthropic:
                writer.write(event({"type": "content_block_start", "index": index, "content_block": {
                    "type": "tool_use", "id": ident, "name": name, "input": {}}}))
            else:
                writer.write(event({"type": "response.output_item.added", "output_index": index, "item": {
                    "type": "function_call", "id": f"fc_{index}", "call_id": ident, "name": name, "arguments": ""}}))
            for piece in pieces:
                await writer.drain()
                await asyncio.sleep(0.002)
                writer.write(event({"type": "content_block_delta", "index": index, "delta": {
                    "type": "input_json_delta", "partial_json": piece}}) if anthropic else event({
                        "type": "response.function_call_arguments.delta", "output_index": index, "delta": piece}))
            writer.write(event({"type": "content_block_stop", "index": index}) if anthropic else event({
                "type": "response.output_item.done", "output_index": index, "item": {"type": "function_call"}}))
        if anthropic:
            writer.write(event({"type": "message_delta", "delta": {"stop_reason": "tool_use"},
                                "usage": {"output_tokens": 9}}) + event({"type": "message_stop"}))
        else:
            writer.write(event({"type": "response.completed", "response": {
                "id": "resp_t", "status": "completed", "output": [{"type": "function_call"}],
                "usage": {"input_tokens": 20, "output_tokens": 9}}}))
        await writer.drain()
        writer.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


@pytest.fixture
def tool_server() -> Iterator[_ToolServer]:
    server = _ToolServer()
    yield server
    server.stop()


def test_tool_calls_translate_between_protocols(tool_server: _ToolServer,
                                                gateway_factory: Callable[[str], SimServer]) -> None:
    """A client's tool definitions reach an OpenAI-chat upstream as chat tools; the model's tool-call deltas
    reach an Anthropic client as ``tool_use`` blocks and a Responses client as ``function_call`` items."""
    gw = gateway_factory(_upstream("tools", tool_server.url) + _route("tools") + "[cache]\nenabled = false\n")
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    response, events = _stream(gw.root + "/v1/messages", _messages_body(
        "weather?", 50, tools=[{"name": "get_weather", "description": "the weather", "input_schema": schema}],
        tool_choice={"type": "any"}))
    assert response.status_code == 200
    sent = tool_server.bodies[-1]
    assert sent["tools"] == [{"type": "function", "function": {"name": "get_weather", "description": "the weather",
                                                               "parameters": schema}}]
    assert sent["tool_choice"] == "required"
    starts = [d["content_block"] for name, d in events if name == "content_block_start"]
    assert starts == [{"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {}},
                      {"type": "tool_use", "id": "call_2", "name": "get_time", "input": {}}]
    partial = [d for name, d in events if name == "content_block_delta"]
    assert all(d["delta"]["type"] == "input_json_delta" for d in partial)
    assert json.loads("".join(d["delta"]["partial_json"] for d in partial if d["index"] == 0)) == {"city": "Paris"}
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use" and events[-2][1]["usage"]["output_tokens"] == 9
    whole = _post(gw.root + "/v1/messages", _messages_body("weather?", 50)).json()
    assert whole["stop_reason"] == "tool_use"
    assert [(b["type"], b["name"], b["input"]) for b in whole["content"]] == [
        ("tool_use", "get_weather", {"city": "Paris"}), ("tool_use", "get_time", {})]
    # a Responses client, with the conversation's earlier call and its output in the input
    response, events = _stream(gw.root + "/v1/responses", {"model": "m", "tools": [
        {"type": "function", "name": "get_weather", "parameters": schema}], "input": [
        {"role": "user", "content": "weather?"},
        {"type": "function_call", "call_id": "call_0", "name": "get_weather", "arguments": '{"city": "Oslo"}'},
        {"type": "function_call_output", "call_id": "call_0", "output": "sunny"}]})
    sent = tool_server.bodies[-1]
    assert sent["messages"][1]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert sent["messages"][2] == {"role": "tool", "tool_call_id": "call_0", "content": "sunny"}
    added = [d["item"] for name, d in events if name == "response.output_item.added"]
    assert [(i["type"], i["call_id"], i["name"]) for i in added] == [("function_call", "call_1", "get_weather"),
                                                                    ("function_call", "call_2", "get_time")]
    done = [d["arguments"] for name, d in events if name == "response.function_call_arguments.done"]
    assert done == ['{"city": "Paris"}', "{}"]
    final = events[-1][1]["response"]
    assert [item["arguments"] for item in final["output"]] == done and final["status"] == "completed"
    # an OpenAI client, not streamed: the calls gathered into the message
    answer = _post(gw.root + "/v1/chat/completions", {
        "model": "m", "messages": [{"role": "user", "content": "weather?"}]}).json()
    choice = answer["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert [c["function"]["arguments"] for c in choice["message"]["tool_calls"]] == done
    assert choice["message"]["content"] is None  # a message that only calls tools: null, as the upstream said


def test_the_sdks_read_translated_tool_calls(tool_server: _ToolServer,
                                             gateway_factory: Callable[[str], SimServer]) -> None:
    """The ``anthropic`` SDK's stream accumulator builds the ``tool_use`` inputs from the gateway's
    ``input_json_delta``s; the ``openai`` SDK reads the ``function_call`` items, streamed and not."""
    anthropic = pytest.importorskip("anthropic")
    openai = pytest.importorskip("openai")
    gw = gateway_factory(_upstream("tools", tool_server.url) + _route("tools") + "[cache]\nenabled = false\n")
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    claude = anthropic.Anthropic(base_url=gw.root, api_key="unused", max_retries=0)
    with claude.messages.stream(model="m", max_tokens=50, messages=[{"role": "user", "content": "weather?"}],
                                tools=[{"name": "get_weather", "input_schema": schema}]) as stream:
        final = stream.get_final_message()
    claude.close()
    assert final.stop_reason == "tool_use"
    assert [(b.type, b.id, b.name, b.input) for b in final.content] == [
        ("tool_use", "call_1", "get_weather", {"city": "Paris"}), ("tool_use", "call_2", "get_time", {})]
    client = openai.OpenAI(base_url=gw.root + "/v1", api_key="unused", max_retries=0)
    tools = [{"type": "function", "name": "get_weather", "parameters": schema}]
    answer = client.responses.create(model="m", input="weather?", tools=tools)
    assert [(i.type, i.call_id, i.name, i.arguments) for i in answer.output] == [
        ("function_call", "call_1", "get_weather", '{"city": "Paris"}'), ("function_call", "call_2", "get_time", "{}")]
    streamed = [event.arguments for event in client.responses.create(model="m", input="weather?", tools=tools,
                                                                      stream=True)
                if event.type == "response.function_call_arguments.done"]
    client.close()
    assert streamed == ['{"city": "Paris"}', "{}"]


@pytest.mark.parametrize("api", ["anthropic-messages", "openai-responses"])
def test_tool_calls_from_messages_and_responses_upstreams(gateway_factory: Callable[[str], SimServer],
                                                          api: str) -> None:
    """An upstream speaking the Messages or Responses API gets the chat client's tools in its own shape, and its
    tool calls reach an OpenAI chat client as ``tool_calls`` deltas and an Anthropic client as ``tool_use``."""
    server = _ToolServer(api)
    try:
        gw = gateway_factory(_upstream("tools", server.url, extra=f'api = "{api}"') + _route("tools")
                             + "[cache]\nenabled = false\n")
        schema = {"type": "object", "properties": {"city": {"type": "string"}}}
        response = _post(gw.root + "/v1/chat/completions", {
            "model": "m", "messages": [{"role": "user", "content": "weather?"}], "stream": True, "max_tokens": 50,
            "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": schema}}],
            "tool_choice": "required"})
        sent = server.bodies[-1]
        if api == "anthropic-messages":
            assert sent["tools"] == [{"name": "get_weather", "input_schema": schema}]
            assert sent["tool_choice"] == {"type": "any"}
        else:
            assert sent["tools"] == [{"type": "function", "name": "get_weather", "parameters": schema}]
            assert sent["tool_choice"] == "required"
        chunks = [json.loads(line[6:]) for line in response.body.decode().split("\n\n") if line.startswith("data: {")]
        calls = [c for chunk in chunks if chunk["choices"] for c in chunk["choices"][0]["delta"].get("tool_calls", [])]
        assert [(c["id"], c["function"]["name"]) for c in calls if "id" in c] == [("call_1", "get_weather"),
                                                                                 ("call_2", "get_time")]
        assert "".join(c["function"]["arguments"] for c in calls if c["index"] == 0) == '{"city": "Paris"}'
        assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "tool_calls"
        _, events = _stream(gw.root + "/v1/messages", _messages_body("weather?", 50))
        starts = [d["content_block"]["name"] for name, d in events if name == "content_block_start"]
        assert starts == ["get_weather", "get_time"] and events[-2][1]["delta"]["stop_reason"] == "tool_use"
    finally:
        server.stop()


def _deep_arguments(conn: socket.socket, stop: threading.Event) -> None:
    """An OpenAI-chat upstream whose one tool call's arguments nest 300 deep (orjson reads 1,024 levels and
    writes 254: the gateway's Anthropic answer failed to encode, a 500 with a traceback)."""
    deep = '{"a": ' + "[" * 299 + "]" * 299 + "}"
    event = {"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": deep}}]}}]}
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
                 + b"data: " + json.dumps(event).encode() + b"\n\n"
                 + b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\n'
                 + b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5}}\n\ndata: [DONE]\n\n')


def _refusal(body: bytes) -> Callable[[socket.socket, threading.Event], None]:
    def answer(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nConnection: close\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    return answer


@pytest.mark.parametrize("api", ["anthropic-messages", "openai-chat"])
def test_deeply_nested_upstream_json_is_never_a_500(api: str, gateway_factory: Callable[[str], SimServer]) -> None:
    """A tool call's arguments nested past the JSON depth limit (64) reach an Anthropic client, not streamed, as
    ``input: {}`` (the stream carries them as the upstream sent them); an upstream's 400 whose body nests 300
    deep, or whose ``error`` is a string, reaches the client as an error of its protocol, not a 500."""
    from tests.hostile_servers import hostile

    deep = b'{"error": {"message": "no", "x": ' + b"[" * 299 + b"]" * 299 + b"}}"
    path = "/v1/messages" if api == "anthropic-messages" else "/v1/chat/completions"
    with hostile({"/v1/chat/completions": _deep_arguments}) as tools, \
            hostile({"/v1/chat/completions": _refusal(deep)}) as refuses, \
            hostile({"/v1/chat/completions": _refusal(b'{"error": "bad request"}')}) as plain:
        gw = gateway_factory(_upstream("tools", tools.url) + _upstream("deep", refuses.url)
                             + _upstream("plain", plain.url) + _route("tools")
                             + '[[routes]]\nmodel = "d"\nupstreams = ["deep"]\n'
                             + '[[routes]]\nmodel = "p"\nupstreams = ["plain"]\n[cache]\nenabled = false\n')
        if api == "anthropic-messages":
            whole = _post(gw.root + path, _messages_body("x", 50))
            assert whole.status_code == 200, whole.body[:300]
            assert [(b["type"], b["input"]) for b in whole.json()["content"]] == [("tool_use", {})]
            response, events = _stream(gw.root + path, _messages_body("x", 50))
            partial = "".join(d["delta"]["partial_json"] for name, d in events if name == "content_block_delta")
            assert response.status_code == 200 and partial.count("[") == 299
        for model in ("d", "p"):
            body = _messages_body("x", 5, model=model) if api == "anthropic-messages" else {
                "model": model, "messages": [{"role": "user", "content": "x"}]}
            refused = _post(gw.root + path, body)
            assert refused.status_code == 400, (model, refused.status_code, refused.body[:300])
            assert b"Traceback" not in refused.body and refused.json()["type" if api != "openai-chat" else "error"]
