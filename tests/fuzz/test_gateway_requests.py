"""Fuzzing the gateway's request parsing, in process: the real ASGI app (`create_app`), called with a scope,
a body and a ``send`` written by the test, in front of one upstream on a port where nothing listens.

Documented behaviour under any request body: an answer, never an exception (which uvicorn would turn into a
500 with a traceback in the log). A body that is not a JSON object is a 400; a model no route serves is a
404; a request that reaches the upstream gets the upstream failure's status (502, 503 or 504).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.strategies import json_values, texts
from tokometer.gateway.app import create_app
from tokometer.gateway.config import load_config

ANSWERS = {200, 400, 404, 413, 422, 429, 502, 503, 504}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[asyncio.Runner, Any]]:
    path = tmp_path_factory.mktemp("gw") / "gateway.toml"
    path.write_text('[cache]\nenabled = false\n[[upstreams]]\nname = "down"\nurl = "http://127.0.0.1:1/v1"\n'
                    'retries = 0\nconnect_timeout_s = 1\n[[routes]]\nmodel = "m"\nupstreams = ["down"]\n')
    with asyncio.Runner() as runner:
        app = create_app(load_config(path, environ={}))
        yield runner, app
        runner.run(app.state.gateway.close())


async def _post(app: Any, path: str, body: bytes) -> int:
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
             "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000)}
    delivered = asyncio.Event()
    messages: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if not delivered.is_set():
            delivered.set()
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.sleep(30)  # the client stays connected while the answer is written
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    await asyncio.wait_for(app(scope, receive, send), 20)
    starts = [m for m in messages if m["type"] == "http.response.start"]
    assert len(starts) == 1
    status: int = starts[0]["status"]
    return status


PATHS = st.sampled_from(["/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/responses"])


@given(PATHS, st.binary(max_size=200))
def test_any_bytes(gateway: tuple[asyncio.Runner, Any], path: str, body: bytes) -> None:
    runner, app = gateway
    status = runner.run(_post(app, path, body))
    assert status in ANSWERS, status
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        parsed = None
    if not isinstance(parsed, dict):
        assert status == 400


block = st.fixed_dictionaries({"type": st.sampled_from(["text", "image", "tool_use", "tool_result", "thinking",
                                                         "input_text", "input_image"]) | json_values},
                              optional={"text": texts | json_values, "source": json_values, "input": json_values,
                                        "content": json_values, "image_url": json_values, "id": json_values})
message = st.fixed_dictionaries({"role": st.sampled_from(["user", "system", "assistant"]) | json_values,
                                 "content": texts | json_values | st.lists(block, max_size=3)},
                                optional={"type": st.sampled_from(["message", "function_call",
                                                                   "function_call_output", "reasoning"])})
bodies = st.fixed_dictionaries({"model": st.sampled_from(["m", "other"]) | json_values}, optional={
    "messages": st.lists(message, max_size=3), "prompt": texts | st.lists(texts, max_size=2),
    "max_tokens": json_values, "max_completion_tokens": json_values, "stream": st.booleans() | json_values,
    "stream_options": json_values, "temperature": json_values, "seed": json_values, "n": json_values,
    "stop": json_values, "logprobs": json_values, "extra": json_values,
    # the Messages and Responses APIs' own fields
    "system": texts | json_values, "input": texts | st.lists(message, max_size=3) | json_values,
    "instructions": json_values, "max_output_tokens": json_values, "stop_sequences": json_values,
    "tools": json_values | st.lists(st.fixed_dictionaries({"name": texts | json_values}, optional={
        "type": st.sampled_from(["function", "web_search"]), "input_schema": json_values,
        "parameters": json_values}), max_size=2),
    "tool_choice": json_values | st.sampled_from(["auto", "required"]), "previous_response_id": json_values})


@given(PATHS, bodies)
def test_request_bodies(gateway: tuple[asyncio.Runner, Any], path: str, body: dict[str, Any]) -> None:
    runner, app = gateway
    status = runner.run(_post(app, path, json.dumps(body).encode()))
    assert status in ANSWERS, (status, body)
    if body.get("model") != "m":
        assert status in (400, 404)


def test_the_config_file_is_the_one_written(tmp_path: Path) -> None:
    """The fixture's gateway routes model ``m`` to an upstream that is down: a request reaches it and fails."""
    path = tmp_path / "gateway.toml"
    path.write_text('[[upstreams]]\nname = "down"\nurl = "http://127.0.0.1:1/v1"\nretries = 0\n'
                    '[[routes]]\nmodel = "m"\nupstreams = ["down"]\n')
    with asyncio.Runner() as runner:
        app = create_app(load_config(path, environ={}))
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
        assert runner.run(_post(app, "/v1/chat/completions", body)) in (502, 503, 504)
        runner.run(app.state.gateway.close())
