"""Mid-stream resume against real upstreams that break off mid-answer: `tokometer sim` processes that reset
the connection, send an error event, stall, or are killed with SIGKILL, behind a real gateway process."""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SimServer
from tests.integration.gateway_streams import Streamed, gateway_factory, metrics, stream_chat, upstream

__all__ = ["gateway_factory"]  # the fixture, used by name

_ASK = {"model": "chat", "messages": [{"role": "user", "content": "tell me a story please"}], "max_tokens": 20,
        "stream_options": {"include_usage": True}}


def _one_answer(out: Streamed) -> None:
    """One well-formed answer: a 200, every chunk with the same id/created/model, one finish, one usage, one
    [DONE] at the very end, no error."""
    assert out.status == 200, out.events
    assert not out.errors, out.errors
    assert out.dones == 1 and out.events[-1][1] == "[DONE]"
    assert len({(c["id"], c["created"], c["model"]) for c in out.chunks}) == 1, {c["id"] for c in out.chunks}
    assert out.finish_reasons == ["length"]
    assert len(out.usages) == 1


def _first_content(out: Streamed) -> dict[str, Any]:
    return next(c for c in out.chunks if c.get("choices") and c["choices"][0]["delta"].get("content"))


def _continuation_of(sim: SimServer) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(sim.trace()[-1]["body"])
    return body


@pytest.mark.timing  # the primary's idle_timeout_s of 0.5 s, and a stall timed against it: a host busy with the other
# tests can hold the primary's first byte past it, and the answer then begins at the backup (seen once, 2026-12-07)
def test_resume_after_each_kind_of_mid_stream_failure(sim_factory: Callable[..., SimServer],
                                                  gateway_factory: Callable[[str], SimServer],
                                                  tmp_path: Path) -> None:
    primary = sim_factory("--model", "big", "--ttft-ms", "5", "--itl-ms", "2", "--fault-after-tokens", "5",
                          "--fault-schedule", "reset,error_event,stall,malformed,reset", "--stall-s", "30",
                          "--trace-bodies")
    backup = sim_factory("--model", "small", "--ttft-ms", "5", "--itl-ms", "2", "--trace-bodies")
    ollama = sim_factory("--ttft-ms", "5", "--itl-ms", "2", "--trace-bodies")
    closer = sim_factory("--model", "big", "--ttft-ms", "5", "--itl-ms", "2", "--fault-after-tokens", "5",
                         "--fault", "stall=1", "--stall-s", "0.05")  # ends its response cleanly, mid-answer
    log = tmp_path / "requests.jsonl"
    gw = gateway_factory(upstream("primary", primary, "big", "idle_timeout_s = 0.5\nretries = 0") +
                         upstream("backup", backup, "small") +
                         f'[[upstreams]]\nname = "ollama"\nurl = "{ollama.root}"\napi = "ollama"\nmodel = "m"\n'
                         '[[routes]]\nmodel = "chat"\nupstreams = ["primary", "backup"]\n'
                         '[[routes]]\nmodel = "mixed"\nupstreams = ["primary", "ollama"]\n'
                         + upstream("closer", closer, "big") +
                         '[[routes]]\nmodel = "closing"\nupstreams = ["closer", "backup"]\n'
                         f'[cache]\nenabled = false\n[log]\npath = "{log}"\n')
    for fault in ("reset", "error_event", "stall", "malformed", "closed"):
        started = time.perf_counter()
        out = stream_chat(gw.openai_url, {**_ASK, "model": "closing" if fault == "closed" else "chat"})
        took = time.perf_counter() - started
        _one_answer(out)
        assert out.headers["x-tokometer-upstream"] == ("closer" if fault == "closed" else "primary")  # it began there
        first = _first_content(out)  # the primary's own bytes, relayed as they were; the rest was written to match
        assert first["model"] == "big" and first["id"].startswith("cmpl-sim-")
        served = (closer if fault == "closed" else primary).trace()[-1]
        assert served["fault"] == f"{'stall' if fault == 'closed' else fault}:done"
        so_far = _continuation_of(backup)  # ... and the backup was asked to continue the text so far
        assert so_far["messages"][:-1] == _ASK["messages"]
        assert so_far["messages"][-1]["role"] == "assistant" and so_far["continue_final_message"] is True
        assert so_far["max_tokens"] == 15 and so_far["model"] == "small"
        assert out.text.startswith(so_far["messages"][-1]["content"])
        assert len(so_far["messages"][-1]["content"].split()) == 5  # the primary's 5 tokens, then the backup's 15
        assert len(out.content_times) == 20 and len(out.text.split()) == 20
        assert out.usages[0]["completion_tokens"] == 20
        assert out.usages[0]["prompt_tokens"] == served["prompt_tokens"]  # once: the client's prompt
        if fault == "stall":
            assert 0.5 <= took < 5  # idle_timeout_s, then the rest from the backup
            assert served["disconnected"]  # the gateway hung up on the stalled stream
    # a translated upstream carries on an OpenAI upstream's answer in the same stream
    out = stream_chat(gw.openai_url, {**_ASK, "model": "mixed"})
    _one_answer(out)
    assert _first_content(out)["model"] == "big" and len(out.text.split()) == 20
    assert out.text.startswith(_continuation_text(ollama)) and len(_continuation_text(ollama).split()) == 5
    values = metrics(gw.root)
    for reason, route, n in (("reset", "chat", 1), ("server_error_event", "chat", 1), ("timeout", "chat", 1),
                             ("malformed_stream", "chat", 1), ("reset", "closing", 1), ("reset", "mixed", 1)):
        assert values[f'tokometer_gateway_resumes_total{{outcome="resumed",reason="{reason}",route="{route}"}}'] == n
    assert values['tokometer_gateway_tokens_total{route="chat",type="output",upstream="backup"}'] == 4 * 20
    gw.stop()  # flushes the request log
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(lines) == 6
    assert [line["served_by"] for line in lines] == [["primary", "backup"]] * 4 + [["closer", "backup"],
                                                                                 ["primary", "ollama"]]
    assert all(line["resumes"] == 1 and line["status"] == 200 and line["error"] is None and
               line["completion_tokens"] == 20 for line in lines)


def _continuation_text(sim: SimServer) -> str:
    return str(json.loads(sim.trace()[-1]["body"])["messages"][-1]["content"])


def test_resume_after_the_primary_process_is_killed(sim_factory: Callable[..., SimServer],
                                                    gateway_factory: Callable[[str], SimServer]) -> None:
    primary = sim_factory("--model", "big", "--ttft-ms", "5", "--itl-ms", "40")
    backup = sim_factory("--model", "small", "--ttft-ms", "5", "--itl-ms", "2", "--trace-bodies")
    gw = gateway_factory(upstream("primary", primary, "big", "retries = 0") + upstream("backup", backup, "small") +
                         '[[routes]]\nmodel = "chat"\nupstreams = ["primary", "backup"]\n[cache]\nenabled = false\n')
    killed = threading.Event()

    def kill_after_three(n: int) -> None:
        if n == 3 and not killed.is_set():
            killed.set()
            primary.process.send_signal(signal.SIGKILL)  # dies mid-answer: no ending, no FIN handshake of its own

    out = stream_chat(gw.openai_url, _ASK, on_content=kill_after_three)
    _one_answer(out)
    assert killed.is_set() and primary.process.wait(5) == -signal.SIGKILL
    so_far = _continuation_text(backup)
    received_from_primary = len(so_far.split())
    assert 3 <= received_from_primary < 20
    assert out.text.startswith(so_far) and len(out.text.split()) == 20
    assert json.loads(backup.trace()[-1]["body"])["max_tokens"] == 20 - received_from_primary
    assert out.usages[0]["completion_tokens"] == 20
    values = metrics(gw.root)
    assert values['tokometer_gateway_resumes_total{outcome="resumed",reason="reset",route="chat"}'] == 1


def test_gives_up_with_an_error_event_when_no_upstream_is_left(sim_factory: Callable[..., SimServer],
                                                              gateway_factory: Callable[[str], SimServer]) -> None:
    primary = sim_factory("--model", "big", "--ttft-ms", "5", "--itl-ms", "2", "--fault", "reset=1",
                          "--fault-after-tokens", "4")
    backup = sim_factory("--model", "small", "--ttft-ms", "5", "--itl-ms", "2", "--fault", "reset=1",
                         "--fault-after-tokens", "3")
    gw = gateway_factory(upstream("primary", primary, "big", "retries = 0") +
                         upstream("backup", backup, "small", "retries = 0") +
                         '[[routes]]\nmodel = "chat"\nupstreams = ["primary", "backup"]\n[cache]\nenabled = false\n')
    out = stream_chat(gw.openai_url, _ASK)
    assert out.status == 200 and out.dones == 1 and out.events[-1][1] == "[DONE]"
    assert len(out.text.split()) == 4 + 3  # what both upstreams sent before they broke off
    assert len(out.errors) == 1
    assert "upstream backup failed mid-answer (reset)" in out.errors[0]
    assert out.finish_reasons == []  # an answer that ended in an error has no finish
    values = metrics(gw.root)
    assert values['tokometer_gateway_resumes_total{outcome="resumed",reason="reset",route="chat"}'] == 1
    assert values['tokometer_gateway_resumes_total{outcome="gave_up",reason="reset",route="chat"}'] == 1


@pytest.mark.parametrize("setting", ["resume_midstream = false", ""])
def test_without_resume_the_stream_ends_with_the_error_event(sim_factory: Callable[..., SimServer],
                                                            gateway_factory: Callable[[str], SimServer],
                                                            setting: str) -> None:
    """Off by choice (two upstreams, resume_midstream = false), or by default with one upstream: today's
    contract, the error event and [DONE]."""
    primary = sim_factory("--ttft-ms", "5", "--itl-ms", "2", "--fault", "reset=1", "--fault-after-tokens", "4")
    backup = sim_factory("--ttft-ms", "5", "--itl-ms", "2")
    upstreams = '["primary", "backup"]' if setting else '["primary"]'
    gw = gateway_factory(upstream("primary", primary, "sim-model", "retries = 0") +
                         upstream("backup", backup, "sim-model") +
                         f'[[routes]]\nmodel = "chat"\nupstreams = {upstreams}\n{setting}\n[cache]\nenabled = false\n')
    out = stream_chat(gw.openai_url, _ASK)
    assert out.status == 200 and out.dones == 1 and len(out.text.split()) == 4
    assert len(out.errors) == 1 and "upstream primary failed mid-answer (reset)" in out.errors[0]
    assert backup.trace() == []


def test_continuation_of_an_openai_upstream_is_one_answer_with_one_usage(
        sim_factory: Callable[..., SimServer], gateway_factory: Callable[[str], SimServer]) -> None:
    """continue_on_length shares the resume's machinery: after the first segment the gateway writes the chunks
    with the id the client saw, and the one usage counts the whole answer against the client's prompt."""
    sim = sim_factory("--model", "big", "--ttft-ms", "2", "--itl-ms", "1", "--max-output-tokens", "8",
                      "--trace-bodies")
    gw = gateway_factory(upstream("only", sim, "big") + '[[routes]]\nmodel = "chat"\nupstreams = ["only"]\n'
                         'continue_on_length = true\n[cache]\nenabled = false\n')
    out = stream_chat(gw.openai_url, {**_ASK, "max_tokens": 20})
    _one_answer(out)
    assert len(out.text.split()) == 20 and [t["completion_tokens"] for t in sim.trace()] == [8, 8, 4]
    assert out.usages[0] == {"prompt_tokens": 5, "completion_tokens": 20, "total_tokens": 25}
    assert [json.loads(t["body"])["max_tokens"] for t in sim.trace()] == [20, 12, 4]
