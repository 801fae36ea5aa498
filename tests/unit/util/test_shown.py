"""A peer's text in a one-line message: whole when short, cut with its length when long, never a character a
terminal would act on (`tokometer.util.shown`)."""

from __future__ import annotations

import pytest

from tokometer.util.shown import LINE_CHARS, SHOWN_CHARS, clipped, one_line, printable, quoted, quoted_in, value_shown


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


def test_every_character_a_terminal_acts_on_is_written_out_as_repr_writes_it() -> None:
    """C0 and C1 controls, DEL, bidi embeddings, overrides and isolates, zero-width and other format characters,
    the line separator and the spaces other than ' ': what ``str.isprintable`` calls non-printable."""
    hostile = "\x1b[2J\x1b]8;;http://e/\x07l\x9b31m\x85\x00\x7f\u202a\u202e\u2066\u2069\u200b\u200d\ufeff\xad\u2028\xa0"
    shown = printable(hostile)
    assert shown == repr(hostile)[1:-1] and shown.isascii() and shown.isprintable()
    assert printable("a\nb\tc", keep="\n") == "a\nb\\tc"
    assert printable("llama-3.1 ünïcode 日本語 e\u0301") == "llama-3.1 ünïcode 日本語 e\u0301"  # printable: as it is
    assert printable(shown) == shown  # writing out twice changes nothing
    assert clipped("m\u202etxt.exe\x9b") == "m\\u202etxt.exe\\x9b" and quoted("\u2066") == "'\\u2066'"


def test_one_line_is_one_printable_line_and_keeps_the_head_and_the_tail() -> None:
    assert one_line("bad\n  answer\r\n\x1b[2J\u2028end") == "bad answer \\x1b[2J end"
    message = "server said " + "x\x1b" * 10_000 + " : give --api-key KEY"
    line = one_line(message)
    assert line.isprintable() and len(line) < LINE_CHARS + 40
    assert line.startswith("server said x\\x1bx") and line.endswith(" : give --api-key KEY")
    assert f"… ({len(printable(message)):,} characters) …" in line
    assert one_line("short") == "short"


CUT_IN_MESSAGES = {
    ("client/assemble.py", "payload[:120]"): "a request record's error detail: bounded where it is made, as stored",
    ("client/assemble.py", "event.error[:300]"): "a request record's error detail: bounded where it is made, as stored",
    ("records.py", "' '.join(body.split())[:300]"): "a request record's error detail: bounded as stored",
    ("util/gguf.py", "name[:80]"): "the GGUF reader is a leaf that imports nothing of tokometer; repr writes it out",
    ("protocols/anthropic_messages/writer.py", "uuid.uuid4().hex[:24]"): "an id this server makes, no peer's text",
    ("protocols/openai/chunks.py", "uuid.uuid4().hex[:24]"): "an id this server makes, no peer's text",
    ("protocols/openai_responses/writer.py", "uuid.uuid4().hex[:24]"): "an id this server makes, no peer's text",
}
"""The f-strings of the source that cut a text to a literal length (20 characters or more) themselves, and why
that is not a message cutting a peer's text (which `clipped` and `quoted` do, at `SHOWN_CHARS`, saying the
length)."""


def test_a_message_cuts_a_peer_s_text_only_through_shown() -> None:
    """No ``f"... {text[:120]}"``: a message that shows a peer's text shows it through `clipped` or `quoted`."""
    import ast
    from pathlib import Path

    src = Path(__file__).resolve().parents[3] / "src" / "tokometer"
    found = set()
    for path in src.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.FormattedValue):
                continue
            for part in ast.walk(node.value):
                if (isinstance(part, ast.Subscript) and isinstance(part.slice, ast.Slice) and part.slice.lower is None
                        and isinstance(part.slice.upper, ast.Constant) and isinstance(part.slice.upper.value, int)
                        and part.slice.upper.value >= 20):
                    found.add((path.relative_to(src).as_posix(), ast.unparse(part)))
    listed = set(CUT_IN_MESSAGES)
    assert found <= listed, f"show a peer's text with util.shown.clipped or quoted (or say here why not): " \
                            f"{sorted(found - listed)}"
    assert listed <= found, f"no longer cut, drop from the list: {sorted(listed - found)}"


@pytest.mark.parametrize(("value", "shown"), [
    ("8", "'8'"), (True, "true"), (False, "false"), (None, "null"), (32.5, "32.5"), ([1, 2], "[1, 2]"),
    ("\x1b[2J", "'\\x1b[2J'"), ({"\x9b": 1}, "{'\\x9b': 1}"),
    ("x" * 50, "'" + "x" * 40 + "…' (50 characters)"), (list(range(30)), "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 1… "
                                                                    "(110 characters)")])
def test_a_documents_value_is_quoted_short_in_jsons_words_and_escaped(value: object, shown: str) -> None:
    """One value of a JSON document in a message: a string quoted, JSON's true/false/null, the rest as Python writes
    it, every control character written out and at most FIELD_CHARS characters of it."""
    assert value_shown(value) == shown
