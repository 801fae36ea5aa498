"""``$OLLAMA_HOST`` as ``serve ollama:...`` reads it (Ollama's own spelling: ``HOST[:PORT]``, a scheme optional): a
port that is not a number or past 65535, an unclosed bracket or a scheme other than http(s) had been a ValueError
traceback or a URL that could not be reached; each is now one `EngineError` naming the variable. An IPv6 host
keeps its brackets in the URL."""

from __future__ import annotations

import pytest

from tokometer.engines.ollama import default_ollama_url
from tokometer.util.errors import EngineError


@pytest.mark.parametrize(("value", "url"), [
    ("", "http://127.0.0.1:11434"), ("example.com", "http://example.com:11434"),
    ("0.0.0.0:8080", "http://0.0.0.0:8080"), ("https://ollama.internal", "https://ollama.internal:11434"),
    ("[::1]:11434", "http://[::1]:11434"), ("http://[fe80::1]", "http://[fe80::1]:11434")])
def test_a_host_becomes_its_url(monkeypatch: pytest.MonkeyPatch, value: str, url: str) -> None:
    monkeypatch.setenv("OLLAMA_HOST", value)
    assert default_ollama_url() == url


@pytest.mark.parametrize(("value", "why"), [
    ("127.0.0.1:99999", "give HOST"), ("host:abc", "give HOST"), ("[::1", "give HOST"),
    ("ftp://x:1", "its scheme must be http or https")])
def test_a_host_that_is_not_one_is_one_error(monkeypatch: pytest.MonkeyPatch, value: str, why: str) -> None:
    monkeypatch.setenv("OLLAMA_HOST", value)
    with pytest.raises(EngineError, match=rf"^\$OLLAMA_HOST is .*: {why}"):
        default_ollama_url()
