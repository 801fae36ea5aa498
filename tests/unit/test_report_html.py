"""The report's page and summary on hand-made runs: what a real run rarely has (a step that never finished,
text that would end a script element, a number that is not finite) must not break the page."""

from __future__ import annotations

import json
import math

from tokometer.report.data import report_data
from tokometer.report.html import DATA_ID, embed_json, render_html
from tokometer.report.markdown import render_markdown
from tokometer.store import StoredRun


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
