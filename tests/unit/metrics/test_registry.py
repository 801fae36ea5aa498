"""The metric registry (`tokometer.metrics.registry`) against what reads it: `StepSummary`, its JSON,
``DEFINITIONS``, ``compare``'s metric table, find-max's objectives and the CSV's columns."""

from __future__ import annotations

import dataclasses

import pytest

from tokometer.benchmark import findmax
from tokometer.compare import gate as compare
from tokometer.load.profiles import LoadStep
from tokometer.metrics import DEFINITIONS, SLO, StepSummary, registry, summarize
from tokometer.metrics.reasoning import ReasoningSummary
from tokometer.records import RequestRecord
from tokometer.report import csv_out

MS = 1_000_000


def _summary() -> StepSummary:
    """A step of eight completed requests and one failed one, timestamps made by hand."""
    records = []
    for i in range(9):
        sent = (i + 1) * 100 * MS  # a request sent at 0 ns was never sent
        r = RequestRecord(index=i, due_ns=sent, sent_ns=sent, event_ns=[sent + 50 * MS, sent + 60 * MS, sent + 70 * MS],
                          event_tokens=[1.0, 1.0, 1.0])
        r.first_token_ns, r.last_token_ns, r.end_ns = sent + 50 * MS, sent + 70 * MS, sent + 71 * MS
        r.output_tokens, r.input_tokens = 3, 10
        if i == 8:
            r.error = "http_5xx"
        records.append(r)
    return summarize(records, SLO(ttft_ms=55.0))


def test_every_summary_field_has_a_row_and_every_row_a_field() -> None:
    fields = set(StepSummary.json_keys())
    assert {f.name for f in dataclasses.fields(StepSummary)} - fields == {"distributions"}
    assert {m.attribute for m in registry.distribution_rows()} <= fields
    attributes = {m.attribute for m in registry.METRICS if m.attribute is not None}
    properties = {name for name, value in vars(StepSummary).items() if isinstance(value, property)}
    assert fields - attributes == set(), "summary fields without a registry row"
    assert attributes - fields - properties == set(), "registry rows naming no field or property of StepSummary"
    assert len({m.name for m in registry.METRICS}) == len(registry.METRICS), "a name twice"


def test_the_rows_are_the_names_of_the_json() -> None:
    data = _summary().to_json()
    top = {k for k in data if k not in ("naive_summary", "output_tokens", "input_tokens")}
    nested = {f"{k}.{sub}" for k in ("output_tokens", "input_tokens") for sub in data[k]}
    names = {m.name for m in registry.METRICS if m.attribute is not None and not isinstance(
        getattr(StepSummary, m.attribute, None), property)}
    assert names == top | nested
    reasoning = {m.name.split(".", 1)[1] for m in registry.METRICS if m.name.startswith("reasoning.")}
    assert reasoning <= set(ReasoningSummary.from_json({}).to_json())  # each is a key the reasoning block has


def test_definitions_are_the_registry_and_every_row_is_whole() -> None:
    assert {**{m.name: m.definition for m in registry.METRICS}, **registry.NOTES} == DEFINITIONS
    for m in registry.METRICS:
        assert m.definition and "article" not in m.definition, m.name
        if m.short:  # a name objectives or thresholds take says which way is better, and how to head it
            assert m.better is not None and m.label, m.name
        assert set(m.percentiles) <= set(registry.LATENCY_PERCENTILES), m.name


def test_short_names_have_one_unit_each() -> None:
    goodput, share, errors = (registry.objective(n) for n in ("goodput", "goodput_share", "error_rate"))
    assert goodput is not None and goodput[0].name == "goodput_rps" and goodput[0].unit == "req/s"
    assert share is not None and share[0].unit == "share" and errors is not None and errors[0].unit == "share"
    assert registry.objective("ttft_p99.9") == (registry.by_name("ttft_ms"), "p99.9")
    assert registry.objective("ttft") is None and registry.objective("ttft_p42") is None
    assert registry.objective("chunk_gap_p50") is None  # a distribution no objective names


def test_the_summary_derives_error_rate_and_goodput_share() -> None:
    s = _summary()
    assert s.error_rate == pytest.approx(1 / 9)
    # Every completed request had TTFT 50 ms <= 55: 8 of the 9 measured met the objective.
    assert s.goodput_share == pytest.approx(8 / 9)
    assert s.goodput_rps == pytest.approx(8 / s.duration_s)


def test_compare_and_find_max_read_the_registry() -> None:
    for d in compare.METRICS:
        found = registry.objective(d.key)
        assert found is not None, d.key
        metric, stat = found
        assert d.higher_is_better == (metric.better == "higher")
        assert d.label.startswith(metric.label) and (stat is None or d.label.endswith(stat))
    by_key = {d.key: d for d in compare.METRICS}
    assert (by_key["goodput"].unit, by_key["error_rate"].unit, by_key["ttft_p99"].quantile) == ("req/s", "%", 99.0)
    objectives = findmax.parse_objectives("e2e_p95=3s,goodput_share=0.5,error_rate=20%")
    probe = findmax.judge(_summary(), LoadStep("rate", rate=1.0), objectives)
    s = _summary()
    assert probe.observed == {"e2e_p95": s.e2e_ms.p95, "goodput_share": s.goodput_share, "error_rate": s.error_rate}
    assert probe.passed


def test_the_csv_columns_are_the_registry_s() -> None:
    s = _summary()
    row = csv_out.summary_row(3, None, None, s)
    assert set(row) == set(csv_out.CSV_COLUMNS) and row["window"] == "step"
    assert csv_out.CSV_COLUMNS[3:-4] == [column for column, _, _ in registry.csv_columns()]  # the registry's, in order
    assert row["ttft_ms_p90"] == s.ttft_ms.p90 and row["decode_speed_tok_s_mean"] == s.decode_speed_tok_s.mean
    assert row["duration_s"] == round(s.duration_s, 4) and row["output_tokens_source"] == ""
    assert row["requests_failed"] == 1 and row["output_tokens_total"] == 24


def test_a_find_max_run_saved_with_the_old_names_reports_in_the_new() -> None:
    """A spec stored before one vocabulary says ``goodput=`` and ``errors=``; its answer is recomputed as it was."""
    step = _summary()
    steps = [(0, LoadStep("rate", rate=1.0), step), (1, LoadStep("rate", rate=2.0), step)]
    old = findmax.outcome({"find_max": "rate", "slo": "e2e_p99=1s,goodput=0.8,errors=20%"}, steps)
    new = findmax.outcome({"find_max": "rate", "slo": "e2e_p99=1s,goodput_share=0.8,error_rate=20%"}, steps)
    assert old is not None and new is not None and old.to_json() == new.to_json()
    assert old.to_json()["objectives"] == {"e2e_p99": 1000.0, "goodput_share": 0.8, "error_rate": 0.2}
    assert old.best == 2.0 and "goodput_share >= 80%, error_rate <= 20%" in old.answer()
