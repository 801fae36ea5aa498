"""Speculative decoding read from each engine's /metrics text (as its source writes it) and summarised over a window."""

from __future__ import annotations

import pytest

from tokometer.observe.prometheus import parse
from tokometer.observe.server_window import server_window
from tokometer.observe.speculative import spec_window
from tokometer.report.speculative import spec_line

# vLLM V1 (vllm/v1/spec_decode/metrics.py, SpecDecodingProm): labels model_name and engine, per-position
# counters with a label "position"; two data-parallel engines.
_VLLM = """\
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{engine="0",model_name="m"}} 0.1
# TYPE vllm:spec_decode_num_drafts counter
vllm:spec_decode_num_drafts_total{{engine="0",model_name="m"}} {d0}
vllm:spec_decode_num_drafts_total{{engine="1",model_name="m"}} {d1}
# TYPE vllm:spec_decode_num_draft_tokens counter
vllm:spec_decode_num_draft_tokens_total{{engine="0",model_name="m"}} {t0}
vllm:spec_decode_num_draft_tokens_total{{engine="1",model_name="m"}} {t1}
# TYPE vllm:spec_decode_num_accepted_tokens counter
vllm:spec_decode_num_accepted_tokens_total{{engine="0",model_name="m"}} {a0}
vllm:spec_decode_num_accepted_tokens_total{{engine="1",model_name="m"}} {a1}
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="m",position="0"}} {p0}
vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="m",position="1"}} {p1}
vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="1",model_name="m",position="0"}} 0
vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="1",model_name="m",position="1"}} 0
"""

# SGLang (python/sglang/srt/metrics/collector.py): gauges per tp/dp rank, over its last logging interval.
_SGLANG = """\
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{{model_name="m",tp_rank="0",dp_rank="0"}} 4
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{{model_name="m",tp_rank="0",dp_rank="0"}} {l0}
sglang:spec_accept_length{{model_name="m",tp_rank="0",dp_rank="1"}} {l1}
# TYPE sglang:spec_accept_rate gauge
sglang:spec_accept_rate{{model_name="m",tp_rank="0",dp_rank="0"}} {r0}
sglang:spec_accept_rate{{model_name="m",tp_rank="0",dp_rank="1"}} {r1}
"""


def _vllm(d0: int, t0: int, a0: int, p0: int, p1: int, d1: int = 0, t1: int = 0, a1: int = 0) -> str:
    return _VLLM.format(d0=d0, t0=t0, a0=a0, p0=p0, p1=p1, d1=d1, t1=t1, a1=a1)


def test_vllm_counters_over_a_window_give_rate_length_and_positions() -> None:
    before = parse(_vllm(d0=100, t0=200, a0=120, p0=70, p1=50, d1=10, t1=20, a1=5), at_ns=0)
    after = parse(_vllm(d0=300, t0=600, a0=420, p0=230, p1=190, d1=30, t1=60, a1=15), at_ns=10**9)
    assert before.counters["spec_accepted_at_0"] == 70 and before.counters["spec_drafts"] == 110
    window = server_window([before, after])
    spec = window.speculative
    assert spec is not None and spec.source == "counters"
    assert spec.drafts == 220 and spec.draft_tokens == 440 and spec.accepted_tokens == 310
    assert spec.acceptance_rate == pytest.approx(310 / 440)
    assert spec.acceptance_length == pytest.approx(1 + 310 / 220)
    assert spec.per_position == pytest.approx([160 / 220, 140 / 220])
    assert window.to_json()["speculative"]["acceptance_length"] == pytest.approx(1 + 310 / 220)
    line = spec_line(window.to_json()["speculative"])
    assert line is not None and "acceptance 70% of 440 drafted tokens" in line and "2.41 tokens per step" in line


def test_a_window_without_drafts_has_no_speculative_block() -> None:
    same = parse(_vllm(d0=5, t0=10, a0=3, p0=2, p1=1), at_ns=0)
    assert server_window([same, same]).speculative is None
    assert spec_line(None) is None


def test_a_counter_reset_inside_the_window_counts_the_later_value() -> None:
    first = parse(_vllm(d0=1000, t0=2000, a0=1000, p0=600, p1=400), at_ns=0)
    restarted = parse(_vllm(d0=10, t0=20, a0=4, p0=3, p1=1), at_ns=10**9)
    spec = server_window([first, restarted]).speculative
    assert spec is not None and spec.acceptance_rate == pytest.approx(4 / 20)


def test_sglang_gauges_are_averaged_over_ranks_not_summed() -> None:
    snaps = [parse(_SGLANG.format(l0=l0, l1=l1, r0=r0, r1=r1), at_ns=i * 10**9)
             for i, (l0, l1, r0, r1) in enumerate([(2.0, 3.0, 0.4, 0.6), (2.5, 3.5, 0.5, 0.7)])]
    assert snaps[0].gauges["spec_accept_length"] == pytest.approx(2.5)
    spec = server_window(snaps).speculative
    assert spec is not None and spec.source == "gauges"
    assert spec.acceptance_length == pytest.approx(2.75) and spec.acceptance_rate == pytest.approx(0.55)
    assert spec.drafts is None


def test_sglang_without_drafting_exports_zeros_and_gets_no_block() -> None:
    snap = parse(_SGLANG.format(l0=0, l1=0, r0=0, r1=0), at_ns=0)
    assert server_window([snap, snap]).speculative is None


def test_vllm_v0_gives_a_rate_from_its_counters_and_no_length() -> None:
    spec = spec_window({"spec_draft_tokens": 100.0, "spec_accepted_tokens": 55.0}, {})
    assert spec is not None and spec.acceptance_rate == pytest.approx(0.55) and spec.acceptance_length is None


@pytest.mark.parametrize("label", ["x", "-1", "1e3", "12345", ""])
def test_odd_position_labels_are_not_read_as_positions(label: str) -> None:
    text = ('# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc 0.1\n'
            '# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter\n'
            f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{position="{label}"}} 3\n')
    assert not any(k.startswith("spec_accepted_at_") for k in parse(text, at_ns=0).counters)


@pytest.mark.parametrize(("counters", "rate", "length"), [
    ({"spec_drafts": 10.0, "spec_draft_tokens": 30.0, "spec_accepted_tokens": 45.0}, None, None),
    ({"spec_drafts": 10.0, "spec_draft_tokens": 30.0, "spec_accepted_tokens": 30.0}, 1.0, 4.0),
    ({"spec_drafts": 40.0, "spec_draft_tokens": 30.0, "spec_accepted_tokens": 20.0}, 20 / 30, 1.5),
    ({"spec_drafts": 10.0, "spec_draft_tokens": 30.0, "spec_accepted_tokens": 5.0, "spec_accepted_at_0": 50.0},
     5 / 30, 1.5),
])
def test_impossible_counters_are_not_believed(counters: dict[str, float], rate: float | None,
                                              length: float | None) -> None:
    spec = spec_window(counters, {})
    assert spec is not None and spec.acceptance_rate == (pytest.approx(rate) if rate is not None else None)
    assert spec.acceptance_length == (pytest.approx(length) if length is not None else None)
    assert bool(spec.rejected) == (rate is None or "spec_accepted_at_0" in counters)
    assert all(p <= 1.0 for p in spec.per_position)


def test_impossible_gauges_are_not_believed() -> None:
    snap = parse(_SGLANG.format(l0=0.5, l1=0.5, r0=1.5, r1=1.5), at_ns=0)
    spec = server_window([snap, snap]).speculative
    assert spec is not None and spec.acceptance_rate is None and spec.acceptance_length is None
    assert "not between 0 and 1" in spec.rejected and "not between 1 and inf" in spec.rejected
