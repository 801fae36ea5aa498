"""A step's warnings (`tokometer.benchmark.step_warnings`) from records made for each case, summarised by
the real `summarize`; no server, no run."""

from __future__ import annotations

from tokometer.benchmark.step_warnings import CACHE_WARNING_SHARE, MISMATCH_LIMIT, step_warnings
from tokometer.load.profiles import LoadStep
from tokometer.load.selfcheck import ClientHealth
from tokometer.metrics import StepSummary, summarize
from tokometer.metrics.textcheck import check_text
from tokometer.records import RequestRecord, ServerTiming

CONCURRENCY = LoadStep("concurrency", concurrency=2)


def _record(index: int, text: str, tokens: int, *, cached: int | None = None, **extra: object) -> RequestRecord:
    """A finished request of ``tokens`` output tokens (the server's count) with 100 prompt tokens."""
    record = RequestRecord(index=index, sent_ns=1_000, first_token_ns=2_000, last_token_ns=3_000, end_ns=4_000,
                           status=200, output_text=text, output_tokens=tokens, output_tokens_source="usage",
                           input_tokens=100, input_tokens_source="usage",
                           server=ServerTiming(cached_tokens=cached) if cached is not None else None)
    for name, value in extra.items():
        setattr(record, name, value)
    return record


def _words(n: int) -> str:
    return " ".join("w" for _ in range(n))


def count_words(text: str) -> int:
    return len(text.split())


def _health(**changes: object) -> ClientHealth:
    health = ClientHealth(loop_lag_p99_ms=1.0, loop_lag_max_ms=2.0, cpu_fraction=0.2, client_lag_p99_ms=1.0)
    for name, value in changes.items():
        setattr(health, name, value)
    return health


def _warnings(records: list[RequestRecord], step: LoadStep = CONCURRENCY, *, health: ClientHealth | None = None,
              server: dict[str, object] | None = None, shared_prefix: bool = False,
              count: bool = True) -> tuple[StepSummary, list[str]]:
    summary = summarize(records)
    counter = count_words if count else None
    check = check_text(records, counter)
    return summary, step_warnings(step, summary, health or _health(), records, server=server, check=check,
                                  count=counter, shared_prefix=shared_prefix)


def test_a_clean_step_warns_of_nothing() -> None:
    assert _warnings([_record(0, _words(50), 50), _record(1, _words(40), 40, cached=0)])[1] == []


def test_every_kind_of_warning_comes_in_the_reports_order() -> None:
    # the second record has no cache figure (the hit rate is 60 of 100), and the tokenizer counts far more of
    # its text than the server did: a mismatch
    records = [_record(0, _words(50), 50, cached=60, rejected_numbers="usage.completion_tokens 9999 > 50 sent"),
               _record(1, _words(100), 60),
               _record(2, _words(2), 60)]  # text lost on the way: warned of apart, and left out of the mismatch
    health = _health(saturated=True, verdict="client saturated: CPU", note="1 worker")
    _, warnings = _warnings(records, health=health)
    assert len(warnings) == 6
    assert warnings[0].startswith("the server's numbers were not believed for 1 request(s)")
    assert "usage.completion_tokens 9999" in warnings[0]
    assert warnings[1].startswith("1 of ")  # the text check's own sentence
    assert warnings[2].startswith("the server counted 110 output tokens but the tokenizer counts 150 (+36.4%)")
    assert warnings[3].startswith("60% of the prompt tokens came from the server's prompt cache (the server's answers)")
    assert warnings[4:] == ["client saturated: CPU", "1 worker"]


def test_the_token_counts_may_differ_up_to_the_limit() -> None:
    server = 1000
    within = int(server * (1 + MISMATCH_LIMIT))
    assert _warnings([_record(0, _words(within), server)])[1] == []
    beyond = _warnings([_record(0, _words(within + 1), server)])[1]
    assert len(beyond) == 1 and beyond[0].startswith(f"the server counted {server} output tokens")
    assert _warnings([_record(0, _words(within + 1), server)], count=False)[1] == []  # no local tokenizer


def test_answers_with_separate_reasoning_or_estimated_counts_are_not_compared() -> None:
    reasoned = _record(0, _words(10), 60, reasoning_tokens=50, reasoning_tokens_source="usage")
    estimated = _record(1, _words(10), 60, output_tokens_source="estimate")
    assert not any(w.startswith("the server counted") for w in _warnings([reasoned, estimated])[1])


def test_a_warm_cache_is_warned_of_only_where_it_is_not_expected() -> None:
    over = round(100 * CACHE_WARNING_SHARE) + 1
    warm = [_record(0, _words(5), 5, cached=over)]
    assert len(_warnings(warm)[1]) == 1
    assert _warnings([_record(0, _words(5), 5, cached=round(100 * CACHE_WARNING_SHARE))])[1] == []  # at the share
    assert _warnings(warm, shared_prefix=True)[1] == []
    assert _warnings(warm, LoadStep("concurrency", sessions=True))[1] == []
    assert _warnings(warm, LoadStep("trace", offsets=(0,), trace="example"))[1] == []


def test_without_the_servers_answers_the_servers_metrics_tell_the_cache_hit_rate() -> None:
    records = [_record(0, _words(5), 5)]
    _, warnings = _warnings(records, server={"prefix_cache_hit_rate": 0.5})
    assert warnings == [warnings[0]] and warnings[0].startswith(
        "50% of the prompt tokens came from the server's prompt cache (the server's /metrics)")
    assert _warnings(records, server={"prefix_cache_hit_rate": None})[1] == []
