"""The admission stages: one ordered table, each refusal declared once and answered as declared."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient

from tokometer.gateway import stages
from tokometer.gateway.app import Gateway, create_app
from tokometer.gateway.config import GatewayConfig, load_config
from tokometer.gateway.stages import STAGES, Refusal, stages_for
from tokometer.protocols.openai.chunks import carries_call, carries_tool_calls


def _config(tmp_path: Path, extra: str = "") -> GatewayConfig:
    path = tmp_path / "g.toml"
    path.write_text('[[upstreams]]\nname = "a"\nurl = "http://127.0.0.1:9/v1"\n[[routes]]\nmodel = "m"\n'
                    f'upstreams = ["a"]\n[log]\npath = "{tmp_path / "requests.jsonl"}"\n{extra}')
    return load_config(path, {})


def test_the_stages_run_in_the_documented_order() -> None:
    assert [stage.name for stage in STAGES] == ["key", "body", "translate", "validate", "messages", "route", "rate",
                                               "budget", "prompt", "cache"]


def test_each_refusal_is_declared_once_and_every_declared_one_belongs_to_a_stage() -> None:
    declared = {name: value for name, value in vars(stages).items() if isinstance(value, Refusal)}
    in_table = {refusal for stage in STAGES for refusal in stage.refusals}
    assert set(declared.values()) == in_table
    labels = [r.label for r in declared.values() if r.label is not None]
    assert len(labels) == len(set(labels))


@pytest.mark.parametrize(("extra", "left_out"), [
    ("[cache]\nenabled = false\n", {"key", "rate", "budget", "cache"}), ("", {"key", "rate", "budget"}),
    ('[[routes]]\nmodel = "n"\nupstreams = ["a"]\nrequests_per_minute = 9\n', {"key", "budget"})])
async def test_a_gateway_runs_only_the_stages_its_config_uses(tmp_path: Path, extra: str, left_out: set[str]) -> None:
    gateway = Gateway(_config(tmp_path, extra))
    try:
        assert {stage.name for stage in STAGES} - {stage.name for stage in gateway.stages} == left_out
        assert gateway.stages == stages_for(gateway)
    finally:
        await gateway.close()


def test_refusals_answer_with_their_declared_status_code_and_label(tmp_path: Path) -> None:
    app = create_app(_config(tmp_path, "[server]\nmax_messages = 1\n[cache]\nenabled = false\n"))
    with TestClient(app) as client:
        bad = client.post("/v1/chat/completions", content=b"{not json")
        assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request_error"
        field = client.post("/v1/chat/completions", json={"model": "m", "messages": [], "stream": "yes"})
        assert field.status_code == 400 and field.json()["error"]["code"] == "invalid_type"
        many = client.post("/v1/chat/completions", json={"model": "m", "messages": [
            {"role": "user", "content": "a"}, {"role": "user", "content": "b"}]})
        assert many.status_code == 400 and many.json()["error"]["code"] == "too_many_messages"
        unknown = client.post("/v1/chat/completions", json={"model": "x", "messages": []})
        assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "model_not_found"
        metrics = client.get("/metrics").text
    for label in ("bad_body", "bad_field", "too_many_messages"):
        assert f'tokometer_gateway_rejected_total{{reason="{label}"}} 1.0' in metrics
    assert "model_not_found" not in metrics  # a model not served here is answered, not counted as refused


def test_openai_tool_call_bytes_are_recognised_without_a_parse() -> None:
    delta = b'data: {"choices":[{"delta":{"tool_calls":[{"index":0}]}}]}\n\n'
    legacy = b'data: {"choices":[{"delta":{"function_call":{"name":"f"}}}]}\n\n'
    text = b'data: {"choices":[{"delta":{"content":"no tool_calls here"}}]}\n\n'
    assert carries_tool_calls(delta) and carries_call(delta)
    assert not carries_tool_calls(legacy) and carries_call(legacy)
    assert not carries_tool_calls(text) and not carries_call(text)
    # a byte test says "may carry" (a text that is the very word matches): the relay asks it only of events
    # the parser found no text in, or found tool calls in
    assert carries_tool_calls(b'data: {"choices":[{"delta":{"content":"tool_calls"}}]}\n\n')
