"""``tokometer report`` as a user sees it: real runs of ``tokometer bench`` against ``tokometer sim`` (with the
simulator's ``/metrics`` and a DCGM exporter's text served on loopback for the GPU block), written as HTML,
then opened in a real Chromium with the network off. The page must load without a single request leaving
the file, draw without errors, not be blank, and plot exactly the stored run's numbers.

Chromium is Debian's (``/usr/bin/chromium``, driven by Playwright for Python; ``playwright install`` is never
run). Without it the browser tests skip, or fail when ``TOKOMETER_REQUIRE_CHROMIUM=1`` (``make test``)."""

from __future__ import annotations

import io
import json
import os
import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import bench_stored, run_cli, run_cli_here, start_sim
from tests.integration.test_observe_dcgm import _Exporter, _Handler, exporter_text
from tokometer.metrics.knee import knee, summary_power
from tokometer.store import ResultStore, StoredRun

pytestmark = pytest.mark.slow  # module setup 50 s, two headless browsers: 150 s in the parallel lane

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


def require_chromium() -> str:
    """Debian's Chromium and Playwright for Python; a skip, or a failure under TOKOMETER_REQUIRE_CHROMIUM=1."""
    missing = None
    path = CHROMIUM if os.access(CHROMIUM, os.X_OK) else shutil.which("chromium")
    if path is None:
        missing = "chromium is required here but missing: apt-get install chromium"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            missing = "playwright is required here but missing: pip install -e '.[dev]'"
    if missing:
        if os.environ.get("TOKOMETER_REQUIRE_CHROMIUM") == "1":
            pytest.fail(missing)
        pytest.skip(missing)
    assert path is not None
    return path


@dataclass
class Page:
    """What the browser saw of a report: the charts' traces, the embedded JSON, a screenshot, and trouble."""

    traces: dict[str, list[dict[str, Any]]]
    data: dict[str, Any]
    png: bytes
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)


def open_offline(report: Path, screenshot: Path | None = None, width: int = 1280) -> Page:
    """Open ``report`` in headless Chromium, offline, every request that is not the file itself aborted
    and recorded; return each chart's ``.data`` (by element id), the page's JSON and a full-page PNG."""
    from playwright.sync_api import sync_playwright

    chromium = require_chromium()
    errors: list[str] = []
    attempted: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(offline=True, viewport={"width": width, "height": 900})

            def route(r: Any) -> None:
                if r.request.url.startswith("file://"):
                    r.continue_()
                else:
                    attempted.append(r.request.url)
                    r.abort()

            context.route("**/*", route)
            page = context.new_page()
            page.on("console", lambda m: errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
            page.on("requestfailed", lambda r: None if r.url.startswith("file://") else attempted.append(r.url))
            page.goto(report.resolve().as_uri(), wait_until="load")
            page.wait_for_function("() => [...document.querySelectorAll('.plotly-graph-div')]"
                                   ".every(d => d.data && d._fullLayout)", timeout=30_000)
            traces = page.evaluate("""() => Object.fromEntries([...document.querySelectorAll('.plotly-graph-div')]
                .map(d => [d.id, d.data.map(t => ({name: t.name, type: t.type, x: t.x ? Array.from(t.x) : null,
                    y: t.y ? Array.from(t.y) : null, customdata: t.customdata || null, meta: t.meta || null}))]))""")
            data = json.loads(page.evaluate("() => document.getElementById('tokometer-data').textContent"))
            png = page.screenshot(full_page=True, path=str(screenshot) if screenshot else None)
        finally:
            browser.close()
    return Page(traces, data, png, errors, sorted(set(attempted)))


def assert_not_blank(png: bytes) -> None:
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    pixels = np.asarray(image, dtype=np.uint8).reshape(-1, 3)
    # each pixel as one 24-bit number: the distinct colours are the distinct numbers (np.unique by rows sorts
    # the page's millions of pixels as records, 20 s of CPU; as integers, a fraction of a second)
    rgb = (pixels[:, 0].astype(np.uint32) << 16) | (pixels[:, 1].astype(np.uint32) << 8) | pixels[:, 2]
    colours = len(np.unique(rgb))
    not_white = float(np.mean(np.any(pixels < 245, axis=1)))
    assert image.width >= 1000 and image.height >= 2000, image.size
    assert colours > 200, f"only {colours} distinct colours: the page looks blank"
    assert not_white > 0.02, f"only {not_white:.1%} of the pixels are not white"


@pytest.fixture(scope="module")
def exporter() -> Iterator[str]:
    """A DCGM exporter's ``/metrics`` (two H100s) on loopback: what a GPU server's telemetry looks like."""
    server = _Exporter(("127.0.0.1", 0), _Handler)
    server.body, server.status = exporter_text().encode(), 200
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _bench(url: str, store: Path, *extra: str) -> int:
    return bench_stored(store, "--url", url, "-c", "1,4,8", "-n", "16", "--input-tokens", "32", "--output-tokens",
                        "24", "--seed", "1", "--scrape-interval", "100ms", *extra)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, exporter: str) -> tuple[Path, list[int]]:
    """Two runs: one against a simulated deployment (continuous batching: a real knee) with GPU telemetry,
    one against a scripted simulator, tagged ``baseline:scripted``."""
    path = tmp_path_factory.mktemp("report") / "runs.db"
    modelled = start_sim("--hardware", "H100-SXM", "--model", "llama-3.1-8b")
    scripted = start_sim("--ttft-ms", "15", "--itl-ms", "4")
    try:
        ids = [_bench(modelled.openai_url, path, "--gpu-metrics", exporter),
               _bench(scripted.openai_url, path, "--gpu-metrics", "off")]
    finally:
        modelled.stop()
        scripted.stop()
    tagged = run_cli_here("runs", "--tag", "scripted", "--id", str(ids[1]), "--store", str(path))
    assert tagged.returncode == 0, tagged.stderr
    return path, ids


def _stored(path: Path, run_id: int) -> StoredRun:
    results = ResultStore(f"sqlite:///{path}", read_only=True)
    try:
        run = results.run(run_id)
        assert run is not None
        return run
    finally:
        results.close()


def test_one_run_offline_in_a_browser_plots_the_stored_numbers(store: tuple[Path, list[int]],
                                                               tmp_path: Path) -> None:
    path, (run_id, _) = store
    out = tmp_path / "out" / "report.html"
    done = run_cli_here("report", str(run_id), "--store", str(path), "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"wrote {out} (") and "1 run, 3 steps" in done.stdout
    html = out.read_text("utf-8")
    # nothing to load from elsewhere (plotly.js itself names URLs, e.g. map tiles, that these charts never use)
    assert "<script src=" not in html and "<link " not in html and 'src="http' not in html
    page = open_offline(out, tmp_path / "report.png")
    assert page.requests == [], f"the page tried the network: {page.requests}"
    assert page.errors == []
    assert_not_blank(page.png)

    run = _stored(path, run_id)
    summaries = [s.summary for s in run.steps]
    assert all(summaries)
    labels = [s.load.short() for s in run.steps if s.load]
    assert labels == ["c=1", "c=4", "c=8"]
    throughput = [s.output_throughput_tok_s for s in summaries if s]
    decode = [s.decode_speed_tok_s.p50 for s in summaries if s]
    ttft_p50 = [s.ttft_ms.p50 for s in summaries if s]

    # the rate-vs-throughput chart, as Plotly holds it in the page
    rate = page.traces["chart-rate-throughput"]
    steps = next(t for t in rate if (t["meta"] or {}).get("kind") == "steps")
    assert steps["x"] == throughput and steps["y"] == decode
    assert [c[1] for c in steps["customdata"]] == ttft_p50
    at = knee([summary_power(s) for s in summaries])
    assert at is not None
    star = next(t for t in rate if (t["meta"] or {}).get("kind") == "knee")
    assert star["x"] == [throughput[at]] and star["y"] == [decode[at]]

    # the embedded JSON: each step as the store and bench --json write it, its summary whole
    (data,) = page.data["runs"]
    assert page.data["schema"] == "tokometer.report/2" and data["id"] == run_id and data["knee"] == at
    assert [s["summary"] for s in data["steps"]] == [s.to_json() for s in summaries if s]
    assert [{k: s[k] for k in ("step", "load", "started_at", "health")} for s in data["steps"]] == \
        [{k: s.to_json()[k] for k in ("step", "load", "started_at", "health")} for s in run.steps]
    assert [s["label"] for s in data["steps"]] == labels

    # CDFs: one line per step, its samples those behind the stored percentiles
    ttft = page.traces["chart-ttft-cdf"]
    assert [t["name"] for t in ttft] == labels
    for trace, summary in zip(ttft, summaries, strict=True):
        assert summary is not None
        assert len(trace["x"]) == summary.ttft_ms.count
        assert float(np.percentile(trace["x"], 50)) == pytest.approx(summary.ttft_ms.p50, abs=1e-3)
    tpot = page.traces["chart-tpot-cdf"]
    assert [len(t["x"]) for t in tpot] == [s.tpot_ms.count for s in summaries if s]

    # the timeline: every measured request once
    measured = sum(s.requests_completed + s.requests_failed for s in summaries if s)
    timeline = page.traces[f"chart-timeline-run-{run_id}"]
    ends = [t for t in timeline if (t["meta"] or {}).get("phase") in ("decode", "failed")]
    assert sum(len(t["y"]) for t in ends) == measured == data["timeline"]["requests"] == 48

    # the server's /metrics and the GPUs (the exporter's two H100s), per step
    server = page.traces["chart-server"]
    running = next(t for t in server if (t["meta"] or {}).get("name") == "requests_running")
    assert running["y"] == [s.server["gauges"]["requests_running"]["mean"] if s.server else None for s in run.steps]
    gpus = page.traces["chart-gpu"]
    assert {t["meta"]["gpu"] for t in gpus} == {0, 1}
    power = next(t for t in gpus if t["meta"] == {"run": run_id, "gpu": 0, "name": "power_mean_w"})
    assert power["y"] == [next(g["power_mean_w"] for g in s.gpu if g["index"] == 0) for s in run.steps]

    # no roofline for a run of unknown model and hardware, and the page says why
    assert "chart-efficiency" not in page.traces
    assert data["efficiency"] is None and "not known" in data["efficiency_note"]
    assert "the model and hardware of run" in html


def test_several_runs_overlaid(store: tuple[Path, list[int]], tmp_path: Path) -> None:
    path, ids = store
    out = tmp_path / "both.html"
    done = run_cli_here("report", str(ids[0]), "baseline:scripted", "--store", str(path), "-o", str(out),
                   "--title", "modelled vs scripted")
    assert done.returncode == 0, done.stderr
    page = open_offline(out)
    assert page.requests == [] and page.errors == []
    assert page.data["title"] == "modelled vs scripted"
    assert [r["id"] for r in page.data["runs"]] == ids
    lines = [t for t in page.traces["chart-rate-throughput"] if (t["meta"] or {}).get("kind") == "steps"]
    assert [t["meta"]["run"] for t in lines] == ids
    for trace, run_id in zip(lines, ids, strict=True):
        run = _stored(path, run_id)
        assert trace["x"] == [s.summary.output_throughput_tok_s for s in run.steps if s.summary]
    assert len(page.traces["chart-ttft-cdf"]) == 6  # 3 steps × 2 runs
    assert {f"chart-timeline-run-{i}" for i in ids} <= set(page.traces)
    assert {t["meta"]["run"] for t in page.traces["chart-gpu"]} == {ids[0]}  # only the first read GPUs


def test_markdown_summary(store: tuple[Path, list[int]], tmp_path: Path) -> None:
    path, (run_id, other) = store
    done = run_cli_here("report", str(run_id), "--store", str(path), "--format", "md")
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert text.startswith(f"## tokometer report: run {run_id}\n")
    assert "| load | ok | failed | TTFT p50 ms |" in text
    run = _stored(path, run_id)
    for step in run.steps:
        assert step.summary is not None and step.load is not None
        assert f"| {step.load.short()}" in text
        assert f"{step.summary.output_throughput_tok_s:,.1f}" in text
    assert text.count(" (knee) |") == 1 and "Knee (most throughput × per-request speed)" in text
    written = tmp_path / "summary.md"
    assert run_cli_here("report", str(run_id), str(other), "--store", str(path), "--format", "md", "-o",
                   str(written)).returncode == 0
    assert written.read_text("utf-8").count("\n### run ") == 2


def test_without_plotly_html_says_how_to_install_it_and_markdown_still_works(store: tuple[Path, list[int]],
                                                                            tmp_path: Path) -> None:
    path, (run_id, _) = store
    hidden = tmp_path / "no-plotly"
    (hidden / "plotly").mkdir(parents=True)
    (hidden / "plotly" / "__init__.py").write_text("raise ImportError('plotly is not installed')\n")
    env = {"PYTHONPATH": f"{hidden}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = run_cli("report", str(run_id), "--store", str(path), "-o", str(tmp_path / "x.html"), env=env)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "pip install 'tokometer[report]'" in done.stderr
    assert not (tmp_path / "x.html").exists()
    md = run_cli("report", str(run_id), "--store", str(path), "--format", "md", env=env)
    assert md.returncode == 0, md.stderr
    assert "| load |" in md.stdout


def test_bad_input_is_one_line_and_exit_2(store: tuple[Path, list[int]], tmp_path: Path) -> None:
    path, (run_id, _) = store
    out = str(tmp_path / "r.html")
    for args, message in [
        (("999", "-o", out), f"no run 999 in {path}"),
        ((str(run_id), "999", "--format", "md"), f"no run 999 in {path}"),
        (("baseline:nope", "-o", out), "no baseline named 'nope'"),
        (("three", "-o", out), "'three' is not a run"),
        ((str(run_id), "-o", str(tmp_path)), "is a directory"),
        ((str(run_id),), "-o/--output is required for an HTML report"),
    ]:
        done = run_cli_here("report", *args, "--store", str(path))
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert done.stderr.startswith("tokometer: error: ") and done.stderr.count("\n") == 1, done.stderr
        assert message in done.stderr, done.stderr
    assert not Path(out).exists()
