"""The official `openai` SDK against `tokometer gateway` in front of `tokometer sim` (real processes on
loopback): the same checks (`tests.openai_sdk`) run against a gateway in front of a real engine."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam

from tests.conftest import SimServer, start_gateway
from tests.openai_sdk import check_endpoint, check_errors, sdk_client
from tests.vllm_bytes import ANSWER, PROMPT, VllmBytesServer
from tokometer.gateway.auth import hash_key

SECRET = "sk-sdk-test-0123456789"


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


def _config(url: str, extra: str = "", keys: bool = True) -> str:
    return (f'[[upstreams]]\nname = "up"\nurl = "{url}"\nmodel = "m"\nretries = 0\n{extra}\n'
            '[[routes]]\nmodel = "chat"\nupstreams = ["up"]\n[cache]\nenabled = false\n'
            + (f'[[keys]]\nname = "sdk"\nsha256 = "{hash_key(SECRET)}"\n' if keys else ""))


def test_the_sdk_reads_every_answer_of_the_gateway(sim_factory: Callable[..., SimServer],
                                                   gateway: Callable[[str], SimServer]) -> None:
    sim = sim_factory("--model", "m", "--ttft-ms", "2", "--itl-ms", "1")
    gw = gateway(_config(sim.openai_url))
    answers = check_endpoint(gw.openai_url, "chat", SECRET, max_tokens=8)
    assert [(a.endpoint, a.streamed) for a in answers] == [("chat", False), ("chat", True), ("completions", False),
                                                           ("completions", True)]
    for answer in answers:
        assert answer.completion_tokens == len(answer.text.split())  # the simulator's words are one token each
        if answer.streamed:
            assert answer.text_events == answer.completion_tokens
    assert check_errors(gw.openai_url, "chat", SECRET) == {"unknown model": "NotFoundError",
                                                           "unknown model (streamed)": "NotFoundError"}


def test_error_statuses_are_the_sdks_exception_classes(sim_factory: Callable[..., SimServer],
                                                       gateway: Callable[[str], SimServer]) -> None:
    sim = sim_factory("--model", "m", "--ttft-ms", "2", "--itl-ms", "1", "--fault", "http_500=1")
    gw = gateway(_config(sim.openai_url, "breaker_failures = 1000"))
    messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": PROMPT}]
    with sdk_client(gw.openai_url, "sk-wrong") as client, pytest.raises(openai.AuthenticationError) as denied:
        client.chat.completions.create(model="chat", messages=messages, max_tokens=4)
    assert denied.value.status_code == 401
    with sdk_client(gw.openai_url, SECRET) as client:
        for stream in (False, True):
            with pytest.raises(openai.InternalServerError) as failed:
                client.chat.completions.create(model="chat", messages=messages, max_tokens=4,
                                               stream=stream)
            assert failed.value.status_code >= 500 and "up" in str(failed.value)


def test_the_sdk_reads_vllms_bytes_through_the_gateway(gateway: Callable[[str], SimServer]) -> None:
    """vLLM 0.32's exact streams (a raw server replaying them, `tests.vllm_bytes`) through the gateway, into the
    SDK's types: the completions answer the gateway once emptied comes out whole."""
    server = VllmBytesServer("m")
    server.start()
    try:
        gw = gateway(_config(server.url, keys=False))
        answers = check_endpoint(gw.openai_url, "chat", greedy=True)
    finally:
        server.stop()
    assert {a.text for a in answers} == {"".join(ANSWER)}
    assert [a.text_events for a in answers if a.streamed] == [len(ANSWER)] * 2
    assert {a.completion_tokens for a in answers} == {len(ANSWER)}


def test_upstream_rate_limits_reach_the_sdk_as_a_rate_limit(sim_factory: Callable[..., SimServer],
                                                           gateway: Callable[[str], SimServer]) -> None:
    """Two upstreams that both answer 429 with their own Retry-After: the client gets 429 (the SDK's
    RateLimitError, which it backs off from, not InternalServerError) and the earliest Retry-After; one that
    answered 503 among them makes it the gateway's 503 again, as before."""
    slow = sim_factory("--model", "m", "--fault", "http_429=1", "--retry-after", "7")
    soon = sim_factory("--model", "m", "--fault", "http_429=1", "--retry-after", "3")
    down = sim_factory("--model", "m", "--fault", "http_503=1")
    both = ("[[upstreams]]\nname = \"a\"\nurl = \"{a}\"\nmodel = \"m\"\nretries = 0\nbreaker_failures = 1000\n"
            "[[upstreams]]\nname = \"b\"\nurl = \"{b}\"\nmodel = \"m\"\nretries = 0\nbreaker_failures = 1000\n"
            "[[routes]]\nmodel = \"chat\"\nupstreams = [\"a\", \"b\"]\n[cache]\nenabled = false\n")
    limited = gateway(both.format(a=slow.openai_url, b=soon.openai_url))
    mixed = gateway(both.format(a=slow.openai_url, b=down.openai_url))
    messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": PROMPT}]
    with sdk_client(limited.openai_url) as client:
        for stream in (False, True):
            with pytest.raises(openai.RateLimitError) as refused:
                client.chat.completions.create(model="chat", messages=messages, max_tokens=4, stream=stream)
            assert refused.value.status_code == 429
            assert refused.value.response.headers["retry-after"] == "3"
            assert "rate-limited" in str(refused.value)
    with sdk_client(mixed.openai_url) as client, pytest.raises(openai.InternalServerError) as failed:
        client.chat.completions.create(model="chat", messages=messages, max_tokens=4)
    assert failed.value.status_code == 503
    assert failed.value.response.headers["retry-after"] == "7"
