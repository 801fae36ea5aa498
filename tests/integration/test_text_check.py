"""`tokometer bench` notices an answer whose text does not add up to the tokens the server counted.

The broken relay is a raw server written for the purpose: it sends what the gateway relayed of vLLM 0.32's
``/v1/completions`` stream before its fix, byte for byte (the first and the last of eight text events, then
vLLM's usage saying 8 tokens); the honest one sends vLLM's whole stream. Both come from
`tests.vllm_bytes`. The simulator behind the real gateway is the control.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import SimServer, run_cli, start_gateway
from tests.helpers import bench
from tests.vllm_bytes import ANSWER, VllmBytesServer, vllm_completion_events
from tokometer.benchmark.run import BenchResult, StepResult
from tokometer.metrics.textcheck import SLACK, TOLERANCE, TextCheck

MODEL = "Qwen/Qwen2.5-0.5B-Instruct"


def _lossy_events() -> list[bytes]:
    """What the gateway relayed of vLLM's stream before the fix: the first text event (taken for a role event),
    the last (it carried the finish), the usage and [DONE]."""
    events = vllm_completion_events(MODEL)
    return [events[0], events[len(ANSWER) - 1], *events[len(ANSWER):]]


@pytest.fixture
def lossy() -> Iterator[VllmBytesServer]:
    server = VllmBytesServer(MODEL, _lossy_events())
    server.start()
    yield server
    server.stop()


@pytest.fixture
def honest() -> Iterator[VllmBytesServer]:
    server = VllmBytesServer(MODEL)
    server.start()
    yield server
    server.stop()


def _bench(url: str, tokenizer: str = "none", requests: int = 3) -> BenchResult:
    return bench(url, api="openai-completions", model=MODEL, concurrency=[1], requests=requests, input_tokens=8,
                 output_tokens=8, tokenizer=tokenizer)


def _check(step: StepResult) -> TextCheck:
    assert step.summary.text_check is not None
    return step.summary.text_check


def test_lost_text_is_flagged_by_its_bytes_without_a_tokenizer(lossy: VllmBytesServer,
                                                               honest: VllmBytesServer) -> None:
    step = _bench(lossy.url).steps[0]
    check = _check(step)
    received = len((ANSWER[0] + ANSWER[-1]).encode())  # the two text events that arrived
    assert step.summary.output_tokens_total == 3 * 8  # usage still said 8 each: the counts look right
    assert check.checked == {"bytes": 3}
    assert [(s.counted, s.received, s.source) for s in check.short] == [(8, received, "bytes")] * 3
    assert 8 - received > max(SLACK, TOLERANCE * 8)  # what the rule says
    warnings = [w for w in step.warnings if "received less text than the server counted" in w]
    assert len(warnings) == 1 and warnings[0].startswith("3 of 3 answers")
    assert "at most 5" in warnings[0]

    clean = _bench(honest.url).steps[0]
    assert _check(clean).checked == {"bytes": 3} and _check(clean).short == ()
    assert not any("received less text" in w for w in clean.warnings)


def test_lost_text_is_flagged_by_the_tokenizer(lossy: VllmBytesServer, honest: VllmBytesServer) -> None:
    """With the model's tokenizer the count is exact: ' the' and '.' are 2 of the 8 tokens (Gemma's tokenizer
    counts vLLM's whole answer as 8 too), and the tokenizer-mismatch warning does not blame the tokenizer."""
    step = _bench(lossy.url, "bundled", requests=2).steps[0]
    check = _check(step)
    assert check.checked == {"tokenizer": 2}
    assert [(s.counted, s.received) for s in check.short] == [(8, 2), (8, 2)]
    assert not any("is the tokenizer the model's own" in w for w in step.warnings)

    clean = _bench(honest.url, "bundled", requests=2).steps[0]
    assert _check(clean).checked == {"tokenizer": 2} and _check(clean).short == ()
    assert not any("received less text" in w or "the tokenizer counts" in w for w in clean.warnings)


def test_the_json_says_which_requests(lossy: VllmBytesServer, tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    done = run_cli("bench", "--url", lossy.url, "--api", "openai-completions", "--model", MODEL, "-c", "1", "-n",
                   "2", "--input-tokens", "8", "--output-tokens", "8", "--tokenizer", "none", "--no-store",
                   "--json", str(out))
    assert done.returncode == 0, done.stderr
    data = json.loads(out.read_text())
    check = data["steps"][0]["summary"]["output_tokens"]["text_check"]
    assert check["checked"] == {"bytes": 2}
    assert sorted(s["index"] for s in check["short"]) == [0, 1]
    assert check["short"][0] == {"index": check["short"][0]["index"], "counted": 8, "received": 5,
                                 "source": "bytes"}
    assert check["tolerance"] == {"share": TOLERANCE, "tokens": SLACK}
    assert any(w.startswith("2 of 2 answers received less text") for w in data["warnings"])
    assert "output_tokens.text_check" in data["definitions"]
    assert "received text short of the count in 2 of 2 answers" in done.stdout


def test_the_simulator_through_the_gateway_adds_up(sim_factory: Callable[..., SimServer], tmp_path: Path) -> None:
    sim = sim_factory("--model", "m", "--ttft-ms", "2", "--itl-ms", "1")
    config = tmp_path / "gateway.toml"
    config.write_text(f'[[upstreams]]\nname = "sim"\nurl = "{sim.openai_url}"\nmodel = "m"\n'
                      '[[routes]]\nmodel = "m"\nupstreams = ["sim"]\n')
    gw = start_gateway(config)
    try:
        for api in ("openai-completions", "openai-chat"):
            step = bench(gw.openai_url, api=api, model="m", concurrency=[2], requests=6, input_tokens=8,
                         output_tokens=16, tokenizer="none", ignore_eos=True).steps[0]
            assert _check(step).checked == {"bytes": 6}, api
            assert _check(step).short == (), api
    finally:
        gw.stop()
