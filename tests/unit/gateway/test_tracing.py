"""Tracing's configuration, and what a gateway without it pays (the spans themselves are checked against a real
OTLP receiver in tests/integration/test_gateway_tracing.py)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tokometer.gateway import tracing
from tokometer.gateway.config import GatewayConfig, TracingConfig, load_config
from tokometer.util.errors import ConfigError

_BASE = '[[upstreams]]\nname = "a"\nurl = "http://127.0.0.1:9/v1"\n[[routes]]\nmodel = "m"\nupstreams = ["a"]\n'


def _config(tmp_path: Path, tracing_table: str) -> GatewayConfig:
    path = tmp_path / "g.toml"
    path.write_text(_BASE + "[tracing]\n" + tracing_table)
    return load_config(path, {})


def test_tracing_is_off_unless_an_endpoint_is_set(tmp_path: Path) -> None:
    assert _config(tmp_path, "").tracing.endpoint is None
    assert tracing.tracer_for(TracingConfig()) is None
    cfg = _config(tmp_path, 'endpoint = "http://127.0.0.1:4318"\nprotocol = "grpc"\nsample_ratio = 0.25\n'
                  'headers = { authorization = "Bearer x" }\ntimeout_s = 2\n').tracing
    assert (cfg.protocol, cfg.sample_ratio, cfg.headers, cfg.timeout_s) == ("grpc", 0.25, {"authorization": "Bearer x"},
                                                                             2.0)


@pytest.mark.parametrize(("table", "says"), [
    ('endpoint = "127.0.0.1:4318"', "is not an http:// or https:// URL"),
    ('endpoint = "ftp://collector:4318"', "is not an http:// or https:// URL"),
    ('endpoint = "http://"', "is not an http:// or https:// URL"),
    ('protocol = "http/json"', "tracing.protocol"),
    ("sample_ratio = 1.5", "tracing.sample_ratio"),
    ('endpont = "http://x"', "endpoint"),
])
def test_a_bad_tracing_table_is_one_line_naming_the_key(tmp_path: Path, table: str, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _config(tmp_path, table + "\n")
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_without_the_sdk_asking_for_tracing_is_one_line_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    # An SDK that is not installed, made by hiding the installed one from the import system (no environment
    # without it can be had in this test run).
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)
    with pytest.raises(ConfigError) as caught:
        tracing.check_sdk(TracingConfig(endpoint="http://127.0.0.1:4318"))
    message = str(caught.value)
    assert tracing.INSTALL_HINT in message and "[tracing] endpoint" in message and "\n" not in message
    tracing.check_sdk(TracingConfig())  # off: nothing is asked for


def test_the_hooks_cost_nothing_when_the_request_is_not_traced() -> None:
    async def attempt() -> None:
        return None

    coro: Any = attempt()
    assert tracing.attempt(coro, None, hedge=True) is coro  # the same coroutine, unwrapped
    asyncio.run(coro)
    assert tracing.upstream_headers() is None
    tracing.carrying_on("resume")


def test_a_gateway_without_tracing_does_not_import_the_sdk() -> None:
    # (the Redis client imports the SDK's metrics part on its own where the SDK is installed: not its tracing)
    code = ("import sys, tokometer.gateway.app, tokometer.gateway.tracing; print(sorted(m for m in sys.modules "
            "if m.startswith(('opentelemetry.sdk.trace', 'opentelemetry.exporter', 'grpc'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"
