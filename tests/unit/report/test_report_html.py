"""The report's page and summary on hand-made runs: what a real run rarely has (a step that never finished,
text that would end a script element, a number that is not finite) must not break the page."""

from __future__ import annotations

import json
import math

import pytest

import tokometer.perf.questions as app
from tokometer.bundled import bundled_model_path
from tokometer.load.profiles import LoadStep
from tokometer.perf.hardwarespec import ComputePeak, HardwareSpec
from tokometer.records import RequestRecord, ServerTiming
from tokometer.report.data import report_data
from tokometer.report.html import DATA_ID, embed_json, render_html
from tokometer.report.markdown import render_markdown
from tokometer.runs.stored_spec import StoredSpec
from tokometer.store import EngineIdentity, StoredRun, StoredStep

MS = 1_000_000


def _run() -> StoredRun:
    return StoredRun.from_json({
        "id": 7, "status": "interrupted", "started_at": "2026-01-01T00:00:00+00:00", "finished_at": None,
        "target": "http://127.0.0.1:9/v1", "api": "openai-chat", "model": "m</script><b>", "label": "x & y",
        "spec": {}, "engine": None, "host": None,
        "steps": [{"step": 0, "load": {"concurrency": 2}, "started_at": "2026-01-01T00:00:01+00:00",
                   "summary": None, "interrupted": True}]})


def test_embedded_json_cannot_end_its_script_element() -> None:
    text = embed_json({"a": "</script><script>alert(1)</script>", "b": math.nan, "c": [math.inf, 1.5]})
    assert "<" not in text and ">" not in text
    assert json.loads(text) == {"a": "</script><script>alert(1)</script>", "b": None, "c": [None, 1.5]}


def test_a_run_whose_only_step_never_finished() -> None:
    data = report_data([(_run(), [])])
    (run,) = data["runs"]
    assert run["knee"] is None and run["annotations"] == [] and run["timeline"]["requests"] == 0
    assert run["steps"][0]["label"] == "c=2" and run["name"] == "run 7 (x & y)"
    assert "run 7 (x & y): no step finished." in render_markdown(data)
    page = render_html(data)
    assert "m</script><b>" not in page and "m&lt;/script&gt;&lt;b&gt;" in page
    start = page.index(f'id="{DATA_ID}">') + len(f'id="{DATA_ID}">')
    assert json.loads(page[start:page.index("</script>", start)]) == json.loads(embed_json(data))


def test_an_efficiency_above_100_percent_is_shown_as_a_wrong_peak(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run of the embedded engine (its GGUF on this host) judged against a host whose peaks (1 GB/s, 1 GOP/s
    int8) are far below what the records show (100 prompt tokens in 80 ms, a token every 10 ms): the chart
    gets no point above 100 % and the page says the peak is wrong."""
    slow = HardwareSpec(name="host", kind="cpu", memory_gb=16, bandwidth_gbs=1, bf16_tflops=0.001,
                        peaks=(ComputePeak("int8", 1e9, "measured", "made up"),))
    monkeypatch.setattr(app, "resolve_hardware", lambda name, hardware_file=None: slow)  # "host" would measure
    engine = EngineIdentity.from_json({"engine": "llama.cpp", "model_file": str(bundled_model_path()), "argv": []})
    run = StoredRun(id=7, status="completed", started_at="t", finished_at="t", target="http://x/v1",
                    api="openai-chat", model="m", label=None, spec=StoredSpec(), engine=engine, host=None,
                    steps=(StoredStep(0, LoadStep("concurrency", 1), "t"),))
    records = []
    for i in range(3):
        sent = i * 500 * MS
        first, last = sent + 100 * MS, sent + 200 * MS
        records.append(RequestRecord(
            index=i, step=0, sent_ns=sent, first_token_ns=first, last_token_ns=last, end_ns=last + MS,
            event_ns=[first + k * 10 * MS for k in range(11)], event_tokens=[1.0] * 11, input_tokens=100,
            output_tokens=11, status=200, finish_reason="length",
            server=ServerTiming(prompt_tokens=100, prompt_ms=80, decode_tokens=10, decode_ms=100)))
    data = report_data([(run, records)])
    (step,) = data["runs"][0]["efficiency"]["steps"]
    assert step["mbu"] is None and step["prefill_mfu"] is None
    assert "above 100 %: the host peak used (int8, measured 1 GOP/s) is too low" in step["over_peak"]["prefill_mfu"][
        "message"]
    page = render_html(data)
    assert "left out of the chart: not an efficiency" in page and "the host peak used (int8, measured 1 GOP/s)" in page
