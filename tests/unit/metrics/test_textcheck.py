"""The text check's rule (`tokometer.metrics.textcheck`) on records made for each case."""

from __future__ import annotations

from tokometer.metrics.textcheck import SLACK, TOLERANCE, check_text, counted_tokens
from tokometer.records import RequestRecord, TokenSource


def _record(index: int, text: str, tokens: int, source: TokenSource = "usage", **extra: object) -> RequestRecord:
    record = RequestRecord(index=index, sent_ns=1, end_ns=2, output_text=text, output_tokens=tokens,
                           output_tokens_source=source)
    for name, value in extra.items():
        setattr(record, name, value)
    return record


def _words(n: int) -> str:
    return "".join(" w" for _ in range(n))


def count_words(text: str) -> int:
    return len(text.split())


def test_the_boundary_is_the_larger_of_the_slack_and_the_share() -> None:
    counted = 100
    allowed = max(SLACK, int(TOLERANCE * counted))
    records = [_record(0, _words(counted - allowed), counted), _record(1, _words(counted - allowed - 1), counted),
               _record(2, _words(8 - SLACK), 8), _record(3, _words(8 - SLACK - 1), 8)]
    check = check_text(records, count_words)
    assert check is not None and check.checked == {"tokenizer": 4}
    assert [s.index for s in check.short] == [1, 3]
    assert check.short[0].received == counted - allowed - 1


def test_only_the_servers_counts_of_measured_answers_are_checked() -> None:
    records = [_record(0, "", 8, "estimate"), _record(1, "", 8, "tokenizer"), _record(2, "", 8, warmup=True),
               _record(3, "", 8, error="reset"), _record(4, "", 0)]
    assert check_text(records, count_words) is None
    native = check_text([_record(5, "", 8, "native")], None)
    assert native is not None and [(s.counted, s.received, s.source) for s in native.short] == [(8, 0, "bytes")]


def test_reasoning_counts_as_text_and_hidden_reasoning_is_not_expected() -> None:
    sent = _record(0, _words(4), 10, reasoning_text=_words(6), reasoning_tokens=6, reasoning_tokens_source="usage")
    hidden = _record(1, _words(4), 10, reasoning_tokens=6, reasoning_tokens_source="usage")
    lost = _record(2, _words(4), 10, reasoning_tokens=6, reasoning_tokens_source="usage", first_answer_ns=5)
    assert [counted_tokens(r) for r in (sent, hidden, lost)] == [10, 4, 10]
    check = check_text([sent, hidden, lost], count_words)
    assert check is not None and [s.index for s in check.short] == [2]


def test_bytes_bound_the_tokens_of_any_text() -> None:
    check = check_text([_record(0, "é", 2), _record(1, "ab", 5)], None)  # 2 bytes hold 2 tokens at most
    assert check is not None and [(s.index, s.received) for s in check.short] == [(1, 2)]
    warning = check.warning()
    assert warning is not None and warning.startswith("1 of 2 answers") and "at most 2" in warning
