"""The gateway's log lines on stderr (`tokometer.gateway.server.setup_logging`): an upstream's words in them (an
error body, an error event) cannot act on the terminal, and a traceback keeps its lines."""

from __future__ import annotations

import io
import logging

import pytest

from tokometer.gateway.server import setup_logging


def test_a_log_line_writes_out_what_a_terminal_would_act_on(monkeypatch: pytest.MonkeyPatch) -> None:
    own = logging.getLogger("tokometer.gateway")
    kept = list(own.handlers)
    stream = io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    for handler in kept:
        own.removeHandler(handler)
    try:
        setup_logging("warning")
        log = logging.getLogger("tokometer.gateway.router")
        log.warning("upstream %s failed: %s", "a", "HTTP 500: \x1b]0;owned\x07\x9b2J\u202e")
        try:
            raise ValueError("x")
        except ValueError:
            log.exception("and then")
    finally:
        for handler in list(own.handlers):
            own.removeHandler(handler)
        for handler in kept:
            own.addHandler(handler)
    text = stream.getvalue()
    assert "upstream a failed: HTTP 500: \\x1b]0;owned\\x07\\x9b2J\\u202e\n" in text
    assert "\x1b" not in text and "\x9b" not in text and "Traceback (most recent call last):\n" in text
