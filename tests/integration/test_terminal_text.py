"""What a server or a store sends never acts on the user's terminal, and is shown at a bounded length.

A server's error body, a model id in ``/v1/models``, an error event in a stream and a model name or label in a
store reach what tokometer prints: its last line (``tokometer: error: …``), its warnings and its tables. Before,
each went there as it came: ``\\x1b[2J`` cleared the screen, ``\\x1b]0;…\\x07`` set the window title, an OSC 8
hyperlink said one address and opened another, ``\\x9b`` (the C1 form of ``\\x1b[``) and ``\\u202e`` (a bidi
override, which shows the rest of the line backwards) were written raw, and ``runs`` printed a stored model name of
100,000 characters whole, twice. Now every such character is written out as ``repr`` writes it
(`tokometer.util.shown`), in the error line, in every console and in every line for a person, and a peer's text is
cut at `SHOWN_CHARS` characters with its length. The servers are loopback servers that answer as no real engine
does (`tests.hostile_servers`); the store is a real run of ``bench`` against the simulator whose model and label
were changed in place.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

from tests.conftest import SimServer, run_cli_here
from tests.hostile_servers import Answer, hostile, json_answer
from tokometer.util.shown import SHOWN_CHARS

HOSTILE = ("\x1b[2J\x1b]0;owned\x07\x1b]8;;http://evil.example/\x07click me\x1b]8;;\x07\x9b31m\x00"
           "\u202etxt.exe\u2066\u200b")
"""Escape sequences (clear screen, window title, an OSC 8 hyperlink), a C1 CSI, NUL, bidi and zero-width
characters: what a terminal would act on."""

RAW = ("\x1b", "\x9b", "\x07", "\x00", "\u202e", "\u2066", "\u200b")


def _nothing_raw(done: CompletedProcess[str]) -> None:
    for name, text in (("stdout", done.stdout), ("stderr", done.stderr)):
        reached = sorted({repr(c) for c in RAW if c in text})
        assert not reached, f"{name} carries {reached}: {text[-2000:]!r}"
    assert "Traceback" not in done.stderr, done.stderr


def _error_line(done: CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    _nothing_raw(done)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tokometer: error: "), done.stderr
    return lines[0]


def _answer(status: bytes, body: bytes, content_type: bytes = b"application/json") -> Answer:
    def answer(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(b"HTTP/1.1 " + status + b"\r\nContent-Type: " + content_type
                     + b"\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
    return answer


def _bench(server_url: str, *extra: str) -> CompletedProcess[str]:
    return run_cli_here("bench", "--url", server_url, "--api", "openai-completions", "--model", "m", "-n", "2",
                        "--input-tokens", "8", "--output-tokens", "4", "--tokenizer", "none", "--no-store", *extra)


def test_an_error_body_in_the_last_line_is_written_out_and_one_line() -> None:
    """A 401 whose body holds escapes, line breaks and a bidi override: bench's one-line error, escaped."""
    body = json.dumps({"error": {"message": f"bad key{HOSTILE}\nsecond line\r\n" + "k" * 50_000}}).encode()
    body = body.replace(b"\\u001b", b"\x1b").replace(b"\\u009b", "\x9b".encode())  # raw in the JSON text, too
    with hostile({"/v1/completions": _answer(b"401 Unauthorized", body)}) as server:
        line = _error_line(_bench(server.url))
    assert "wants an API key" in line and "\\x1b[2J" in line and "--api-key KEY" in line
    assert len(line) < 1000


def test_a_model_id_and_an_error_body_in_doctor_are_written_out() -> None:
    """``doctor`` names the model a server lists (all escapes, then 100,000 characters) and quotes what its
    requests got back: a 500 whose body holds escapes (that reached the terminal raw in a skipped part's reason)."""
    model = HOSTILE + "m" * 100_000
    body = json.dumps({"error": {"message": "engine fault " + HOSTILE}}).encode().replace(b"\\u001b", b"\x1b")
    with hostile({"/v1/models": json_answer({"object": "list", "data": [{"id": model}, {"id": "x" + HOSTILE}]}),
                  "/v1/chat/completions": _answer(b"500 Internal Server Error", body)}) as server:
        done = run_cli_here("doctor", server.url, "--quick")
    _nothing_raw(done)
    assert "engine fault \\x1b[2J" in done.stdout and "model \\x1b[2J" in done.stdout, done.stdout[:3000]
    assert max(map(len, (done.stdout + done.stderr).splitlines())) < 4 * SHOWN_CHARS + 400


def _error_event(conn: socket.socket, stop: threading.Event) -> None:
    event = json.dumps({"error": {"message": "engine fault " + HOSTILE + "z" * 20_000}})
    body = f"data: {event}\n\n".encode()
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n%s"
                 % (len(body), body))


def test_an_error_event_in_a_stream_is_written_out() -> None:
    """Every request's stream is one error event holding escapes: the check request's warning, the step's error
    examples in the table and the run's lines, all escaped."""
    with hostile({"/v1/completions": _error_event}) as server:
        done = _bench(server.url)
    _nothing_raw(done)
    assert "engine fault \\x1b[2J" in done.stdout + done.stderr
    assert max(map(len, (done.stdout + done.stderr).splitlines())) < 2000


def test_stored_model_names_and_labels_are_written_out_and_clipped(sim_factory: Callable[..., SimServer],
                                                                    tmp_path: Path) -> None:
    """A store whose first run's model is 60,000 characters after its escapes and whose labels hold a hyperlink:
    ``runs`` shows each escaped and cut to `SHOWN_CHARS` characters with its length, and ``compare``'s refusal of
    runs of two models is one line that quotes them so."""
    sim = sim_factory("--ttft-ms", "2", "--itl-ms", "1")
    store = tmp_path / "runs.db"
    for _ in range(2):
        done = run_cli_here("bench", "--url", sim.openai_url, "--model", "sim-model", "--tokenizer", "none",
                            "-c", "1", "-n", "6", "--input-tokens", "8", "--output-tokens", "8", "--store", str(store))
        assert done.returncode == 0, done.stderr
    hostile_text = HOSTILE.replace("\x00", "")  # NUL ends a text in SQLite
    model = hostile_text + "m" * 60_000  # the store reads 65,536 characters at most
    with sqlite3.connect(store) as db:
        db.execute("UPDATE runs SET label = ?", ("label " + hostile_text + "l" * 1000,))
        db.execute("UPDATE runs SET model = ? WHERE id = 1", (model,))
    listed = run_cli_here("runs", "--store", str(store))
    assert listed.returncode == 0, listed.stderr
    _nothing_raw(listed)
    assert "\\x1b[2J" in listed.stdout and "\\u202etxt.exe" in listed.stdout, listed.stdout[:3000]
    assert f"({len(model):,} characters)" in listed.stdout and "(1,074 characters)" in listed.stdout
    assert max(map(len, listed.stdout.splitlines())) < 4 * SHOWN_CHARS + 400, listed.stdout[:3000]
    line = _error_line(run_cli_here("compare", "1", "2", "--store", str(store)))
    assert "\\x1b[2J" in line and f"({len(model):,} characters) vs 'sim-model'" in line and len(line) < 1000


def test_count_json_of_a_hostile_file_writes_the_pieces_escaped(tmp_path: Path) -> None:
    """``count --json --show`` writes each token's text: a file holding a C1 CSI, a bidi override and a zero-width
    space has them written as JSON's ``\\uXXXX`` (JSON escapes the C0 controls itself), the text's other
    characters as they are, and the same pieces read back."""
    source = tmp_path / "hostile.txt"
    source.write_text("a\x9b2Jb \u202eevil zw\u200bj \x1b[2J café", encoding="utf-8")
    done = run_cli_here("count", "-f", str(source), "--json", "--show")
    assert done.returncode == 0, done.stderr
    _nothing_raw(done)
    pieces = json.loads(done.stdout)["pieces"]
    assert "\x9b" in pieces and any("\u202e" in p for p in pieces)  # read back as they were
    assert "\\u009b" in done.stdout and "\\u202e" in done.stdout and "caf" in done.stdout
