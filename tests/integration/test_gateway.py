"""The gateway in front of real simulator upstreams on loopback (and real Redis where it matters)."""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import RedisServer, SimServer, run_cli, start_gateway
from tests.helpers import bench, simulator_medians_ms
from tokometer.gateway.auth import hash_key
from tokometer.tokens import load_tokenizer


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "gateway.toml"
    path.write_text(text)
    return path


def _upstream(name: str, sim: SimServer, model: str, extra: str = "") -> str:
    return f'[[upstreams]]\nname = "{name}"\nurl = "{sim.openai_url}"\nmodel = "{model}"\n{extra}\n'


def _post(url: str, body: dict[str, Any], headers: dict[str, str] | None = None,
          timeout: float = 30) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json",
                                                                      **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, {k.lower(): v for k, v in error.headers.items()}, error.read()


def _chat(gw: SimServer, text: str = "hello there", **extra: Any) -> tuple[int, dict[str, str], bytes]:
    body = {"model": "chat", "messages": [{"role": "user", "content": text}], "max_tokens": 4, **extra}
    return _post(gw.openai_url + "/chat/completions", body)


@pytest.fixture
def gateway_factory(tmp_path: Path) -> Iterator[Callable[[str], SimServer]]:
    started: list[SimServer] = []

    def make(text: str) -> SimServer:
        server = start_gateway(_config(tmp_path, text))
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()


def _metrics(root: str) -> dict[str, float]:
    with urllib.request.urlopen(root + "/metrics", timeout=10) as response:
        text = response.read().decode()
    return {line.rpartition(" ")[0]: float(line.rpartition(" ")[2]) for line in text.splitlines()
            if line and not line.startswith("#")}


def test_primary_failing_half_the_time_costs_clients_nothing(sim_factory: Callable[..., SimServer],
                                                             gateway_factory: Callable[[str], SimServer],
                                                             tmp_path: Path) -> None:
    primary = sim_factory("--model", "big", "--ttft-ms", "5", "--itl-ms", "1", "--fault", "http_500=0.5")
    backup = sim_factory("--model", "small", "--ttft-ms", "5", "--itl-ms", "1")
    log = tmp_path / "requests.jsonl"
    gw = gateway_factory(_upstream("primary", primary, "big", "retries = 0\nbreaker_failures = 1000") +
                         _upstream("backup", backup, "small") +
                         '[[routes]]\nmodel = "chat"\nupstreams = ["primary", "backup"]\n'
                         f'[log]\npath = "{log}"\n')
    result = bench(gw.openai_url, model="chat", concurrency=[4], requests=60, input_tokens=8, output_tokens=8,
                   tokenizer="none")
    summary = result.steps[0].summary
    assert summary.requests_failed == 0 and summary.requests_completed == 60
    failed_on_primary = sum(1 for t in primary.trace() if t["status"] == 500)
    assert 15 < failed_on_primary < 45  # about half of the primary's attempts failed ...
    assert len(backup.trace()) == failed_on_primary  # ... and each of them was served by the backup
    values = _metrics(gw.root)
    assert values['tokometer_gateway_fallbacks_total{primary="primary",route="chat",upstream="backup"}'] \
        == failed_on_primary
    assert values['tokometer_gateway_requests_total{route="chat",status="200",upstream="primary"}'] \
        + values['tokometer_gateway_requests_total{route="chat",status="200",upstream="backup"}'] == 60
    assert values['tokometer_gateway_tokens_total{route="chat",type="output",upstream="primary"}'] \
        + values['tokometer_gateway_tokens_total{route="chat",type="output",upstream="backup"}'] \
        == summary.output_tokens_total == 60 * 8
    gw.stop()  # flushes the request log
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(lines) == 60
    assert sum(line["fallback"] for line in lines) == failed_on_primary
    assert {line["upstream"] for line in lines if line["fallback"]} == {"backup"}
    assert all(line["completion_tokens"] == 8 and line["status"] == 200 for line in lines)
    assert all(line["overhead_ms"] is not None and line["upstream_ttft_ms"] >= 5 for line in lines)


@pytest.mark.timing  # a time: 1 s against the 60 s idle limit, in the timing lane as the lanes' rule asks
def test_a_primary_that_never_sends_a_response_head_falls_back_at_the_first_token_limit(
        sim_factory: Callable[..., SimServer], gateway_factory: Callable[[str], SimServer]) -> None:
    """A stopped server (SIGSTOP) still takes connections and never answers; the first-token limit runs from the
    request's send, so the gateway falls back after it, not after the idle limit on silence inside a stream."""
    primary = sim_factory("--model", "big", "--ttft-ms", "5", "--itl-ms", "1")
    backup = sim_factory("--model", "small", "--ttft-ms", "5", "--itl-ms", "1")
    gw = gateway_factory(_upstream("primary", primary, "big", "retries = 0\nfirst_token_timeout_s = 1\n"
                                                              "idle_timeout_s = 60\nbreaker_failures = 1000") +
                         _upstream("backup", backup, "small") +
                         '[[routes]]\nmodel = "chat"\nupstreams = ["primary", "backup"]\n')
    assert _chat(gw)[1]["x-tokometer-upstream"] == "primary"
    os.kill(primary.process.pid, signal.SIGSTOP)
    try:
        started = time.perf_counter()
        status, headers, _ = _chat(gw)
        took = time.perf_counter() - started
    finally:
        os.kill(primary.process.pid, signal.SIGCONT)
    assert status == 200 and headers["x-tokometer-upstream"] == "backup"
    assert took < 20, took  # the 1 s limit and the backup's answer; the idle limit alone would be 60 s
    values = _metrics(gw.root)
    assert values['tokometer_gateway_fallbacks_total{primary="primary",route="chat",upstream="backup"}'] == 1


def test_a_non_streamed_answers_overhead_leaves_out_the_upstreams_decode(
        sim_factory: Callable[..., SimServer], gateway_factory: Callable[[str], SimServer], tmp_path: Path) -> None:
    """A whole answer reaches the client after the upstream's last token: the gateway's overhead is its time
    before the upstream request and after the upstream's answer ended, never the upstream's 19 x 20 ms decode."""
    sim = sim_factory("--model", "m", "--ttft-ms", "5", "--itl-ms", "20")
    log = tmp_path / "requests.jsonl"
    gw = gateway_factory(_upstream("up", sim, "m") + '[[routes]]\nmodel = "chat"\nupstreams = ["up"]\n'
                         f'[cache]\nenabled = false\n[log]\npath = "{log}"\n')
    for stream in (False, True):
        status, _, _ = _post(gw.openai_url + "/chat/completions", {
            "model": "chat", "stream": stream, "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]})
        assert status == 200
    gw.stop()  # flushes the request log
    whole, streamed = [json.loads(line) for line in log.read_text().splitlines()]
    decode_ms = 19 * 20  # the sim paces its tokens by the clock: its decode is at least this
    for line in (whole, streamed):
        assert line["completion_tokens"] == 20 and line["overhead_ms"] is not None
        assert 0 < line["overhead_ms"] <= line["e2e_ms"] - decode_ms, line


def test_slow_primary_loses_traffic_and_wins_it_back(sim_factory: Callable[..., SimServer],
                                                     gateway_factory: Callable[[str], SimServer]) -> None:
    primary = sim_factory("--model", "big", "--ttft-ms", "5", "--itl-ms", "1")
    backup = sim_factory("--model", "small", "--ttft-ms", "5", "--itl-ms", "1")
    gw = gateway_factory(_upstream("primary", primary, "big") + _upstream("backup", backup, "small") +
                         '[[routes]]\nmodel = "chat"\nupstreams = ["primary", "backup"]\nslow_ttft_ms = 150\n'
                         "slow_window = 3\nprobe_interval_s = 0.2\n")

    def served_by() -> str:
        status, headers, _ = _chat(gw, stream=True)
        assert status == 200
        return headers["x-tokometer-upstream"]

    assert served_by() == "primary"
    _patch(primary, {"ttft_ms": 400})
    assert served_by() == "primary"  # a slow answer, still an answer: now the median of (5, 400) ms
    assert [served_by() for _ in range(3)] == ["backup"] * 3  # is over 150 ms: the traffic moved
    _patch(primary, {"ttft_ms": 5})
    deadline = time.monotonic() + 10
    while served_by() != "primary":  # the prober measures the primary again; traffic returns
        assert time.monotonic() < deadline, "traffic never came back to the recovered primary"
        time.sleep(0.2)
    health = json.loads(urllib.request.urlopen(gw.root + "/health", timeout=10).read())
    assert health["upstreams"]["primary"]["state"] == "closed"


def _patch(sim: SimServer, changes: dict[str, Any]) -> None:
    request = urllib.request.Request(sim.root + "/sim/config", json.dumps(changes).encode(), method="PATCH")
    with urllib.request.urlopen(request, timeout=10) as response:
        response.read()


@pytest.mark.timing  # the cache's Redis deadline and its 1 s back-off: beside the other lanes a read once missed
def test_redis_outage_degrades_to_no_cache(sim_factory: Callable[..., SimServer],
                                           gateway_factory: Callable[[str], SimServer],
                                           redis_server: RedisServer) -> None:
    sim = sim_factory("--ttft-ms", "5", "--itl-ms", "1")
    gw = gateway_factory(_upstream("only", sim, "sim-model") + '[[routes]]\nmodel = "chat"\nupstreams = ["only"]\n'
                         f'[cache]\nredis_url = "{redis_server.url}"\n')

    def ask(text: str) -> str:
        status, headers, _ = _chat(gw, text, temperature=0, stream=True)
        assert status == 200
        return headers.get("x-tokometer-cache", "miss")

    assert ask("question one") == "miss"
    redis_server.wait_for_keys(1)  # the answer is written to Redis in the background
    assert ask("question one") == "hit"
    redis_server.stop()
    assert [ask(f"during outage {i}") for i in range(3)] == ["miss"] * 3  # still answered
    assert ask("question one") == "miss"
    redis_server.start()
    time.sleep(1.2)  # past the cache's back-off, it tries Redis again
    assert ask("after outage") == "miss"
    redis_server.wait_for_keys(1)  # the restarted server is empty: this is the new answer
    assert ask("after outage") == "hit"
    answered = len(sim.trace())
    assert answered == 1 + 3 + 1 + 1  # every miss reached the upstream, no hit did


def test_budgets_reject_truncate_and_per_key(sim_factory: Callable[..., SimServer],
                                            gateway_factory: Callable[[str], SimServer]) -> None:
    sim = sim_factory("--ttft-ms", "1", "--itl-ms", "1", "--trace-bodies")
    secret = "s3cret-team-a"
    gw = gateway_factory(
        _upstream("only", sim, "sim-model")
        + '[[routes]]\nmodel = "chat"\nupstreams = ["only"]\ntokenizer = "bundled"\nmax_input_tokens = 40\n'
        + 'over_limit = "reject"\n'
        + '[[routes]]\nmodel = "cut"\nupstreams = ["only"]\ntokenizer = "bundled"\nmax_input_tokens = 40\n'
        + 'over_limit = "truncate"\ncontext = 64\n'
        + f'[[keys]]\nname = "team-a"\nsha256 = "{hash_key(secret)}"\ntokens_per_period = 120\n'
        + '[cache]\nenabled = false\n')
    auth = {"Authorization": f"Bearer {secret}"}
    long_text = " ".join(["budget"] * 120)
    status, _, body = _post(gw.openai_url + "/chat/completions", {"model": "chat", "messages": [
        {"role": "user", "content": long_text}]}, auth)
    assert status == 400
    error = json.loads(body)["error"]
    assert error["code"] == "context_length_exceeded" and "limit of 40 input tokens" in error["message"]
    status, headers, body = _post(gw.openai_url + "/chat/completions", {"model": "cut", "max_tokens": 100,
                                                                        "messages": [{"role": "user",
                                                                                      "content": long_text}]}, auth)
    assert status == 200
    forwarded = json.loads(sim.trace()[-1]["body"])
    tokenizer = load_tokenizer("bundled")
    assert tokenizer.count_chat(forwarded["messages"]) == 40  # exactly at the limit
    assert forwarded["max_tokens"] == 64 - 40 == int(headers["x-tokometer-max-tokens"])
    assert int(headers["x-tokometer-truncated-from"]) > 40
    # per-key budget: 120 tokens a day; each answer costs its prompt and completion tokens (as the upstream
    # counted them: the simulator counts words), ~13 for each of these
    statuses = []
    for _ in range(20):
        status, _, body = _post(gw.openai_url + "/chat/completions", {"model": "cut", "max_tokens": 10, "messages": [
            {"role": "user", "content": "a short question"}]}, auth)
        statuses.append(status)
        if status == 429:
            break
        time.sleep(0.05)  # charging happens right after each answer
    assert statuses[-1] == 429 and statuses.count(200) >= 2
    message = json.loads(body)["error"]["message"]
    assert "token budget of key 'team-a' is used up" in message and "of 120 tokens this day" in message
    status, _, body = _post(gw.openai_url + "/chat/completions", {"model": "cut", "messages": []},
                            {"Authorization": "Bearer wrong"})
    assert status == 401
    error = json.loads(body)["error"]
    assert error["code"] == "invalid_api_key" and error["type"] == "authentication_error"
    assert "not a problem with model tokens or the context length" in error["message"]


def test_upstream_auth_failure_names_the_upstream(sim_factory: Callable[..., SimServer],
                                                  gateway_factory: Callable[[str], SimServer]) -> None:
    sim = sim_factory("--api-key", "right")
    gw = gateway_factory(_upstream("locked", sim, "sim-model", 'api_key = "wrong"\nretries = 0') +
                         '[[routes]]\nmodel = "chat"\nupstreams = ["locked"]\n')
    status, _, body = _chat(gw)
    assert status == 502
    error = json.loads(body)["error"]
    assert "locked" in error["message"] and error["code"] == "upstream_invalid_api_key"


def test_translation_continuation_and_disconnect(sim_factory: Callable[..., SimServer],
                                                 gateway_factory: Callable[[str], SimServer]) -> None:
    ollama = sim_factory("--ttft-ms", "2", "--itl-ms", "1", "--max-output-tokens", "10", "--trace-bodies")
    gw = gateway_factory(f'[[upstreams]]\nname = "ollama"\nurl = "{ollama.root}"\napi = "ollama"\nmodel = "m"\n'
                         '[[routes]]\nmodel = "chat"\nupstreams = ["ollama"]\ncontinue_on_length = true\n')
    result = bench(gw.openai_url, model="chat", concurrency=[1], requests=2, input_tokens=4, output_tokens=35,
                   tokenizer="none")
    summary = result.steps[0].summary
    assert summary.requests_failed == 0
    # the upstream stops every answer at 10 tokens; the gateway continued in 4 segments: 10+10+10+5
    assert [r.output_tokens for r in result.steps[0].records] == [35, 35]
    assert len(ollama.trace()) == 8
    assert json.loads(ollama.trace()[1]["body"])["messages"][-1]["role"] == "assistant"
    # a client that goes away mid-answer cancels the upstream request
    slow = sim_factory("--ttft-ms", "5", "--itl-ms", "50")
    gw2 = gateway_factory(_upstream("slow", slow, "sim-model") + '[[routes]]\nmodel = "chat"\nupstreams = ["slow"]\n')
    request = urllib.request.Request(gw2.openai_url + "/chat/completions", json.dumps(
        {"model": "chat", "messages": [{"role": "user", "content": "x"}], "max_tokens": 200, "stream": True}).encode(),
        {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        response.read(200)
    deadline = time.monotonic() + 5
    while not (slow.trace() and slow.trace()[-1]["end_ns"]):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    trace = slow.trace()[-1]
    assert trace["disconnected"] and trace["completion_tokens"] < 50


def test_bad_config_is_one_clear_line(tmp_path: Path) -> None:
    path = _config(tmp_path, '[[upstreams]]\nname = "a"\nurl = "http://x/v1"\n[[routes]]\nmodel = "m"\n'
                             'upstreams = ["b"]\n')
    done = run_cli("gateway", "--config", str(path), "--check")
    assert done.returncode == 2
    assert done.stderr.strip() == f"tokometer: error: {path}: routes[0].upstreams: no upstream named 'b' (have a)"
    assert len(done.stderr.strip().splitlines()) == 1
    path.write_text('[[upstreams]]\nname = "a"\nurl = "ftp://x"\n')
    done = run_cli("gateway", "--config", str(path), "--check")
    assert done.returncode == 2 and "upstreams.0.url" in done.stderr and "http://" in done.stderr
    path.write_text("[[upstreams]\n")
    done = run_cli("gateway", "--config", str(path), "--check")
    assert done.returncode == 2 and "not valid TOML" in done.stderr


@pytest.mark.timing  # TPOTs within 5 % of each other: a time, lost on a host busy with other tests
def test_gateway_and_bench_share_one_tpot_definition(sim_factory: Callable[..., SimServer],
                                                     gateway_factory: Callable[[str], SimServer],
                                                     tmp_path: Path) -> None:
    """The same stream (4 tokens an event, 5 ms a token) measured by bench directly and by the gateway in its
    request log and /metrics: one TPOT, the bench's (the first event's 4 tokens are prefill, not decode).
    With (last - first) / (tokens - 1), the gateway's old definition, it would read 10% low."""
    sim = sim_factory("--model", "m", "--ttft-ms", "20", "--itl-ms", "5", "--tokens-per-event", "4")
    log = tmp_path / "requests.jsonl"
    gw = gateway_factory(_upstream("sim", sim, "m") + '[[routes]]\nmodel = "chat"\nupstreams = ["sim"]\n'
                         f'[cache]\nenabled = false\n[log]\npath = "{log}"\n')
    direct = bench(sim.openai_url, model="m", concurrency=[1], requests=6, input_tokens=8, output_tokens=32,
                   tokenizer="none").steps[0].summary
    through = bench(gw.openai_url, model="chat", concurrency=[1], requests=6, input_tokens=8, output_tokens=32,
                    tokenizer="none").steps[0].summary
    # bench's TPOT is the simulator's own (its trace of the direct run); the simulator kept to its script, loosely
    direct_tpot_ms = simulator_medians_ms(sim.trace()[:6])[1]
    assert direct.tpot_ms.p50 == pytest.approx(direct_tpot_ms, rel=0.03)
    assert direct_tpot_ms == pytest.approx(5.0, rel=0.1)
    assert through.tpot_ms.p50 == pytest.approx(direct.tpot_ms.p50, rel=0.05)
    values = _metrics(gw.root)
    histogram_mean_ms = 1e3 * values['gen_ai_server_time_per_output_token_seconds_sum{route="chat",upstream="sim"}'] \
        / values['gen_ai_server_time_per_output_token_seconds_count{route="chat",upstream="sim"}']
    gw.stop()  # flushes the request log
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(lines) == 6 and all(line["completion_tokens"] == 32 for line in lines)
    logged = sorted(line["tpot_ms"] for line in lines)
    assert logged[3] == pytest.approx(direct.tpot_ms.p50, rel=0.05)
    assert histogram_mean_ms == pytest.approx(direct.tpot_ms.mean, rel=0.05)
    assert all(line["decode_tok_s"] == pytest.approx(1e3 / line["tpot_ms"]) for line in lines)
