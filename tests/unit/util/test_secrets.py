"""Sensitive headers are recognised by name and never serialised; the spec still sends them."""

from __future__ import annotations

import click
import pytest

from tokometer.benchmark.spec import BenchSpec
from tokometer.cli.options import parse_headers
from tokometer.util.secrets import REDACTED, is_sensitive_header, redact_headers, redact_saved_spec


@pytest.mark.parametrize("name", ["Authorization", "proxy-authorization", "Cookie", "Set-Cookie", "X-Api-Key",
                                  "api-key", "x-goog-api-key", "X_API_KEY", "Ocp-Apim-Subscription-Key",
                                  "X-Auth-Token", "X-Amz-Security-Token", "apikey", "X-Client-Secret",
                                  "X-Password"])
def test_sensitive_names(name: str) -> None:
    assert is_sensitive_header(name)


@pytest.mark.parametrize("name", ["Content-Type", "X-Request-Id", "Accept", "User-Agent", "X-Tokens", "Keyboard"])
def test_ordinary_names(name: str) -> None:
    assert not is_sensitive_header(name)


def test_spec_serialises_headers_redacted_but_keeps_them() -> None:
    headers = {"Authorization": "Bearer sk-secret123", "X-Api-Key": "abc", "X-Trace": "t1"}
    spec = BenchSpec(url="http://127.0.0.1:9/v1", headers=headers, api_key="k2")
    for dumped in (spec.model_dump(), spec.model_dump(mode="json"), spec.model_dump_json(), repr(spec)):
        text = str(dumped)
        assert "sk-secret123" not in text and "abc" not in text and "k2" not in text
    assert spec.model_dump()["headers"] == {"Authorization": REDACTED, "X-Api-Key": REDACTED, "X-Trace": "t1"}
    assert spec.headers == headers  # what is sent
    assert redact_headers(headers) == spec.model_dump()["headers"]
    assert redact_saved_spec({"headers": headers})["headers"] == spec.model_dump()["headers"]
    assert redact_saved_spec("not a spec") == "not a spec"


def test_a_malformed_header_is_not_echoed() -> None:
    with pytest.raises(click.BadParameter) as caught:
        parse_headers(("X-Ok: 1", "Bearer sk-secret123"))
    assert "sk-secret123" not in str(caught.value) and "header 2" in str(caught.value)
