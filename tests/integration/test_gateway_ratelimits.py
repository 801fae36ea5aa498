"""Rate limits through a real `tokometer gateway` in front of a real simulator: the headers every answer
carries, the 429 each client protocol's official SDK reads as its rate-limit error, tokens counted after the
answer, and two gateway processes sharing one window through a real Redis."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import openai
import pytest

from tests.conftest import RedisServer, SimServer, start_gateway
from tests.integration.test_gateway import _metrics, _post, _upstream, gateway_factory
from tokometer.gateway.auth import hash_key

__all__ = ["gateway_factory"]  # the fixture, used by name

SECRET = "sk-rate-0123456789"
AUTH = {"Authorization": f"Bearer {SECRET}"}


def _config(sim: SimServer, key: str = "", route: str = "", redis: RedisServer | None = None) -> str:
    return (_upstream("only", sim, "sim-model") + f'[[routes]]\nmodel = "chat"\nupstreams = ["only"]\n{route}\n'
            + f'[[keys]]\nname = "team-a"\nsha256 = "{hash_key(SECRET)}"\n{key}\n[cache]\nenabled = false\n'
            + ("" if redis is None else f'[replicas]\nredis_url = "{redis.url}"\nredis_timeout_s = 2\n'))


def _ask(gw: SimServer, path: str = "/v1/chat/completions", max_tokens: int = 4) -> tuple[int, dict[str, str], bytes]:
    body = {"model": "chat", "max_tokens": max_tokens, "messages": [{"role": "user", "content": "hi"}]}
    return _post(gw.root + path, body, AUTH)  # the same body is a chat and a Messages request


def test_a_keys_requests_per_minute(sim_factory: Callable[..., SimServer],
                                    gateway_factory: Callable[[str], SimServer]) -> None:
    sim = sim_factory("--ttft-ms", "1", "--itl-ms", "1")
    gw = gateway_factory(_config(sim, key="requests_per_minute = 3"))
    answers = [_ask(gw) for _ in range(3)]
    assert [status for status, _, _ in answers] == [200] * 3
    assert [h["x-ratelimit-remaining-requests"] for _, h, _ in answers] == ["2", "1", "0"]
    assert {h["x-ratelimit-limit-requests"] for _, h, _ in answers} == {"3"}
    assert all(0 < float(h["x-ratelimit-reset-requests"].removesuffix("s")) <= 60 for _, h, _ in answers)
    status, headers, body = _ask(gw)
    assert status == 429 and b"rate_limit_exceeded" in body and b"3 of 3 requests" in body
    assert 1 <= int(headers["retry-after"]) <= 60
    status, _, body = _ask(gw, "/v1/messages")  # an Anthropic client: its own error shape
    assert status == 429 and b'"rate_limit_error"' in body
    with openai.OpenAI(base_url=gw.openai_url, api_key=SECRET, max_retries=0) as client, \
            pytest.raises(openai.RateLimitError) as refused:
        client.chat.completions.create(model="chat", messages=[{"role": "user", "content": "hi"}], max_tokens=4)
    assert refused.value.response.headers["x-ratelimit-remaining-requests"] == "0"
    assert len(sim.trace()) == 3  # the refused requests never reached the upstream
    assert _metrics(gw.root)['tokometer_gateway_rejected_total{reason="rate_limit"}'] == 3


def test_a_routes_tokens_per_minute_counted_after_each_answer(sim_factory: Callable[..., SimServer],
                                                              gateway_factory: Callable[[str], SimServer]) -> None:
    """The route's token limit counts prompt + answer tokens as the upstream's usage says, after the answer."""
    sim = sim_factory("--ttft-ms", "1", "--itl-ms", "1")
    gw = gateway_factory(_config(sim, route="tokens_per_minute = 50"))
    status, headers, body = _ask(gw, max_tokens=30)
    assert status == 200 and headers["x-ratelimit-remaining-tokens"] == "50"  # nothing counted before it ran
    used = json.loads(body)["usage"]["total_tokens"]
    assert 30 < used < 50
    time.sleep(0.3)  # counted right after the answer
    status, headers, _ = _ask(gw, max_tokens=30)
    assert status == 200 and int(headers["x-ratelimit-remaining-tokens"]) == 50 - used
    time.sleep(0.3)
    status, headers, body = _ask(gw)
    assert status == 429 and b"tokens in the last minute" in body and headers["x-ratelimit-remaining-tokens"] == "0"


@pytest.mark.timing  # two gateways with a 2 s Redis deadline: in the timing lane, as the other replica tests
def test_two_replicas_share_a_keys_window_through_redis(sim_factory: Callable[..., SimServer],
                                                        redis_server: RedisServer,
                                                        tmp_path: pytest.TempPathFactory) -> None:
    sim = sim_factory("--ttft-ms", "1", "--itl-ms", "1")
    path = tmp_path / "gateway.toml"  # type: ignore[operator]
    path.write_text(_config(sim, key="requests_per_minute = 4", redis=redis_server))
    a, b = start_gateway(path), start_gateway(path)
    try:
        assert [_ask(gw)[0] for gw in (a, b, a, b)] == [200] * 4
        assert [_ask(gw)[0] for gw in (a, b)] == [429, 429]  # the window is the one in Redis
        redis_server.stop()  # Redis gone: each replica counts alone, from nothing
        assert _ask(a)[0] == 200 and _ask(b)[0] == 200
    finally:
        a.stop()
        b.stop()
