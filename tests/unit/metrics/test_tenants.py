"""Per-tenant blocks of a mix's step (`tokometer.metrics.tenants`), on synthetic timestamps."""

from __future__ import annotations

import pytest

from tokometer.metrics.summary import SLO
from tokometer.metrics.tenants import mix_slos, tenant_summaries
from tokometer.records import RequestRecord

MS = 1_000_000


def _record(index: int, tenant: str | None, ttft_ms: float, *, sent_ms: float = 0.0, ok: bool = True,
            warmup: bool = False) -> RequestRecord:
    sent = int((1000 + sent_ms) * MS)
    r = RequestRecord(index=index, warmup=warmup, sent_ns=sent, first_byte_ns=sent + MS, tenant=tenant)
    if not ok:
        r.end_ns, r.error, r.finish_reason = sent + 5 * MS, "http_404", "error"
        return r
    first = sent + int(ttft_ms * MS)
    r.first_token_ns, r.event_ns, r.event_tokens = first, [first, first + 10 * MS], [1.0, 1.0]
    r.last_token_ns = r.end_ns = first + 10 * MS
    r.output_tokens, r.output_tokens_source = 2, "usage"
    return r


def test_each_tenant_against_its_own_slo() -> None:
    records = [_record(0, "fast", 50, sent_ms=0), _record(1, "fast", 150, sent_ms=100),
               _record(2, "slow", 900, sent_ms=200), _record(3, "slow", 0, sent_ms=300, ok=False),
               _record(4, "fast", 10, sent_ms=0, warmup=True)]
    slos = {"fast": SLO(ttft_ms=100), "slow": SLO(ttft_ms=1000)}
    duration_s = 2.0
    block = tenant_summaries(records, ["fast", "slow", "idle"], slos, duration_s)
    assert block is not None
    fast, slow, idle = block["tenants"]
    assert (fast["name"], fast["requests"], fast["completed"], fast["failed"]) == ("fast", 2, 2, 0)
    assert fast["share"] == pytest.approx(2 / 4)  # of the step's measured requests (warm-up left out)
    assert fast["ttft_ms"]["p50"] == pytest.approx(100) and fast["ttft_ms"]["count"] == 2
    assert fast["slo_met"] == 1 and fast["slo_attainment"] == pytest.approx(0.5)
    assert fast["goodput_rps"] == pytest.approx(1 / duration_s)
    assert fast["output_throughput_tok_s"] == pytest.approx(4 / duration_s)
    assert fast["slo"] == {"ttft_ms": 100.0}
    # a failed request misses its SLO; its error is counted
    assert (slow["requests"], slow["failed"], slow["slo_met"], slow["errors"]) == (2, 1, 1, {"http_404": 1})
    assert slow["slo_attainment"] == pytest.approx(0.5)
    assert idle["requests"] == 0 and idle["slo_attainment"] is None  # a tenant that sent nothing
    assert block["goodput_rps"] == pytest.approx(2 / duration_s)
    assert block["slo_attainment"] == pytest.approx(2 / 4)


def test_no_slo_no_goodput_and_no_tenants_no_block() -> None:
    records = [_record(0, "a", 50), _record(1, "b", 60)]
    block = tenant_summaries(records, [], {}, 1.0)
    assert block is not None and [t["name"] for t in block["tenants"]] == ["a", "b"]
    assert block["goodput_rps"] is None and block["tenants"][0]["goodput_rps"] is None
    assert tenant_summaries([_record(0, None, 50)], [], {}, 1.0) is None


def test_slos_are_read_from_the_mix_as_saved() -> None:
    saved = {"tenants": [{"name": "a", "share": 0.5, "slo_ttft_ms": 200, "slo_e2e_ms": 900},
                         {"name": "b", "share": 0.5, "slo_tpot_ms": True}, {"share": 1}, "junk"]}
    assert mix_slos(saved) == {"a": SLO(ttft_ms=200.0, e2e_ms=900.0), "b": SLO()}
    assert mix_slos(None) == {} and mix_slos({"tenants": "x"}) == {}
