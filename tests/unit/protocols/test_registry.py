"""`tokometer.protocols.registry`: one entry per protocol, named by its client, its facts read as other code
reads them."""

from __future__ import annotations

import functools

import pytest

from tokometer.protocols.anthropic_messages.writer import AnthropicStreamWriter
from tokometer.protocols.gateway_clients import error_body, relays_openai_bytes, to_chat_request, writer_for
from tokometer.protocols.openai.writer import OpenAIStreamWriter
from tokometer.protocols.openai_responses.writer import ResponsesStreamWriter
from tokometer.protocols.registry import PROTOCOLS, create_client, protocol_named
from tokometer.sim.servers import SERVERS
from tokometer.util.errors import ConfigError


def test_each_entry_is_named_by_its_client() -> None:
    assert all(name == protocol.client.name for name, protocol in PROTOCOLS.items())
    assert type(create_client("ollama")) is PROTOCOLS["ollama"].client
    with pytest.raises(ConfigError, match="use one of"):
        protocol_named("grpc")


def test_the_simulator_serves_each_protocol_with_a_server_side_at_its_path() -> None:
    served = {p.server.path for p in PROTOCOLS.values() if p.server is not None}
    assert served == set(SERVERS) and len(served) == sum(p.server is not None for p in PROTOCOLS.values())


@pytest.mark.parametrize(("name", "answer", "models"), [
    ("openai-chat", {"data": [{"id": "a"}, {"id": 3}, {"id": "b"}]}, ["a", "b"]),
    ("anthropic-messages", {"data": [{"id": "claude"}]}, ["claude"]),
    ("ollama", {"models": [{"name": "llama3"}]}, ["llama3"]),
    ("tgi", {"model_id": "m"}, ["m"]),
    ("llamacpp", {"model_path": "/m.gguf"}, ["/m.gguf"]),
    ("openai-chat", [], None),
])
def test_a_model_list_reads_as_its_protocol_writes_it(name: str, answer: object, models: list[str] | None) -> None:
    listing = PROTOCOLS[name].model_list
    assert listing is not None and listing.read(answer) == models


def test_where_the_model_list_is() -> None:
    assert PROTOCOLS["openai-chat"].model_list_path == "/v1/models"
    assert PROTOCOLS["ollama"].model_list_path == "/api/tags"
    listing = PROTOCOLS["ollama"].model_list
    assert listing is not None and listing.url("http://h:11434/x/") == "http://h:11434/api/tags"
    openai = PROTOCOLS["openai-chat"].model_list
    assert openai is not None and openai.url("http://h:8000/v1/") == "http://h:8000/v1/models"


def test_facts_other_code_asks() -> None:
    assert PROTOCOLS["anthropic-messages"].key_header == "x-api-key"
    assert PROTOCOLS["openai-chat"].key_header == "authorization"
    assert {n for n, p in PROTOCOLS.items() if not p.streams} == {"openai-embeddings", "rerank"}
    assert {n for n, p in PROTOCOLS.items() if p.serves_one_model} == {"tgi", "llamacpp"}
    assert {n for n, p in PROTOCOLS.items() if p.takes_media} == {"openai-chat"}
    assert {n for n, p in PROTOCOLS.items() if p.gateway_native} == {"openai-chat", "openai-completions"}
    assert {n for n, p in PROTOCOLS.items() if p.family_name == "openai"} == {
        "openai-chat", "openai-completions", "openai-responses", "openai-embeddings"}


def test_the_gateway_answers_each_client_protocol_in_its_own_shape() -> None:
    assert relays_openai_bytes("openai") and not relays_openai_bytes("anthropic-messages")
    writer = functools.partial(writer_for, model="m", include_usage=False, prompt_tokens=3, max_tokens=8)
    assert isinstance(writer("openai", True), OpenAIStreamWriter)
    assert isinstance(writer("anthropic-messages", True), AnthropicStreamWriter)
    assert isinstance(writer("openai-responses", True), ResponsesStreamWriter)
    openai = {"error": {"message": "no", "type": "invalid_request_error"}}
    assert error_body("openai", 400, openai) is openai
    assert error_body("anthropic-messages", 400, openai)["type"] == "error"
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    assert to_chat_request("openai", body) is body
    chat = to_chat_request("anthropic-messages", {"model": "m", "max_tokens": 4, "system": "s",
                                                  "messages": [{"role": "user", "content": "hi"}]})
    assert chat["messages"][0] == {"role": "system", "content": "s"}
