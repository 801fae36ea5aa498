"""tokometer doctor behind a proxy that holds the stream back, and against a server without a context limit
(issue 26).

The proxy is `tests.block_proxy.BlockProxy`, a raw-socket reverse proxy written for these tests: it passes an
event stream on in 4 KiB blocks (as nginx's proxy_buffering does), or whole at its end. The truth is the
simulator's own pace: ``--itl-ms 20`` is 50 tok/s per request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from tests.block_proxy import block_proxy
from tests.conftest import SimServer
from tokometer.doctor import DoctorReport, DoctorSpec, run_doctor

TRUTH_TOK_S = 50.0


def _doctor(url: str, **values: object) -> DoctorReport:
    return asyncio.run(run_doctor(DoctorSpec(url=url, **values)))


def _finding(report: DoctorReport, finding_id: str) -> dict[str, Any]:
    found = [f.to_json() for f in report.findings if f.id == finding_id]
    assert found, f"no {finding_id} in {[f.id for f in report.findings]}"
    return found[0]


@pytest.mark.timing  # blocks, or the client's own stalls: told apart by times, as the test below
def test_behind_a_proxy_passing_4_kib_blocks_the_decode_speed_is_read_from_the_blocks(
        sim_factory: Callable[..., SimServer]) -> None:
    sim = sim_factory("--ttft-ms", "100", "--itl-ms", "20")
    with block_proxy(sim.root, 4096) as proxy:
        report = _doctor(proxy.url + "/v1")
    assert _finding(report, "streaming.bursty")["severity"] == "warning"
    summary = _finding(report, "speed.summary")
    assert summary["severity"] == "warning" and "from the blocks' arrival" in str(summary["title"])
    idle = summary["evidence"]["idle"]
    # the per-event figure counts a block's ~20 tokens as made at once: far above the truth (it read 1,130)
    assert idle["per_event_decode_tok_s_p50"] > 3 * TRUTH_TOK_S
    assert 0.8 * TRUTH_TOK_S <= idle["decode_tok_s_per_request_p50"] <= 1.25 * TRUTH_TOK_S


@pytest.mark.timing  # buffered or a stalled client: told apart by times, lost beside the other lanes (2026-12-07)
def test_behind_a_proxy_buffering_whole_answers_there_is_no_decode_speed(
        sim_factory: Callable[..., SimServer]) -> None:
    sim = sim_factory("--ttft-ms", "100", "--itl-ms", "20")
    with block_proxy(sim.root, None) as proxy:
        report = _doctor(proxy.url + "/v1")
        quick = _doctor(proxy.url + "/v1", quick=True)
    assert _finding(report, "streaming.buffered")["severity"] == "warning"
    summary = _finding(report, "speed.summary")
    assert summary["severity"] == "warning" and str(summary["title"]).startswith("no decode speed")
    assert "0.0 tok/s" not in str(summary["title"])
    assert summary["evidence"]["idle"]["decode_tok_s_per_request_p50"] is None
    assert summary["evidence"]["4_at_once"]["output_tok_s_total"] > 0  # the aggregate stands
    short = _finding(quick, "speed.summary")
    assert short["severity"] == "warning" and "no decode speed" in str(short["title"])


def test_a_probe_that_reaches_its_ceiling_finds_no_limit_not_a_window(sim_factory: Callable[..., SimServer]) -> None:
    """A server with a window far past the probe's ceiling (10^8 tokens) that advertises none for the model
    asked (a name it does not list): every probe up to 131,072 tokens is taken whole."""
    sim = sim_factory("--max-context", "16777216", "--ttft-ms", "5", "--itl-ms", "1",
                      "--max-body-bytes", "16000000")
    report = _doctor(sim.openai_url, model="not-listed")
    assert "context.window" not in {f.id for f in report.findings}
    found = _finding(report, "context.no_limit_found")
    assert found["title"].startswith("no context limit found up to 131,072 prompt tokens")
    assert found["evidence"]["context_tokens"] is None
