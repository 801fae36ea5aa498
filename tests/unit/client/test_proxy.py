"""Which proxy the environment names for a target (`tokometer.client.proxy`), as curl and urllib read it."""

from __future__ import annotations

import base64

import pytest

from tokometer.client.proxy import proxy_for
from tokometer.util.errors import ConfigError

VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy", "no_proxy")


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in VARS:
        monkeypatch.delenv(name, raising=False)


def test_no_variables_means_direct() -> None:
    assert proxy_for("http", "example.com", 80) is None


def test_scheme_specific_then_all_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://secure-proxy:3128")
    monkeypatch.setenv("ALL_PROXY", "proxy.internal:8080")  # a bare host:port, as curl accepts it
    https = proxy_for("https", "example.com", 443)
    assert https is not None and (https.host, https.port, https.source) == ("secure-proxy", 3128, "HTTPS_PROXY")
    plain = proxy_for("http", "example.com", 80)
    assert plain is not None and (plain.host, plain.port, plain.source) == ("proxy.internal", 8080, "ALL_PROXY")


def test_credentials_become_basic_proxy_authorization(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://us%40er:p%3Ass@proxy:3128")
    proxy = proxy_for("http", "example.com", 80)
    assert proxy is not None and proxy.authorization == "Basic " + base64.b64encode(b"us@er:p:ss").decode()


def test_no_proxy_lists_and_wildcard(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://proxy:3128")
    monkeypatch.setenv("NO_PROXY", "localhost, .internal,10.1.2.3")
    assert proxy_for("http", "localhost", 8000) is None
    assert proxy_for("http", "api.internal", 80) is None
    assert proxy_for("http", "10.1.2.3", 80) is None
    assert proxy_for("http", "127.0.0.1", 8000) is not None  # loopback is not special unless listed (curl, urllib)
    monkeypatch.setenv("NO_PROXY", "*")
    assert proxy_for("http", "example.com", 80) is None


def test_unsupported_proxy_schemes_are_config_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "socks5://proxy:1080")
    with pytest.raises(ConfigError, match=r"HTTPS_PROXY.*only http:// proxies"):
        proxy_for("https", "example.com", 443)
