"""The simulator and the gateway write Messages and Responses with one writer: one answer, the same events.

Real servers on loopback: `tokometer sim` answering ``/v1/messages`` or ``/v1/responses`` itself, and the same
simulator (a second process, so that its answer's words are the same) behind `tokometer gateway` as an OpenAI
chat upstream, the gateway translating its chunks for a Messages or Responses client. Both streams are read as
raw SSE and compared event by event, every field in its order, after the values that are each server's own are
replaced: ids and ``created_at`` (by first appearance, so which events share an id is still compared), the
gateway's ``message_start`` prompt count (its own: it has no tokenizer here; the simulator's is the truth, and the
final ``message_delta`` carries the upstream's count, compared) and a thinking block's signature (the simulator
signs, the gateway has none to give). The official SDKs then read the simulator's own streams.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import SimServer
from tests.integration.gateway_streams import gateway_factory

__all__ = ["gateway_factory"]  # the fixture, used by name

_OWN = ("id", "item_id", "created_at", "call_id")


def _post(url: str, body: dict[str, Any]) -> bytes:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json",
                                                                      "anthropic-version": "2023-06-01"})
    with urllib.request.urlopen(request, timeout=30) as response:
        answer: bytes = response.read()
        return answer


def _events(body: bytes) -> list[dict[str, Any]]:
    out = []
    for block in body.decode().split("\n\n"):
        if block.strip():
            lines = dict(line.split(": ", 1) for line in block.split("\n"))
            data = json.loads(lines["data"])
            assert lines["event"] == data["type"]
            out.append(data)
    return out


def _normalised(value: Any, seen: dict[str, str]) -> Any:
    """``value`` with each server's own values replaced by placeholders, by first appearance."""
    if isinstance(value, list):
        return [_normalised(v, seen) for v in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for key, item in value.items():
        if key in _OWN and isinstance(item, (str, int)):
            item = seen.setdefault(f"{key}={item}", f"<{key} {len(seen)}>")
        elif key == "signature":
            item = "<signature>"
        out[key] = _normalised(item, seen)
    if value.get("type") == "message_start":
        out["message"]["usage"]["input_tokens"] = "<each server's own count>"
    return out


def _dump(events: Any) -> str:
    return json.dumps(_normalised(events, {}), indent=1)  # keys in their order: the order is compared too


@pytest.mark.parametrize(("path", "reasoning"), [("/v1/messages", 0), ("/v1/messages", 3), ("/v1/responses", 0),
                                                 ("/v1/responses", 3)])
def test_the_simulator_and_the_gateway_stream_the_same_events(sim_factory: Callable[..., SimServer],
                                                              gateway_factory: Callable[[str], SimServer],
                                                              path: str, reasoning: int) -> None:
    args = ("--ttft-ms", "5", "--itl-ms", "1", "--reasoning-tokens", str(reasoning), "--reasoning-format",
            "reasoning_content")
    direct, upstream = sim_factory(*args), sim_factory(*args)
    gw = gateway_factory(f'[[upstreams]]\nname = "sim"\nurl = "{upstream.openai_url}"\nmodel = "sim-model"\n'
                         '[[routes]]\nmodel = "m"\nupstreams = ["sim"]\n[cache]\nenabled = false\n')
    if path == "/v1/messages":
        body: dict[str, Any] = {"max_tokens": 9, "system": "be brief", "messages": [{"role": "user", "content": "hi"}]}
    else:
        body = {"max_output_tokens": 9, "instructions": "be brief", "input": [{"role": "user", "content": "hi"}]}
    for stream in (True, False):
        simulated = _post(direct.root + path, {**body, "model": "sim-model", "stream": stream})
        translated = _post(gw.root + path, {**body, "model": "m", "stream": stream})
        if stream:
            assert _dump(_events(simulated)) == _dump(_events(translated))
        elif not reasoning:  # a whole answer: the gateway has no reasoning count to give
            assert _dump(json.loads(simulated)) == _dump(json.loads(translated))
    assert [t["path"] for t in upstream.trace()] == ["/v1/chat/completions"] * 2  # no other request took words
    assert [t["path"] for t in direct.trace()] == [path] * 2


def test_the_official_sdks_read_the_simulators_own_streams(sim_factory: Callable[..., SimServer]) -> None:
    """``anthropic`` and ``openai`` against the simulator's ``/v1/messages`` and ``/v1/responses``, thinking
    and reasoning included, streamed and whole."""
    anthropic = pytest.importorskip("anthropic")
    openai = pytest.importorskip("openai")
    sim = sim_factory("--ttft-ms", "2", "--itl-ms", "1", "--reasoning-tokens", "2", "--reasoning-format",
                      "reasoning_content")
    claude = anthropic.Anthropic(base_url=sim.root, api_key="unused", max_retries=0)
    with claude.messages.stream(model="m", max_tokens=6, messages=[{"role": "user", "content": "hello"}]) as stream:
        streamed = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert [block.type for block in final.content] == ["thinking", "text"]
    assert len(final.content[0].thinking.split()) == 2 and final.content[1].text == streamed
    assert len(streamed.split()) == 4 and final.stop_reason == "max_tokens" and final.usage.output_tokens == 6
    whole = claude.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
    assert [block.type for block in whole.content] == ["thinking", "text"] and whole.usage.output_tokens == 5
    claude.close()
    client = openai.OpenAI(base_url=sim.openai_url, api_key="unused", max_retries=0)
    text, kinds = "", []
    for event in client.responses.create(model="m", input="hello", max_output_tokens=6, stream=True):
        kinds.append(event.type)
        if event.type == "response.output_text.delta":
            text += event.delta
        if event.type == "response.incomplete":
            usage = event.response.usage
            assert usage is not None and usage.output_tokens == 6
            assert usage.output_tokens_details.reasoning_tokens == 2 and event.response.output_text == text
    assert kinds[0] == "response.created" and kinds[-1] == "response.incomplete" and len(text.split()) == 4
    answer = client.responses.create(model="m", input="hi", max_output_tokens=4)
    assert len(answer.output_text.split()) == 2 and answer.usage is not None and answer.usage.output_tokens == 4
    client.close()


_SCHEMA = {"type": "object", "properties": {"query": {"type": "string"}}}
_TOOLS = {"/v1/messages": [{"name": "search", "description": "look it up", "input_schema": _SCHEMA}],
          "/v1/responses": [{"type": "function", "name": "search", "parameters": _SCHEMA}]}


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/responses"])
def test_the_simulator_and_the_gateway_stream_the_same_tool_calls(sim_factory: Callable[..., SimServer],
                                                                  gateway_factory: Callable[[str], SimServer],
                                                                  path: str) -> None:
    """A request with tools: the simulator's own Messages (Responses) endpoint answers with a ``tool_use`` block
    (a ``function_call`` item), as its chat endpoint answers with ``tool_calls``; the gateway translating that
    chat answer writes the same events and the same whole answer."""
    args = ("--ttft-ms", "5", "--itl-ms", "1", "--output-tokens", "5")
    direct, upstream = sim_factory(*args), sim_factory(*args)
    gw = gateway_factory(f'[[upstreams]]\nname = "sim"\nurl = "{upstream.openai_url}"\nmodel = "sim-model"\n'
                         '[[routes]]\nmodel = "m"\nupstreams = ["sim"]\n[cache]\nenabled = false\n')
    if path == "/v1/messages":
        body: dict[str, Any] = {"max_tokens": 9, "messages": [{"role": "user", "content": "hi"}]}
    else:
        body = {"max_output_tokens": 9, "input": [{"role": "user", "content": "hi"}]}
    body["tools"] = _TOOLS[path]
    for stream in (True, False):
        simulated = _post(direct.root + path, {**body, "model": "sim-model", "stream": stream})
        translated = _post(gw.root + path, {**body, "model": "m", "stream": stream})
        if stream:
            events = _events(simulated)
            assert _dump(events) == _dump(_events(translated))
            calls = [e for e in events if e["type"] in ("content_block_start", "response.output_item.added")]
            assert [(c.get("content_block") or c["item"])["name"] for c in calls] == ["search"]
        else:
            assert _dump(json.loads(simulated)) == _dump(json.loads(translated))
    assert [t["path"] for t in direct.trace()] == [path] * 2


@pytest.mark.parametrize("api", ["anthropic-messages", "openai-responses"])
def test_a_chat_client_gets_the_calls_of_a_messages_or_responses_simulator(
        sim_factory: Callable[..., SimServer], gateway_factory: Callable[[str], SimServer], api: str) -> None:
    """The other way round: an OpenAI chat client's tools reach the simulator's Messages (Responses) endpoint in
    that API's shape, and its call comes back as chat ``tool_calls``, streamed and whole, with the arguments the
    simulator wrote; ``tool_choice: none`` gets text."""
    openai = pytest.importorskip("openai")
    sim = sim_factory("--ttft-ms", "2", "--itl-ms", "1", "--output-tokens", "4")
    gw = gateway_factory(f'[[upstreams]]\nname = "sim"\nurl = "{sim.openai_url}"\nmodel = "sim-model"\n'
                         f'api = "{api}"\n[[routes]]\nmodel = "m"\nupstreams = ["sim"]\n[cache]\nenabled = false\n')
    tools: Any = [{"type": "function", "function": {"name": "search", "parameters": _SCHEMA}},
                  {"type": "function", "function": {"name": "fetch", "parameters": _SCHEMA}}]
    client = openai.OpenAI(base_url=gw.root + "/v1", api_key="unused", max_retries=0)
    messages: Any = [{"role": "user", "content": "hi"}]
    forced: Any = {"type": "function", "function": {"name": "fetch"}}
    whole = client.chat.completions.create(model="m", messages=messages, max_tokens=9, tools=tools,
                                           tool_choice=forced)
    message = whole.choices[0].message
    assert whole.choices[0].finish_reason == "tool_calls" and message.content is None
    assert message.tool_calls is not None and [c.function.name for c in message.tool_calls] == ["fetch"]
    query = json.loads(message.tool_calls[0].function.arguments)["query"]
    assert len(query.split()) == 4  # the simulator's four words, whole
    pieces: dict[int, str] = {}
    names = []
    for chunk in client.chat.completions.create(model="m", messages=messages, max_tokens=9, tools=tools,
                                                stream=True):
        for call in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            pieces[call.index] = pieces.get(call.index, "") + (call.function.arguments or "")
            if call.function.name:
                names.append(call.function.name)
    assert names == ["search"] and len(json.loads(pieces[0])["query"].split()) == 4
    plain = client.chat.completions.create(model="m", messages=messages, max_tokens=9, tools=tools,
                                           tool_choice="none")
    assert plain.choices[0].message.tool_calls is None and len((plain.choices[0].message.content or "").split()) == 4
    client.close()
    assert [t["path"] for t in sim.trace()] == ["/v1/messages" if api == "anthropic-messages" else "/v1/responses"] * 3


def test_the_official_sdks_read_the_simulators_tool_calls(sim_factory: Callable[..., SimServer]) -> None:
    """``anthropic``'s stream accumulator and ``openai``'s Responses types read the simulator's own calls."""
    anthropic = pytest.importorskip("anthropic")
    openai = pytest.importorskip("openai")
    sim = sim_factory("--ttft-ms", "2", "--itl-ms", "1", "--output-tokens", "3")
    claude = anthropic.Anthropic(base_url=sim.root, api_key="unused", max_retries=0)
    with claude.messages.stream(model="m", max_tokens=8, messages=[{"role": "user", "content": "hi"}],
                                tools=_TOOLS["/v1/messages"]) as stream:
        final = stream.get_final_message()
    claude.close()
    assert final.stop_reason == "tool_use" and [b.type for b in final.content] == ["tool_use"]
    assert final.content[0].name == "search" and len(final.content[0].input["query"].split()) == 3
    client = openai.OpenAI(base_url=sim.openai_url, api_key="unused", max_retries=0)
    answer = client.responses.create(model="m", input="hi", tools=_TOOLS["/v1/responses"], tool_choice="required")
    client.close()
    assert [(i.type, i.name) for i in answer.output] == [("function_call", "search")]
    assert len(json.loads(answer.output[0].arguments)["query"].split()) == 3
