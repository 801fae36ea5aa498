"""What a failed start quotes of the engine's log (the starts themselves: tests/integration/test_tune_launch.py)."""

from __future__ import annotations

from tokometer.tune.launch import LAST_WORDS_LINE_CHARS, LAST_WORDS_LINES, LaunchOptions, last_words


def test_the_last_words_are_the_logs_last_lines_after_the_error_line_before_them() -> None:
    usage = "\n".join(f"  --flag-{i} N   what flag {i} does" for i in range(30))
    log = f'error while handling argument "--cache-type-k": Unsupported cache type: q9\n\nusage:\n{usage}\n\n'
    words = last_words(log).splitlines()
    assert words[0] == 'error while handling argument "--cache-type-k": Unsupported cache type: q9'
    assert words[-1] == "  --flag-29 N   what flag 29 does"
    assert len(words) <= LAST_WORDS_LINES and "" not in words


def test_the_last_words_of_a_short_or_empty_log_are_all_of_it() -> None:
    assert last_words("error: invalid argument: --no-such-flag\n") == "error: invalid argument: --no-such-flag"
    assert last_words("") == ""
    assert last_words("a\nb\nc", lines=1) == "c"


def test_a_long_line_is_cut() -> None:
    words = last_words("x" * 10_000)
    assert len(words) == LAST_WORDS_LINE_CHARS + 1 and words.endswith("…")


def test_a_second_start_is_timed_by_default_for_llamacpp_only() -> None:
    assert LaunchOptions().times_second_start
    assert not LaunchOptions(engine="vllm").times_second_start
    assert LaunchOptions(engine="vllm", second_start=True).times_second_start
    assert not LaunchOptions(second_start=False).times_second_start
