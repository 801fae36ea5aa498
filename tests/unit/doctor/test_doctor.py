"""The pure logic of ``tokometer doctor``: each rule on hand-made figures, the report, the no-GPU path."""

from __future__ import annotations

import difflib
from typing import Any

import pytest

from tokometer.doctor import DoctorReport, DoctorSpec, Finding, Skipped
from tokometer.doctor.auth import key_shown
from tokometer.doctor.context import Fit, count_mismatch, fit_of
from tokometer.doctor.host import GpuLink, SwapCounters, gpu_findings, ram_finding, swap_finding
from tokometer.doctor.reach import CLOSE_COMPARED, CLOSE_NAME_CHARS, close_matches, date_skew_s, model_names
from tokometer.doctor.render import evidence_text
from tokometer.doctor.server import server_findings
from tokometer.doctor.session import Exchange, Session
from tokometer.doctor.speed import LOAD, Load, bottleneck, interfered, saturated
from tokometer.doctor.streaming import stream_shape
from tokometer.observe.snapshot import GpuSample
from tokometer.records import ErrorCategory, RequestRecord

MS = 1_000_000


def test_a_stream_that_arrives_at_once_is_buffered() -> None:
    shape = stream_shape(0, [500 * MS] * 30, 501 * MS)
    assert shape.buffered and not shape.bursty and shape.bursts == 1
    steady = stream_shape(0, [100 * MS + k * 10 * MS for k in range(30)], 400 * MS)
    assert not steady.buffered and not steady.bursty and steady.bursts == 30


def test_a_stream_flushed_in_blocks_is_bursty() -> None:
    stamps = [block * 200 * MS + k * 10_000 for block in range(1, 5) for k in range(8)]  # 4 blocks of 8 events
    shape = stream_shape(0, stamps, 900 * MS)
    assert shape.bursty and shape.bursts == 4 and shape.same_read_share > 0.8
    assert not stream_shape(0, stamps[:6], 900 * MS).bursty  # too few events to judge


def test_interference_needs_no_gain_and_slower_requests() -> None:
    idle = Load(ttft_ms=100, decode_tok_s=50, output_tok_s=40)
    batched = Load(ttft_ms=150, decode_tok_s=40, output_tok_s=130)
    serial = Load(ttft_ms=700, decode_tok_s=12, output_tok_s=41)
    assert not interfered(idle, batched) and interfered(idle, serial)
    assert bottleneck(idle, serial).startswith("scheduling")
    assert bottleneck(idle, batched).startswith("none")
    assert bottleneck(idle, Load(400, 45, 120)).startswith("prefill")
    assert bottleneck(idle, Load(120, 20, 70)).startswith("decode")
    assert not interfered(idle, Load(110, 0.0, 42))  # unknown decode speed (all at once) alone is not slower


def test_interference_with_every_request_running_and_the_throughput_held_is_saturation() -> None:
    idle = Load(ttft_ms=733, decode_tok_s=14, output_tok_s=12.6)
    held = Load(ttft_ms=5239, decode_tok_s=4, output_tok_s=12.3)  # a 2-core VM's llama.cpp with 4 slots, in CI
    assert interfered(idle, held)
    assert saturated(idle, held, running_max=LOAD)
    assert not saturated(idle, held, running_max=1)  # one ran, three queued: too few slots, not the hardware
    assert not saturated(idle, held, running_max=None)  # no /metrics: cannot tell, so interference stands
    assert not saturated(idle, Load(5239, 2, 7.0), running_max=LOAD)  # all ran and lost throughput: thrashing


def _exchange(error: ErrorCategory | None = None, status: int = 200, counted: int | None = None) -> Exchange:
    record = RequestRecord(index=0, status=status, error=error)
    if counted is not None:
        record.input_tokens, record.input_tokens_source = counted, "usage"
    return Exchange(record)


def test_a_probe_is_taken_refused_cut_or_failed() -> None:
    assert fit_of(_exchange(counted=1000), 1000) == Fit("fits", 1000)
    assert fit_of(_exchange(counted=2044), 2080) == Fit("truncated", 2044)
    assert fit_of(_exchange("http_400_context_length", 400), 2080).outcome == "refused"
    assert fit_of(_exchange("http_5xx", 500), 2080).outcome == "failed"
    assert fit_of(_exchange(), 10).outcome == "fits"  # no usage: nothing says it was cut


def test_prompt_counts_may_differ_by_two_tokens_or_two_percent() -> None:
    assert not count_mismatch(22, 22) and not count_mismatch(24, 22) and count_mismatch(25, 22)
    assert not count_mismatch(1010, 1000) and count_mismatch(1030, 1000)


def test_the_closest_served_names_come_first() -> None:
    served = ["llama-3.1-70b", "qwen2.5-7b-instruct", "llama-3.1-8b-instruct", "mistral-7b"]
    assert close_matches("llama-3.1-8b", served)[0] == "llama-3.1-8b-instruct"
    assert set(close_matches("zzz", served)) == set(served)  # nothing close: all of them (at most 5)
    assert model_names("openai-chat", {"data": [{"id": "a"}, {"id": "b"}]}) == ["a", "b"]
    assert model_names("ollama", {"models": [{"name": "llama3.2:1b"}]}) == ["llama3.2:1b"]
    assert model_names("openai-chat", {"error": "nope"}) is None


def test_close_names_are_ranked_among_a_bounded_number_of_names(monkeypatch: pytest.MonkeyPatch) -> None:
    compared: list[int] = []
    rank = difflib.get_close_matches

    def counted(word: str, possibilities: list[str], **options: Any) -> list[str]:
        compared.append(len(possibilities))
        return rank(word, possibilities, **options)

    monkeypatch.setattr(difflib, "get_close_matches", counted)
    long = "llama-" + "x" * CLOSE_NAME_CHARS
    served = [long, *(f"lam-{i:06d}" for i in range(3 * CLOSE_COMPARED)), "llama-3.1-8b-q4"]
    assert close_matches("llama-3.1-8b", served)[0] == "llama-3.1-8b-q4"  # an extension: looked for in them all
    assert compared == [CLOSE_COMPARED]  # the first ones, the long name left out
    assert close_matches("llama", [long]) == [long]  # the names shown when none is compared


def test_clock_skew_from_the_date_header() -> None:
    now = 1_700_000_000.0
    assert date_skew_s("Tue, 14 Nov 2023 22:15:20 GMT", now) == 120.0  # two minutes ahead
    assert date_skew_s("not a date", now) is None


def test_the_key_is_never_shown() -> None:
    assert key_shown(None).startswith("none")
    assert key_shown("sk-abcdefghijklmnop") == "Authorization: Bearer sk-… (19 characters)"
    assert key_shown("short") == "Authorization: Bearer … (5 characters)"
    assert key_shown("sk-ant-abcdefghijklmnop", "anthropic-messages") == "x-api-key: sk-… (23 characters)"


def _window(waiting: float = 0, kv: float = 0.2, preemptions: float = 0) -> dict[str, object]:
    return {"source": "vllm", "gauges": {"requests_waiting": {"mean": waiting / 2, "max": waiting},
                                         "requests_running": {"mean": 2, "max": 4},
                                         "kv_cache_usage": {"mean": kv / 2, "max": kv}},
            "counters": {"preemptions": preemptions}}


def test_server_metrics_findings() -> None:
    assert [f.id for f in server_findings(_window(), "load")] == ["server.ok"]
    found = {f.id: f.severity for f in server_findings(_window(waiting=3, kv=0.97, preemptions=5), "load")}
    assert found == {"server.queue": "warning", "server.kv_cache_full": "warning", "server.preemptions": "warning"}
    assert [f.id for f in server_findings({"source": "llamacpp", "gauges": {}, "counters": {}}, "x")] == ["server.ok"]


def test_ram_against_the_model_and_swap_activity() -> None:
    gib = 2**30
    assert ram_finding(24 * gib, gib // 4, "m.gguf").id == "host.ram"
    low = ram_finding(16 * gib, 10 * gib, "m.gguf")
    assert (low.id, low.severity) == ("host.ram_low", "warning") and low.evidence["ratio"] == 1.6
    assert swap_finding(SwapCounters(100, 100), SwapCounters(100, 100), 10) is None
    swapped = swap_finding(SwapCounters(0, 0), SwapCounters(2**20, 0), 10)
    assert swapped is not None and swapped.id == "host.swapping"


def test_gpu_findings_from_stand_in_readings() -> None:
    """No GPU here: the rules are checked on GpuSample values such as NVML gives."""
    healthy = GpuSample(at_ns=0, index=0, name="H100", utilization=0.9, memory_used_bytes=60 * 2**30,
                        memory_total_bytes=80 * 2**30, power_w=400, power_limit_w=700, temperature_c=60,
                        pcie_generation=5, pcie_width=16)
    assert [f.id for f in gpu_findings([healthy], [GpuLink(5, 16)])] == ["host.gpu"]
    capped = GpuSample(at_ns=0, index=1, power_w=698, power_limit_w=700, throttle=("power cap", "thermal"),
                       pcie_generation=3, pcie_width=8)
    found = [f.id for f in gpu_findings([capped], [GpuLink(5, 16)])]
    assert found == ["host.gpu_power_cap", "host.gpu_thermal", "host.gpu_pcie"]
    assert [f.id for f in gpu_findings([capped], [GpuLink(None, None)])][-1] == "host.gpu_thermal"


def test_without_a_gpu_the_host_check_says_so_once() -> None:
    from tokometer.doctor import host

    session = Session(DoctorSpec(url="http://127.0.0.1:1/v1"))
    host._gpus(session)  # this machine has no NVIDIA GPU (nor, usually, NVML)
    assert [(f.id, f.severity) for f in session.findings] == [("host.no_gpu", "info")]


def test_the_report_exit_status_summary_and_json() -> None:
    report = DoctorReport(url="http://x/v1", api="openai-chat", model="m", quick=False, elapsed_s=2.0)
    assert report.exit_status == 0 and report.worst is None
    report.findings.append(Finding("reach.ok", "info", "answers", {"dns_ms": 0.5}))
    assert report.exit_status == 0 and report.summary().startswith("healthy: 0 errors, 0 warnings, 1 info")
    report.findings.append(Finding("streaming.buffered", "warning", "did not stream", {"events": 30}, "fix it"))
    report.skipped.append(Skipped("host", "remote"))
    assert report.exit_status == 1 and report.worst == "warning"
    assert report.summary().startswith("degraded: 0 errors, 1 warning, 1 info; 1 skipped")
    data = report.to_json()
    assert data["schema"] == "tokometer.doctor/1" and data["counts"] == {"error": 0, "warning": 1, "info": 1}
    assert data["findings"][1] == {"id": "streaming.buffered", "check": "streaming", "severity": "warning",
                                   "title": "did not stream", "evidence": {"events": 30}, "fix": "fix it"}
    assert [c for c, _ in report.by_check()] == ["reach", "streaming"]
    report.findings.append(Finding("auth.missing_key", "error", "401"))
    assert report.summary().startswith("failing: 1 error")


def test_evidence_reads_as_one_line() -> None:
    text = evidence_text({"a": 1.23456, "b": None, "c": [1, 2], "d": {"x": 2500.0}, "e": "y" * 300})
    assert text.startswith("a=1.235; c=[1, 2]; d={x 2,500}; e=yyy") and text.endswith("y… (300 characters)")


def test_a_bad_spec_is_refused() -> None:
    import pytest
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="http://"):
        DoctorSpec(url="ftp://x")
    with pytest.raises(ValidationError, match="unknown API"):
        DoctorSpec(url="http://x", api="nope")
    assert DoctorSpec(url="http://h:11434").protocol == "ollama"


def test_the_public_surface_is_pinned() -> None:
    import tokometer.doctor as doctor

    assert sorted(doctor.__all__) == ["CHECKS", "DoctorReport", "DoctorSpec", "Finding", "SEVERITIES", "Severity",
                                      "Skipped", "run_doctor"]
    assert doctor.CHECKS == ("reach", "auth", "context", "streaming", "speed", "server", "host")
