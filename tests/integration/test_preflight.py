"""The check request before a run: a wrong --api, URL or key fails in one line before anything is measured.

The server that speaks only OpenAI is a real `tokometer gateway` (it serves nothing but /v1/...) in
front of a real simulator; the CLI runs as users run it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import SimServer, run_cli, start_gateway
from tokometer.gateway.auth import hash_key


@pytest.fixture
def openai_only(sim_factory: Callable[..., SimServer], tmp_path: Path) -> Iterator[SimServer]:
    sim = sim_factory("--model", "m", "--ttft-ms", "1", "--itl-ms", "1")
    config = tmp_path / "gw.toml"
    config.write_text(f'[[upstreams]]\nname = "sim"\nurl = "{sim.openai_url}"\n[[routes]]\nmodel = "m"\n'
                      f'upstreams = ["sim"]\n[[keys]]\nname = "k"\nsha256 = "{hash_key("right-key")}"\n')
    gateway = start_gateway(config)
    yield gateway
    gateway.stop()


def _bench(*args: str, store: Path) -> tuple[int, str]:
    done = run_cli("bench", "-n", "2", "--input-tokens", "4", "--output-tokens", "4", "--tokenizer", "none",
                   "--store", str(store), *args)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stderr.strip()


def test_wrong_api_url_or_key_is_one_line_and_saves_nothing(openai_only: SimServer, tmp_path: Path) -> None:
    store = tmp_path / "runs.db"
    url = openai_only.openai_url
    code, err = _bench("--url", url, "--api", "tgi", "--api-key", "right-key", "--model", "m", store=store)
    assert code == 2 and "does not speak --api tgi; try --api openai-chat" in err, err
    code, err = _bench("--url", openai_only.root, "--api-key", "right-key", store=store)
    assert code == 2 and f"use --url {openai_only.root}/v1" in err, err
    code, err = _bench("--url", openai_only.root, "--api-key", "right-key", "--model", "m", store=store)
    assert code == 2 and f"use --url {openai_only.root}/v1" in err, err
    code, err = _bench("--url", url, "--model", "m", store=store)
    assert code == 2 and "wants an API key" in err and "--api-key" in err, err
    code, err = _bench("--url", url, "--model", "m", "--api-key", "wrong-key", store=store)
    assert code == 2 and "refused the API key" in err and "wrong-key" not in err, err
    assert len(err.splitlines()) == 1
    runs = run_cli("runs", "--store", str(store))
    assert runs.returncode == 0 and "No runs" in runs.stdout, runs.stdout + runs.stderr  # nothing was saved
    code, err = _bench("--url", url, "--model", "m", "--api-key", "right-key", store=store)
    assert code == 0, err


def test_server_errors_in_the_check_are_measured_not_refused(sim_factory: Callable[..., SimServer],
                                                              tmp_path: Path) -> None:
    sim = sim_factory("--fault", "http_500=1.0")
    out = tmp_path / "r.json"
    done = run_cli("bench", "--url", sim.openai_url, "-n", "3", "--input-tokens", "4", "--output-tokens", "4",
                   "--tokenizer", "none", "--no-store", "--json", str(out))
    assert done.returncode == 1, done.stderr  # the run happened; its requests failed
    result = json.loads(out.read_text())
    assert result["steps"][0]["summary"]["errors"] == {"http_5xx": 3}
    assert any("check request before the run failed (http_5xx" in w for w in result["warnings"])


def test_empty_url_is_named(tmp_path: Path) -> None:
    done = run_cli("bench", "--url", "", "--no-store")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "--url" in done.stderr and "empty" in done.stderr, done.stderr
