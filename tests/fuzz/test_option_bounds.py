"""Generated option and config values against the one spec with bounds (`tokometer.util.limits`).

Huge, tiny, negative, NaN, infinite and many-digit numbers, with and without unit suffixes, alone and in
combinations whose product is too large: ``bench``'s spec either comes out valid, with what a step plans to
send within the bounds, or refuses with one line (a `ConfigError`). The same through the real command line
(a few, in a subprocess: exit 2, one line, no traceback, within seconds), and for the gateway's and the
simulator's configs.
"""

from __future__ import annotations

import contextlib
import math
import resource
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import run_cli
from tokometer.benchmark.spec import BenchSpec
from tokometer.benchmark.volume import record_bytes, step_cap, step_requests
from tokometer.cli.options import build_spec, parse_duration, parse_float_list, parse_int_list, parse_size
from tokometer.gateway.config import load_config
from tokometer.sim.config import SimConfig
from tokometer.util.errors import ConfigError
from tokometer.util.limits import MAX_STEP_RECORD_BYTES, MAX_STEP_REQUESTS, MAX_TOKENS

URL = "http://127.0.0.1:1/v1"

numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -1.0, 1e-300, 1e300, 5e-324, 2e9, 1e8, 0.5, 1.0, 7.0, 600.0]),
    st.integers(min_value=-(10**30), max_value=10**30).map(float),
)
counts = st.one_of(st.integers(min_value=-5, max_value=10**12), st.just(10**400), st.sampled_from([1, 8, 100, 10**6]))
texts = st.one_of(
    st.builds(lambda n, u: f"{n}{u}", st.one_of(st.integers(0, 10**12), st.just("9" * 400), st.just("1e400"),
                                               st.just("nan"), st.just("inf"), st.just("-1"), st.just("0.0001")),
              st.sampled_from(["", "s", "ms", "m", "h", "KiB", "MiB", "GiB", "x"])),
)


def _checked(values: dict[str, Any]) -> None:
    """Valid and within the bounds, or one line refusing it."""
    try:
        spec = build_spec(BenchSpec, url=URL, **values)
    except ConfigError as exc:
        assert "\n" not in str(exc) and str(exc), exc
        return
    for value in spec.model_dump().values():
        assert not (isinstance(value, float) and not math.isfinite(value)), spec
    planned = step_requests(spec)
    cap = step_cap(spec)
    assert planned is not None or cap is not None or spec.trace is not None
    count = planned[0] if planned is not None else (cap or 0) + spec.warmup
    assert count <= MAX_STEP_REQUESTS
    assert count * record_bytes(spec) <= MAX_STEP_RECORD_BYTES
    assert spec.input_tokens <= MAX_TOKENS


@settings(max_examples=60)
@given(rate=numbers, duration=numbers, requests=counts, warmup=counts, concurrency=counts, tokens=counts,
       output=counts, timeout=numbers)
def test_generated_bench_values_give_a_bounded_spec_or_one_line(rate: float, duration: float, requests: int,
                                                                warmup: int, concurrency: int, tokens: int,
                                                                output: int, timeout: float) -> None:
    _checked({"rate": [rate], "duration_s": duration, "warmup": warmup, "output_tokens": output})
    _checked({"requests": requests, "concurrency": [concurrency], "input_tokens": tokens,
              "request_timeout_s": timeout})
    _checked({"concurrency": [concurrency], "duration_s": duration, "output_tokens": output, "warmup": warmup})
    _checked({"rate": [rate], "requests": requests, "warmup": warmup})
    _checked({"find_max": "rate", "slo": "ttft_p99=2s", "search": "ramp", "ramp": "exponential", "ramp_from": 1.0,
              "rate": [rate], "ramp_time_s": duration})


@given(text=texts)
def test_generated_option_texts_parse_or_refuse_with_one_line(text: str) -> None:
    import click

    for parse in (parse_duration, parse_size, parse_float_list, parse_int_list):
        try:
            value = parse(text, "--option")
        except click.BadParameter as exc:
            assert "\n" not in exc.format_message()
            continue
        values = value if isinstance(value, list) else [value]
        assert all(isinstance(v, int) or math.isfinite(v) for v in values if v is not None), (parse, text)


@given(key=st.sampled_from(["ttft_ms", "itl_ms", "stall_s", "time_scale", "load_slowdown", "max_context",
                            "default_max_tokens", "max_num_seqs", "tokens_per_event"]), value=numbers)
def test_generated_simulator_values_are_bounded_or_refused(key: str, value: float) -> None:
    try:
        values: dict[str, Any] = {key: int(value) if key[:3] in ("max", "def", "tok") and math.isfinite(
            value) and abs(value) < 1e30 else value}
        config = build_spec(SimConfig, **values)
    except ConfigError as exc:
        assert "\n" not in str(exc)
        return
    assert math.isfinite(float(getattr(config, key)))


_GATEWAY = """
[[upstreams]]
name = "a"
url = "http://127.0.0.1:1/v1"
{upstream}
[[routes]]
model = "m"
upstreams = ["a"]
[server]
{server}
"""


@given(key=st.sampled_from(["total_timeout_s", "first_token_timeout_s", "idle_timeout_s", "connect_timeout_s",
                            "retry_backoff_s", "breaker_cooldown_s", "body_timeout_s", "body_idle_timeout_s",
                            "keep_alive_timeout_s", "max_connections"]),
       value=st.one_of(st.sampled_from(["nan", "inf", "-inf", "1e300", "1e-300", "0", "-1", "9" * 400, "5"]),
                       st.floats(allow_nan=False, allow_infinity=False).map(repr)))
def test_generated_gateway_values_pass_the_check_only_within_bounds(tmp_path_factory: Any, key: str,
                                                                   value: str) -> None:
    where = "server" if key.startswith(("body", "keep", "max")) else "upstream"
    line = f"{key} = {value}"
    path = tmp_path_factory.mktemp("g") / "gateway.toml"
    path.write_text(_GATEWAY.format(upstream=line if where == "upstream" else "",
                                    server=line if where == "server" else ""))
    try:
        config = load_config(path)
    except ConfigError as exc:
        assert "\n" not in str(exc), exc
        return
    number = float(tomllib.loads(f"x = {value}")["x"])
    section = config.server if where == "server" else config.upstreams[0]
    assert math.isfinite(number) and getattr(section, key) == number
    assert getattr(section, key) <= 604_800


CLI_CASES = [
    ("--rate", "1e8", "--duration", "5s"), ("-n", "2000000000", "--duration", "2s"), ("-c", "5000000"),
    ("--warmup", "2000000000"), ("--rate", "1e-300"), ("--rate", "inf"), ("--timeout", "9" * 400),
    ("--max-event-bytes", "9" * 400), ("--input-tokens", "2000000000"), ("--temperature", "nan"),
    ("--find-max", "rate", "--slo", "ttft_p99=2s", "--search", "ramp", "--ramp", "exponential", "--ramp-from", "1",
     "--ramp-time", "10s", "--rate", "1e9"),
    ("-n", "1000000", "--output-tokens", "100000"), ("--seed", "9" * 5000),
]


@pytest.mark.slow  # about 40 s in the parallel lane
def test_hostile_values_through_the_real_command_line_exit_2_with_one_line() -> None:
    for args in CLI_CASES:
        done = run_cli("bench", "--url", "http://127.0.0.1:9/v1", "--no-store", *args, timeout=30)
        assert done.returncode == 2, (args, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in done.stderr, (args, done.stderr)
        assert "nothing answers" not in done.stderr, (args, done.stderr)  # refused before any connection


OTHER_CASES = [
    ("estimate", "--model", "llama-3.1-8b", "--calibrate", "9" * 40),
    ("estimate", "--model", "llama-3.1-8b", "--hardware", "H100", "--batch", "9" * 40),
    ("top", "http://127.0.0.1:9/v1", "--once", "--interval", "9" * 400),
    ("top", "http://127.0.0.1:9/v1", "--once", "--window", "999999999s"),
    ("sim", "--port", "0", "--ttft-ms", "inf"), ("sim", "--port", "0", "--stall-s", "1e300"),
    ("sim", "--port", "0", "--max-context", "9" * 400), ("serve", "--dry-run", "--ready-timeout", "nan"),
    ("doctor", "--url", "http://127.0.0.1:9/v1", "--timeout", "1e400"), ("count", "hi", "--context", "9" * 30),
    ("quality", "http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1", "--min-agreement", "nan"),
]


def test_hostile_values_of_the_other_commands_exit_2_with_one_line() -> None:
    for args in OTHER_CASES:
        done = run_cli(*args, timeout=30)
        assert done.returncode == 2, (args, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr, (args, done.stderr)


def test_hostile_config_values_fail_the_gateway_check_with_one_line(tmp_path: Path) -> None:
    for line in ("total_timeout_s = 1e300", "idle_timeout_s = nan", "first_token_timeout_s = inf"):
        path = tmp_path / "g.toml"
        path.write_text(_GATEWAY.format(upstream=line, server=""))
        done = run_cli("gateway", "--config", str(path), "--check", timeout=30)
        assert done.returncode == 2, (line, done.stdout, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr


def test_refusing_huge_values_does_not_grow_memory() -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for values in ({"rate": [1e8], "duration_s": 5.0}, {"requests": 10**400}, {"concurrency": [5 * 10**6]},
                   {"input_tokens": 2 * 10**9}, {"warmup": 2 * 10**9}):
        for _ in range(50):
            with contextlib.suppress(ConfigError):
                build_spec(BenchSpec, url=URL, **values)
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 50 * 1024 * (1024 if sys.platform == "darwin" else 1), grown_kib


@given(value=st.sampled_from(["nan", "inf", "-inf", "-1", "1e300", "9" * 400, "1.5", "0"]))
def test_a_price_table_number_is_finite_and_bounded_or_one_line(tmp_path_factory: Any, value: str) -> None:
    from tokometer.tokens.pricing import PriceTable

    path = tmp_path_factory.mktemp("p") / "prices.toml"
    path.write_text(f'[models."m"]\ninput = {value}\noutput = 1\ncontext = {"9" * 400}\n')
    try:
        price = PriceTable.load(path, include_default=False).require("m")
    except ConfigError as exc:
        assert "\n" not in str(exc)
        return
    assert price.input is not None and math.isfinite(price.input) and price.context is None
