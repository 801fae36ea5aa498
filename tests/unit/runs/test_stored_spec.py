"""`StoredSpec`: a saved spec is the JSON it was saved as, and each field code reasons about reads typed, a
missing or malformed one as its default."""

from __future__ import annotations

from tokometer.benchmark.spec import BenchSpec
from tokometer.metrics import SLO
from tokometer.runs.stored_spec import DEFAULT_STEADY_TOLERANCE, StoredSpec


def test_it_is_the_json_it_was_saved_as() -> None:
    data = {"url": "u", "rate": [2, 4.5], "import": {"tool": "guidellm"}}
    spec = StoredSpec(data)
    assert dict(spec) == data and spec == data and spec["url"] == "u" and spec.get("nope") is None
    assert StoredSpec.of(spec) is spec and StoredSpec.of(data) == spec and StoredSpec(None) == {}


def test_a_bench_spec_reads_back_as_it_was_given() -> None:
    given = BenchSpec(url="http://h/v1", rate=[6.0], find_max="rate", slo="ttft_p99=1s", search="ramp", ramp_from=2.0,
                      ramp_time_s=30.0, slo_ttft_ms=100.0, slo_e2e_ms=900.0, steady_tolerance=0.25, time_slice_s=0.5,
                      gpus=2)
    spec = StoredSpec(given.model_dump(mode="json"))
    assert (spec.find_max, spec.slo, spec.search, spec.rate, spec.concurrency, spec.gpus) == \
        ("rate", "ttft_p99=1s", "ramp", (6.0,), (), 2)
    assert spec.slo_limits == SLO(ttft_ms=100.0, e2e_ms=900.0)
    assert (spec.steady_tolerance, spec.time_slice_s, spec.imported) == (0.25, 0.5, {})


def test_missing_or_malformed_fields_read_as_their_defaults() -> None:
    for data in ({}, {"find_max": "tokens", "slo": "", "search": None, "rate": "fast", "steady_tolerance": 2,
                      "time_slice_s": -1, "slo_ttft_ms": True, "import": ["x"]}):
        spec = StoredSpec(data)
        assert (spec.find_max, spec.slo, spec.search, spec.rate) == (None, None, "bisect", ())
        assert (spec.steady_tolerance, spec.time_slice_s) == (DEFAULT_STEADY_TOLERANCE, None)
        assert spec.slo_limits == SLO() and spec.imported == {}
    assert StoredSpec({"import": {"tool": "aiperf"}}).imported == {"tool": "aiperf"}
