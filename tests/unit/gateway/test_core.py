"""Gateway pieces without a network: event splitting, OpenAI output, breaker and slowness, config."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import orjson
import pytest

from tokometer.gateway.breaker import UpstreamHealth
from tokometer.gateway.config import load_config
from tokometer.gateway.hedge import MIN_SAMPLES, HedgeAfter, Race, percentile, race
from tokometer.gateway.openai_format import Answer, replay, whole
from tokometer.gateway.resume import carry_on_body, client_max_tokens, stream_identity
from tokometer.gateway.upstream import Upstream
from tokometer.protocols.common.framing import EventSplitter, sse_payload
from tokometer.protocols.openai.chunks import ChunkWriter
from tokometer.protocols.openai.writer import OpenAIStreamWriter
from tokometer.util.errors import ConfigError


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
    writer = OpenAIStreamWriter(ChunkWriter(True, "m"), include_usage=True)
    answer = Answer(text="hello", finish_reason="stop", prompt_tokens=3, completion_tokens=2)
    chunks = [event + b"\n\n" for event in b"".join(replay(writer, answer)).split(b"\n\n") if event]
    payloads = [orjson.loads(c[6:]) for c in chunks[:-1]]
    assert payloads[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert payloads[1]["choices"][0]["delta"]["content"] == "hello"
    assert payloads[2]["choices"][0]["finish_reason"] == "stop"
    assert payloads[3]["usage"] == {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    assert chunks[-1] == b"data: [DONE]\n\n"
    body = whole(OpenAIStreamWriter(ChunkWriter(False, "m"), include_usage=False), answer)
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
    with pytest.raises(ConfigError, match=r"g.yaml: cache.ttl_s: Input should be greater than or equal to 0.001"):
        load_config(yaml_path, {})
    with pytest.raises(ConfigError, match=r"^cannot read .*missing\.toml: No such file"):
        load_config(tmp_path / "missing.toml", {})


@pytest.mark.timeout(60)  # a FIFO read that waits for a writer fails here instead of hanging
def test_the_config_file_is_read_within_a_bound(tmp_path: Path) -> None:
    """``--config /dev/zero`` had read until memory ran out and a FIFO nobody writes to waited for a writer
    forever: a config is read whole up to 16 MiB, then refused naming the bound; a FIFO with no writer is an empty
    file (so: no upstreams); a TOML file not in UTF-8 is one error naming the byte."""
    with pytest.raises(ConfigError, match=r"^/dev/zero is larger than 16 MiB: a gateway config is"):
        load_config(Path("/dev/zero"), {})
    fifo = tmp_path / "g.toml"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match=r"g\.toml: upstreams: Field required"):
        load_config(fifo, {})
    latin = tmp_path / "latin.toml"
    latin.write_bytes(b'[server]\nhost = "caf\xe9"\n')
    with pytest.raises(ConfigError, match=r"latin\.toml: not UTF-8 text \(byte 20\)$"):
        load_config(latin, {})


def test_gateway_with_an_endless_config_is_one_line_and_status_2(tmp_path: Path) -> None:
    """Through the command line: exit 2 and one ``tokometer: error:`` line, no traceback, no wait."""
    from tests.conftest import run_cli

    fifo = tmp_path / "g.yaml"
    os.mkfifo(fifo)
    for path, said in ((Path("/dev/zero"), "is larger than 16 MiB"), (fifo, "the top level must be a table")):
        done = run_cli("gateway", "--config", str(path), "--check", timeout=60)
        assert done.returncode == 2, done.stderr
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("tokometer: error: ") and said in lines[0], done.stderr


@pytest.mark.parametrize(("api", "path", "key_header"),
                         [("openai-responses", b"/v1/responses", b"Authorization: Bearer s3"),
                          ("anthropic-messages", b"/v1/messages", b"x-api-key: s3")])
def test_responses_and_messages_upstreams_get_their_own_requests(tmp_path: Path, api: str, path: bytes,
                                                                  key_header: bytes) -> None:
    """An upstream speaking the Responses or Messages API is sent its own request (its adapter's path, body and
    key header), not the client's chat request."""
    config = tmp_path / "g.toml"
    config.write_text(f'[[upstreams]]\nname = "a"\nurl = "http://h:1/v1"\napi = "{api}"\napi_key = "s3"\n'
                      '[[routes]]\nmodel = "m"\nupstreams = ["a"]\n')
    upstream = Upstream(load_config(config, {}).upstreams[0])
    assert not upstream.openai
    request = upstream.request_bytes({"model": "m", "messages": [{"role": "user", "content": "hi"}],
                                      "max_tokens": 5}, "chat")
    head, _, body = request.partition(b"\r\n\r\n")
    assert head.startswith(b"POST " + path + b" ") and key_header in head
    sent = orjson.loads(body)
    assert sent["stream"] is True and sent["max_tokens" if api == "anthropic-messages" else "max_output_tokens"] == 5
    assert (b"anthropic-version: " in head) == (api == "anthropic-messages")


def test_hedge_after_parses_percentiles_and_times() -> None:
    assert HedgeAfter.parse("p95") == HedgeAfter(percentile=95)
    assert HedgeAfter.parse("300ms") == HedgeAfter(fixed_ms=300.0)
    assert HedgeAfter.parse("1.5s") == HedgeAfter(fixed_ms=1500.0)
    for bad, message in (("p100", "neither"), ("p30", "between p50 and p99"), ("fast", "neither"),
                         ("0ms", "more than 0")):
        with pytest.raises(ValueError, match=message):
            HedgeAfter.parse(bad)
    p90 = HedgeAfter.parse("p90")
    assert p90.deadline_ms([100.0] * (MIN_SAMPLES - 1), 50) is None  # too few samples: no hedge
    window = [10.0, 20.0, 30.0, 40.0, 500.0]
    assert p90.deadline_ms(window, 0) == 500.0  # nearest rank: the 5th of 5
    assert HedgeAfter.parse("p50").deadline_ms(window, 0) == 30.0
    assert HedgeAfter.parse("p50").deadline_ms(window, 45) == 45.0  # the floor
    assert HedgeAfter.parse("200ms").deadline_ms([], 45) == 200.0  # a fixed time needs no samples
    assert percentile([3.0, 1.0, 2.0], 99) == 3.0 and percentile([3.0, 1.0, 2.0], 1) == 1.0


def test_config_rejects_a_bad_hedge_after_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "g.toml"
    path.write_text('[[upstreams]]\nname = "a"\nurl = "http://h:1/v1"\n[[routes]]\nmodel = "m"\nupstreams = ["a"]\n'
                    'hedge_after = "soon"\n')
    with pytest.raises(ConfigError) as info:
        load_config(path, {})
    assert str(info.value) == (f"{path}: routes.0.hedge_after: 'soon' is neither a percentile (p50 to p99) nor a "
                               "time (e.g. 300ms, 1.5s)")


async def _leg(delay: float, value: str | None, log: list[str]) -> str:
    """A fake attempt: ``value`` after ``delay`` s (None: it fails); ``log`` says whether it was cancelled."""
    try:
        await asyncio.sleep(delay)
    except asyncio.CancelledError:
        log.append(f"cancelled {value}")
        raise
    if value is None:
        raise RuntimeError("failed")
    return value


def test_race_takes_the_first_answer_and_cancels_the_other() -> None:
    async def run(primary: tuple[float, str | None], hedge: tuple[float, str | None] | None,
                  deadline: float | None = 0.05) -> tuple[Race[str], list[str]]:
        log: list[str] = []

        async def discard(value: str) -> None:
            log.append(f"discarded {value}")

        result = await race(_leg(*primary, log), deadline, lambda: None if hedge is None else _leg(*hedge, log),
                            discard)
        return result, log

    result, log = asyncio.run(run((0.01, "p"), (0.01, "h")))  # answered before the deadline: no hedge
    assert (result.winner, result.by, result.hedged, log) == ("p", "primary", False, [])
    result, log = asyncio.run(run((1.0, "p"), (0.01, "h")))  # late: the hedge wins, the primary is cancelled
    assert (result.winner, result.by, result.hedged, log) == ("h", "hedge", True, ["cancelled p"])
    assert result.primary_lost_after_s is not None and 0.05 <= result.primary_lost_after_s < 0.5
    result, log = asyncio.run(run((0.1, "p"), (1.0, "h")))  # hedged, but the primary still comes first
    assert (result.winner, result.by, log) == ("p", "primary", ["cancelled h"])
    result, log = asyncio.run(run((0.1, "p"), (0.0, None)))  # a failed hedge does not end the race
    assert (result.winner, result.by, str(result.hedge_error)) == ("p", "primary", "failed")
    result, log = asyncio.run(run((0.1, None), (0.0, None)))  # both failed
    assert result.winner is None and str(result.primary_error) == str(result.hedge_error) == "failed"
    result, log = asyncio.run(run((0.05, "p"), None, 0.01))  # no hedge possible now: wait for the primary
    assert (result.winner, result.hedged) == ("p", False)


def test_carry_on_body_and_stream_identity() -> None:
    chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 20}
    body = carry_on_body(chat, "chat", " so far", 15)
    assert body["messages"][-1] == {"role": "assistant", "content": " so far"} and body["max_tokens"] == 15
    assert body["continue_final_message"] is True and body["add_generation_prompt"] is False
    assert "max_completion_tokens" not in body and chat["messages"] == [{"role": "user", "content": "hi"}]
    assert "max_tokens" not in carry_on_body(chat, "chat", "x", None)
    assert carry_on_body({"prompt": "Once"}, "completions", " upon", 3)["prompt"] == "Once upon"
    assert client_max_tokens(chat) == 20 and client_max_tokens({"max_tokens": True}) is None
    raw = b'data: {"id":"cmpl-1","created":7,"model":"big","choices":[]}\n\n'
    assert stream_identity(raw) == ("cmpl-1", 7, "big")
    assert stream_identity(b"data: [DONE]\n\n") == (None, None, None)
    for created in (b"true", b"-7", b"7.5", b'"7"'):  # an upstream's: the gateway writes its own instead
        assert stream_identity(b'data: {"id":"cmpl-1","created":%s}\n\n' % created) == ("cmpl-1", None, None)


def test_a_hedge_loser_s_time_feeds_its_window_but_leaves_its_breaker_alone() -> None:
    """A primary that hangs and always loses the race must still be able to open its circuit."""
    h = UpstreamHealth(breaker_failures=2, breaker_cooldown_s=10, window=3)
    h.failure("first_token_timeout", now=0.0)
    h.sample(400.0)
    assert h.consecutive_failures == 1 and list(h.ttft_ms) == [400.0]
    h.failure("first_token_timeout", now=1.0)
    assert h.state(now=2.0) == "open"
    h.sample(450.0)
    assert h.state(now=2.0) == "open"


def test_route_series_count_what_labels_would_and_only_once_used() -> None:
    """`GatewayMetrics.series` (children looked up once) renders exactly what ``labels()`` calls would."""
    from tokometer.gateway.prometheus import GatewayMetrics

    cached, direct = GatewayMetrics(gpu=False), GatewayMetrics(gpu=False)
    for _ in range(3):
        series = cached.series("chat", "a")
        assert series is cached.series("chat", "a")
        series.request(200)
        series.observe("ttft", 0.012)
        series.observe("duration", 0.2)
        series.observe("overhead", 0.0003)
        series.add("output", 16)
        direct.requests.labels("chat", "a", "200").inc()
        direct.ttft.labels("chat", "a").observe(0.012)
        direct.duration.labels("chat", "a").observe(0.2)
        direct.overhead.labels("chat").observe(0.0003)
        direct.tokens.labels("chat", "a", "output").inc(16)
    cached.series("chat", "b").request(502)
    direct.requests.labels("chat", "b", "502").inc()
    text = cached.render().decode()
    assert text == direct.render().decode()
    assert 'tokometer_gateway_requests_total{route="chat",status="200",upstream="a"} 3.0' in text
    assert "gen_ai_server_time_per_output_token_seconds_count{" not in text  # unused series are not made
    assert "tokometer_gateway_cost_usd_total{" not in text
