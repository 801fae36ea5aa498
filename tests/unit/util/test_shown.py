"""A peer's text in a one-line message: whole when short, cut with its length when long, never a control
character a terminal would act on (`tokometer.util.shown`)."""

from __future__ import annotations

from tokometer.util.shown import SHOWN_CHARS, clipped, quoted, quoted_in


def test_short_text_is_shown_whole() -> None:
    assert quoted("llama-3.1-8b") == "'llama-3.1-8b'" and clipped("llama-3.1-8b") == "llama-3.1-8b"
    assert quoted("x" * SHOWN_CHARS) == repr("x" * SHOWN_CHARS)


def test_long_text_is_cut_and_says_how_long_it_was() -> None:
    path = "/models/" + "p" * 4992
    assert quoted(path, 10) == "'/models/pp…' (5,000 characters)"
    assert clipped(path, 10) == "/models/pp… (5,000 characters)"
    assert len(quoted(path)) < SHOWN_CHARS + 40
    assert quoted("it's" + "x" * 20, 4) == "\"it's…\" (24 characters)"  # quoted as repr quotes it


def test_control_characters_are_written_out() -> None:
    assert clipped("m\x1b[2J\n") == "m\\x1b[2J\\n" and quoted("m\n") == "'m\\n'"


def test_a_message_that_quotes_the_text_quotes_it_cut() -> None:
    path = "p" * 500
    message = f"[Errno 36] File name too long: {path!r}"
    assert quoted_in(message, path, 3) == "[Errno 36] File name too long: 'ppp…' (500 characters)"
    assert quoted_in("unknown model 'm'", "m") == "unknown model 'm'"
