"""A peer's text as a terminal shows it: every character a terminal would act on written out, and at most
`SHOWN_CHARS` characters of it in a message.

Text a server, a file, a store or a peer sends reaches the user's terminal in tokometer's messages, warnings and
tables. Two things go wrong when it is printed as it came:

- **Control characters act on the terminal.** ``\\x1b[2J`` clears the screen, ``\\x1b]0;…\\x07`` sets the window
  title, ``\\x1b]8;;URL\\x07`` makes a hyperlink that says one thing and opens another, ``\\x9b`` is the C1 form
  of ``\\x1b[``, ``\\u202e`` (a bidi override) shows the rest of the line backwards. `printable` writes every
  character ``str.isprintable`` calls non-printable as ``repr`` writes it (``\\x1b``, ``\\x9b``, ``\\u202e``):
  the C0 and C1 controls, DEL, the format characters (bidi embeddings, overrides and isolates
  ``\\u202a``-``\\u202e``, ``\\u2066``-``\\u2069``, the zero-width ``\\u200b``-``\\u200f`` and ``\\ufeff``, the soft
  hyphen), the line and paragraph separators, the spaces other than ``' '`` (``\\xa0``), surrogates, private-use
  and unassigned code points. A zero-width joiner in an emoji sequence is written out too: seeing ``\\u200d`` is
  the price of never hiding one. Every escape is plain ASCII, so what is shown can be read, copied and searched.
- **A message is as long as the text.** A model id, llama.cpp's ``model_path``, an error body may be as long as an
  answer (16 MiB). `quoted` (in quotes, as ``repr`` writes it) and `clipped` (bare, for a phrase such as ``model
  NAME at URL``) keep its first `SHOWN_CHARS` characters and say how long it was; `value_shown` quotes one value of
  a JSON document (a config's field, an event's) in `FIELD_CHARS`.

`one_line` makes the command line's last line (``tokometer: error: …``): one line, escaped, and past
`LINE_CHARS` its head and its tail (where the fix is said) around the length. The consoles the command line
prints through (`tokometer.cli.output`) and its lines for a person (`tokometer.cli.say`) pass what they print
through `printable`.

Only what is shown to a person goes through here: what is sent back to a server or a client, stored or written as
JSON keeps the text whole.
"""

from __future__ import annotations

from typing import Final

__all__ = ["FIELD_CHARS", "LINE_CHARS", "SHOWN_CHARS", "clipped", "one_line", "printable", "quoted", "quoted_in",
           "value_shown"]

SHOWN_CHARS: Final = 160
"""The most characters of a peer's text one message shows."""

FIELD_CHARS: Final = 40
"""The most characters of one field of a file's own text (a checkpoint config's value, a pattern) a note quotes
inside a longer line."""

LINE_CHARS: Final = 4000
"""The most characters `one_line` keeps of a whole message (its head and its tail)."""


def _length(text: str) -> str:
    return f" ({len(text):,} characters)"


def printable(text: str, keep: str = "") -> str:
    """``text`` with each character that ``str.isprintable`` calls non-printable, but those in ``keep`` (the
    consoles keep ``"\\n"``), written as ``repr`` writes it: ``\\x1b``, ``\\x9b``, ``\\u202e``, ``\\x00``."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c in keep else repr(c)[1:-1] for c in text)


def quoted(text: str, limit: int = SHOWN_CHARS) -> str:
    """``repr(text)``; past ``limit`` characters, the first ones quoted, an ellipsis and the whole length:
    ``'/models/llama…' (5,004 characters)``."""
    if len(text) <= limit:
        return repr(text)
    head = repr(text[:limit])
    return f"{head[:-1]}…{head[-1]}{_length(text)}"


def clipped(text: str, limit: int = SHOWN_CHARS) -> str:
    """``text`` bare, its non-printable characters written out (`printable`), and past ``limit`` characters cut as
    `quoted` cuts it: ``/models/llama… (5,004 characters)``."""
    head = printable(text[:limit])
    return head if len(text) <= limit else f"{head}…{_length(text)}"


def value_shown(value: object, limit: int = FIELD_CHARS) -> str:
    """A value a JSON document (a config, a file to import, a server's event) holds, as a message quotes it: a
    string as `quoted` quotes it, true, false and null in JSON's spelling, anything else as Python writes it,
    cut as `clipped` cuts it."""
    if isinstance(value, str):
        return quoted(value, limit)
    if value is None or isinstance(value, bool):
        return "null" if value is None else str(value).lower()
    return clipped(repr(value), limit)


def quoted_in(message: str, text: str, limit: int = SHOWN_CHARS) -> str:
    """``message`` (an error's, which quotes ``text`` with ``repr``) with ``text`` quoted as `quoted` quotes it."""
    return message if len(text) <= limit else message.replace(repr(text), quoted(text, limit))


def one_line(message: str, limit: int = LINE_CHARS) -> str:
    """``message`` as one line for a terminal: its whitespace runs made one space, every other non-printable
    character written out (`printable`) and, past ``limit`` characters, its first two thirds and its last third
    (a message ends by saying what to do) around ``… (N characters) …``."""
    line = printable(" ".join(message.split()))
    if len(line) <= limit:
        return line
    tail = limit // 3
    return f"{line[:limit - tail]} …{_length(line)} … {line[-tail:]}"
