"""Gateway pieces without a network: event splitting, OpenAI output, breaker and slowness, config."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tokometer.errors import ConfigError
from tokometer.gateway.config import load_config
from tokometer.gateway.health import UpstreamHealth
from tokometer.gateway.openai_format import Answer, replay, whole
from tokometer.wire.framing import EventSplitter, sse_payload
from tokometer.wire.openai import ChunkWriter


def test_splitter_returns_whole_events_as_they_complete() -> None:
    split = EventSplitter("sse")
    assert split.feed(b'data: {"a"') == []
    assert split.feed(b":1}\n\ndata: [DO") == [b'data: {"a":1}\n\n']
    assert split.feed(b"NE]\r\n\r\n") == [b"data: [DONE]\r\n\r\n"]
    assert split.flush() == []
    nd = EventSplitter("ndjson")
    assert nd.feed(b'{"a":1}\n{"b"') == [b'{"a":1}\n']
    assert nd.flush() == [b'{"b"']
    assert sse_payload(b'data: {"x":2}\n\n') == b'{"x":2}'
    assert sse_payload(b": comment\n\n") is None
    assert sse_payload(b"event: e\ndata: a\ndata: b\n\n") == b"a\nb"


def test_chunk_writer_replays_and_aggregates() -> None:
    writer = ChunkWriter(True, "m")
    answer = Answer(text="hello", finish_reason="stop", prompt_tokens=3, completion_tokens=2)
    chunks = replay(writer, answer, include_usage=True)
    payloads = [orjson.loads(c[6:]) for c in chunks[:-1]]
    assert payloads[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert payloads[1]["choices"][0]["delta"]["content"] == "hello"
    assert payloads[2]["choices"][0]["finish_reason"] == "stop"
    assert payloads[3]["usage"] == {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    assert chunks[-1] == b"data: [DONE]\n\n"
    body = whole(ChunkWriter(False, "m"), answer)
    assert body["object"] == "text_completion" and body["choices"][0]["text"] == "hello"


def test_breaker_opens_half_opens_and_closes() -> None:
    h = UpstreamHealth(breaker_failures=2, breaker_cooldown_s=10)
    h.failure("boom", now=0)
    assert h.state(0) == "closed" and h.allows(0)
    h.failure("boom", now=1)
    assert h.state(2) == "open" and not h.allows(2)
    assert h.state(11.5) == "half-open" and h.allows(11.5)
    h.trial_in_flight = True
    assert not h.allows(11.5)  # one trial at a time
    h.success(ttft_ms=10)
    assert h.state(12) == "closed"


def test_slowness_is_the_median_of_the_window() -> None:
    h = UpstreamHealth(window=3)
    h.success(ttft_ms=10)
    assert h.slow(100, None) is None  # one sample is not enough
    h.success(ttft_ms=500)
    assert h.slow(100, None) == "recent TTFT p50 255 ms > 100 ms"
    h.success(ttft_ms=20)
    h.success(ttft_ms=30)  # the window keeps the last three: 500, 20, 30
    assert h.slow(100, None) is None


def test_config_env_overrides_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "g.toml"
    path.write_text('[[upstreams]]\nname = "a"\nurl = "http://h:1/v1"\n[[routes]]\nmodel = "m"\nupstreams = ["a"]\n')
    config = load_config(path, {"TOKOMETER_GATEWAY__SERVER__PORT": "9100",
                                "TOKOMETER_GATEWAY__UPSTREAMS__0__URL": "http://other:2/v1"})
    assert config.server.port == 9100 and config.upstreams[0].url == "http://other:2/v1"
    with pytest.raises(ConfigError, match=r"^TOKOMETER_GATEWAY__SERVER__PORT \(overriding server.port of .*g.toml\): "
                       r"Input should be a valid integer"):
        load_config(path, {"TOKOMETER_GATEWAY__SERVER__PORT": "many"})
    yaml_path = tmp_path / "g.yaml"
    yaml_path.write_text("upstreams:\n  - name: a\n    url: http://h:1/v1\nroutes:\n  - model: m\n    upstreams: [a]\n"
                         "cache:\n  ttl_s: -1\n")
    with pytest.raises(ConfigError, match=r"g.yaml: cache.ttl_s: Input should be greater than 0"):
        load_config(yaml_path, {})
    with pytest.raises(ConfigError, match="cannot read gateway config"):
        load_config(tmp_path / "missing.toml", {})
