"""Every bad input gets one line on stderr naming the option (or key) and the fix, and exit status 2.

Each case here once ended in a traceback, was accepted as nonsense (exit 0), or failed only after the
work was done (issue 10). The real command line runs in a subprocess, as a user runs it.
"""

from __future__ import annotations

import hashlib
import socket
from collections.abc import Callable
from pathlib import Path

import click
import pytest
from pydantic import ValidationError

from tests.conftest import RedisServer, SimServer, run_cli

URL = "http://127.0.0.1:9/v1"  # nothing answers there: a check that comes too late says so instead
LLAMA = ["--model", "llama-3.1-8b"]
VLLM = ["serve", "--dry-run", "--engine", "vllm", "--model", "llama-3.1-8b", "--gpu-memory-gb", "80"]
HUGE = "99999999999999999999"


def _refused(args: list[str], *fragments: str, env: dict[str, str] | None = None) -> str:
    """Run ``tokometer ARGS``: exit 2, one stderr line holding every fragment, no traceback; the line."""
    done = run_cli(*args, env=env)
    assert done.returncode == 2, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("tokometer: error: "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


@pytest.mark.parametrize(("args", "fragments"), [
    # tracebacks once
    (["runs", "--limit", HUGE], ["--limit", "1<=x<=1000000"]),
    (["runs", "--id", HUGE], ["--id"]),
    (["sim", "--port", "70000"], ["--port", "0<=x<=65535"]),
    (["sim", "--port", "-1"], ["--port", "0<=x<=65535"]),
    (["gateway", "--port", "99999"], ["--port", "0<=x<=65535"]),
    (["gateway", "--port", "-5"], ["--port", "0<=x<=65535"]),
    (["serve", "--port", "65536", "--dry-run"], ["--port", "0<=x<=65535"]),
    (["sim", "--log-level", "bogus"], ["--log-level", "'warning'", "'debug'"]),
    (["gateway", "--log-level", "bogus"], ["--log-level", "'warning'", "'debug'"]),
    # nonsense once accepted
    (["serve", "--dry-run", "--parallel", "-3"], ["--parallel", "1<=x<=100000"]),
    (["serve", "--dry-run", "--ctx-size", "-1"], ["--ctx-size", "1<=x<=16777216"]),
    (["serve", "--dry-run", "--ctx-size", "100"], ["--ctx-size 100", "at least 256 tokens per slot"]),
    ([*VLLM, "--max-model-len", "-1"], ["--max-model-len", "1<=x<=16777216"]),
    ([*VLLM, "--kv-cache-dtype", "bogus"], ["--kv-cache-dtype", "'auto'", "'fp8'"]),
    ([*VLLM, "--tensor-parallel-size", "3"], ["--tensor-parallel-size 3", "32 attention heads",
                                             "1, 2, 4, 8, 16, 32"]),
    ([*VLLM, "--tensor-parallel-size", "1000"], ["--tensor-parallel-size", "1<=x<=64"]),
    (["estimate", *LLAMA, "--target", "nan"], ["--target", "finite"]),
    (["estimate", *LLAMA, "--target", "-5"], ["--target", "0<x<="]),
    (["estimate", *LLAMA, "--hardware", "H100", "--tp", "1000"], ["--tp 1000", "at most 64",
                                                                   "1, 2, 4, 8, 16, 32"]),
    (["estimate", *LLAMA, "--hardware", "H100", "--tp", "3"], ["--tp 3", "1, 2, 4, 8, 16, 32"]),
    (["estimate", *LLAMA, "--hardware", "H100", "--pp", "1000"], ["--pp 1000", "32 layers"]),
    (["estimate", *LLAMA, "--hardware", "H100", "--bw-efficiency", "nan"], ["--bw-efficiency", "finite"]),
    (["sim", "--hardware", "H100", *LLAMA, "--tp", "3", "--port", "0"], ["--tp 3", "1, 2, 4, 8, 16, 32"]),
    (["bench", "--url", URL, "--temperature", "nan"], ["--temperature", "finite"]),
    (["bench", "--url", URL, "--temperature", "-1"], ["--temperature", "x>=0"]),
    (["bench", "--url", URL, "--synchronous", "-c", "4"], ["--synchronous", "--concurrency"]),
    (["bench", "--url", URL, "--synchronous", "--rate", "5"], ["--synchronous", "--rate"]),
    (["bench", "--url", URL, "--header", "X-A: 1\r\nX-Injected: 2"], ["--header", "header 1", "line break"]),
    (["bench", "--url", URL, "--header", "X-A: 1\nX-Injected: 2"], ["--header", "line break"]),
    (["bench", "--url", URL, "--header", "X-B: 1", "--header", "X A: 2"], ["--header", "header 2", "field name"]),
    # combinations that were accepted and silently wrong (issue 22 H)
    (["bench", "--url", URL, "--sessions", "2", "--prefix-tokens", "16"], ["--prefix-tokens", "--sessions"]),
    (["bench", "--url", URL, "--sessions", "2", "--prefix-groups", "3"], ["--prefix-groups", "--sessions"]),
    # a field's error names its flag, not the field (issue 24: once "--scrape-interval-s", "--ray-actors")
    (["bench", "--url", URL, "--scrape-interval", "10ms"], ["--scrape-interval: ", "0.05"]),
    # a key no header carries the same way to every server: refused, not a traceback per request (issue 22 F)
    (["bench", "--url", URL, "--api-key", "ключ"], ["--api-key", "non-ASCII", "the key is not shown"]),
    (["doctor", URL, "--api-key", "ключ"], ["--api-key", "non-ASCII"]),
    (["quality", URL, URL, "--api-key", "ключ"], ["--api-key", "non-ASCII"]),
    # help and usage
    (["bench", "--url", URL, "--api", "grpc"], ["--api", "'grpc'", "'openai-chat'", "'tgi'"]),
    (["runs", "5"], ["tokometer runs --id 5"]),
    (["runs", "x", "y"], ["runs takes no arguments"]),
    (["bench", "--nonsense"], ["No such option", "tokometer bench --help"]),
])
def test_bad_option_is_one_line(args: list[str], fragments: list[str]) -> None:
    _refused(args, *fragments)


def test_header_with_a_line_break_is_not_echoed() -> None:
    line = _refused(["bench", "--url", URL, "--header", "Authorization: Bearer sk-secret\r\nX: 1"], "--header")
    assert "sk-secret" not in line


def test_serve_dry_run_checks_the_model_file(tmp_path: Path) -> None:
    text = tmp_path / "notes.gguf"
    text.write_text("not a model\n")
    _refused(["serve", "--dry-run", "--model", str(text)], str(text), "not a GGUF file", ".gguf")
    _refused(["serve", "--dry-run", "--model", str(tmp_path / "missing.gguf")], "not found", "--model")
    _refused(["serve", "--dry-run", "--model", str(tmp_path)], "not found", "--model")  # a directory


def test_output_paths_are_checked_before_measuring(sim_factory: Callable[..., SimServer], tmp_path: Path) -> None:
    sim = sim_factory("--ttft-ms", "1", "--itl-ms", "1")
    store = tmp_path / "runs.db"
    run = ["bench", "--url", sim.openai_url, "-n", "2", "--input-tokens", "4", "--output-tokens", "2",
           "--store", str(store)]
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    _refused([*run, "--json", str(tmp_path)], "--json", "is a directory", str(tmp_path / "result.json"))
    _refused([*run, "--json", str(blocker / "out.json")], "--json", "is a file, not a directory")
    _refused([*run, "--csv", str(tmp_path)], "--csv", "is a directory")
    _refused(["estimate", *LLAMA, "--hardware", "H100", "--json", str(tmp_path)], "--json", "is a directory")
    assert not store.exists()  # refused before anything was measured or saved
    assert sim.trace() == []  # not one request was sent
    # a path in directories that do not exist yet is fine: the writer creates them
    done = run_cli(*run, "--json", str(tmp_path / "new" / "dir" / "out.json"), "--quiet")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "new" / "dir" / "out.json").is_file()


_BASE = '[[upstreams]]\nname = "a"\nurl = "http://127.0.0.1:9/v1"\n[[routes]]\nmodel = "m"\nupstreams = ["a"]\n'


def _gateway_check(tmp_path: Path, text: str, env: dict[str, str] | None = None,
                   *fragments: str) -> str:
    path = tmp_path / "g.toml"
    path.write_text(text)
    return _refused(["gateway", "--config", str(path), "--check"], *fragments, env=env)


def test_gateway_config_errors_name_the_key_or_variable(tmp_path: Path) -> None:
    line = _gateway_check(tmp_path, _BASE.replace("[[upstreams]]", "[[upstream]]"), None,
                          "unknown key 'upstream' (did you mean 'upstreams'?)")
    assert "Field required" not in line
    _gateway_check(tmp_path, _BASE + "[server]\nprot = 8000\n", None, "server: unknown key 'prot'",
                   "did you mean 'port'?")
    line = _gateway_check(tmp_path, _BASE, {"TOKOMETER_GATEWAY__SERVER__PORT": "abc"},
                          "TOKOMETER_GATEWAY__SERVER__PORT", "server.port", "valid integer")
    assert line.startswith("tokometer: error: TOKOMETER_GATEWAY__SERVER__PORT")  # the variable, not the file
    _gateway_check(tmp_path, _BASE, {"TOKOMETER_GATEWAY__CACHE__TTL": "5"}, "TOKOMETER_GATEWAY__CACHE__TTL",
                   "unknown key 'ttl'", "'ttl_s'")
    line = _gateway_check(tmp_path, _BASE + '[[keys]]\nname = "k"\nsha256 = "sk-my-raw-secret"\n', None,
                          "keys.0.sha256", "not a sha256 digest", "tokometer gateway --hash-key")
    assert "sk-my-raw-secret" not in line


def test_gateway_check_tries_the_log_path_and_redis(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    _gateway_check(tmp_path, _BASE + f'[log]\npath = "{tmp_path}"\n', None, "log.path", "is a directory",
                   "requests.jsonl")
    _gateway_check(tmp_path, _BASE + f'[log]\npath = "{blocker}/requests.jsonl"\n', None, "log.path",
                   "is a file, not a directory")
    for url, fragment in (("127.0.0.1:6379", "redis://"), ("redis://127.0.0.1:port/0", "Port"),
                          ("redis://127.0.0.1:6379/zero", "a number")):
        _gateway_check(tmp_path, _BASE + f'[cache]\nredis_url = "{url}"\n', None, "cache.redis_url", fragment)

    # a log in directories yet to be made is fine (the gateway makes them), and --check makes nothing
    later = tmp_path / "logs" / "today" / "requests.jsonl"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens there once the probe is closed
    path = tmp_path / "g.toml"
    path.write_text(_BASE + f'[log]\npath = "{later}"\n[cache]\nredis_url = "redis://127.0.0.1:{port}/0"\n')
    done = run_cli("gateway", "--config", str(path), "--check")
    assert done.returncode == 0, done.stderr
    assert "OK" in done.stdout and not (tmp_path / "logs").exists()
    # a Redis that does not answer now is a warning: the gateway runs on without it
    assert done.stderr.count("\n") == 1 and "warning: cache.redis_url: no Redis answers" in done.stderr


def test_gateway_check_refuses_wrong_redis_credentials(redis_server: RedisServer, tmp_path: Path) -> None:
    path = tmp_path / "g.toml"
    path.write_text(_BASE + f'[cache]\nredis_url = "{redis_server.url}"\n')
    done = run_cli("gateway", "--config", str(path), "--check")
    assert done.returncode == 0 and done.stderr == "", done.stderr  # it answers: no warning
    url = redis_server.url.replace("redis://", "redis://someone:wrong-password@")
    line = _gateway_check(tmp_path, _BASE + f'[cache]\nredis_url = "{url}"\n', None, "cache.redis_url",
                          "refused the credentials")
    assert "wrong-password" not in line


# ---- help: every option says what it is; the gateway's help is its config reference ----

def _commands() -> list[tuple[str, click.Command]]:
    from tokometer.cli import _COMMANDS, cli

    ctx = click.Context(cli)
    found = [(name, cli.get_command(ctx, name)) for name in sorted(_COMMANDS)]
    return [(name, command) for name, command in found if command is not None]


def test_every_option_of_every_command_has_help() -> None:
    from tokometer.cli import _COMMANDS

    commands = _commands()
    assert len(commands) == len(_COMMANDS)
    missing = [f"{name} {'/'.join(param.opts)}" for name, command in commands for param in command.params
               if isinstance(param, click.Option) and not param.hidden and not (param.help or "").strip()]
    assert missing == []


def test_choice_lists_are_the_libraries_own() -> None:
    import uvicorn.config

    from tokometer.cli.options import LOG_LEVELS
    from tokometer.engines.vllm import KV_CACHE_DTYPES
    from tokometer.protocols.registry import PROTOCOLS

    assert list(LOG_LEVELS) == list(uvicorn.config.LOG_LEVELS)
    choices = {(name, param.name): list(param.type.choices) for name, command in _commands()
               for param in command.params if isinstance(param.type, click.Choice)}
    assert choices["bench", "api"] == sorted(PROTOCOLS)
    assert choices["serve", "kv_cache_dtype"] == list(KV_CACHE_DTYPES)
    assert choices["sim", "log_level"] == choices["gateway", "log_level"] == list(LOG_LEVELS)


def test_gateway_help_is_a_config_reference() -> None:
    from tokometer.gateway.config import GatewayConfig, submodel

    done = run_cli("gateway", "--help")
    assert done.returncode == 0
    assert "Example config" in done.stdout and 'url = "http://127.0.0.1:8000/v1"' in done.stdout
    for section, field in GatewayConfig.model_fields.items():
        model = submodel(field.annotation)
        assert model is not None
        assert f"[{section}]" in done.stdout
        for key in model.model_fields:
            assert f"\n  {key}" in done.stdout, (section, key)
    assert "TOKOMETER_GATEWAY__" in done.stdout


def test_the_example_config_loads(tmp_path: Path) -> None:
    from tokometer.gateway.config import EXAMPLE_CONFIG, load_config

    path = tmp_path / "example.toml"
    digest = hashlib.sha256(b"a secret").hexdigest()
    path.write_text(EXAMPLE_CONFIG.replace("<what 'tokometer gateway --hash-key' prints>", digest))
    config = load_config(path, {})
    assert [u.name for u in config.upstreams] == ["primary", "backup"] and config.keys[0].sha256 == digest


def test_bench_spec_refuses_what_the_cli_refuses() -> None:
    """The library checks too: a BenchSpec built in code gets the same refusals."""
    from tokometer.benchmark.spec import BenchSpec

    for bad in ({"headers": {"X-A": "1\r\nX-B: 2"}}, {"headers": {"X-A\n": "1"}}, {"headers": {"X A": "1"}},
                {"temperature": float("nan")}, {"temperature": -0.5},
                {"synchronous": True, "concurrency": [4]}, {"synchronous": True, "rate": [2.0]}):
        with pytest.raises(ValidationError):
            BenchSpec.model_validate({"url": URL, **bad})
    assert BenchSpec(url=URL, headers={"X-A": "1"}, temperature=0.7, synchronous=True).synchronous
