"""``bench --find-max concurrency`` with few requests a probe, against the scripted simulator on loopback.

A probe of ``-n 8`` never has more than 8 requests in flight, whatever concurrency it asks for: the search
once answered "32768 concurrent requests" from probes that each sent 8. It must answer no more than the
concurrency its probes reached, and a first probe the budget cannot reach is refused before anything is sent.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import SimServer, run_cli


@pytest.fixture
def quick(sim_factory: Callable[..., SimServer]) -> SimServer:
    return sim_factory("--ttft-ms", "5", "--itl-ms", "1")


def _bench(sim: SimServer, tmp_path: Path, *args: str) -> tuple[int, str, str]:
    done = run_cli("bench", "--url", sim.openai_url, "--input-tokens", "8", "--output-tokens", "4", "--no-store",
                   "--json", str(tmp_path / "result.json"), "--slo", "ttft_p99=30s", *args, timeout=300)
    return done.returncode, done.stdout, done.stderr


def test_a_small_budget_never_claims_a_concurrency_it_did_not_reach(quick: SimServer, tmp_path: Path) -> None:
    code, out, err = _bench(quick, tmp_path, "--find-max", "concurrency", "-n", "8")
    assert code == 0, out + err
    search = json.loads((tmp_path / "result.json").read_text())["find_max"]
    loads = [p["load"] for p in search["probes"]]
    assert max(loads) <= 8, loads  # it used to double on to 32,768
    assert search["best"] is not None and search["best"] <= 8, search
    assert search["ceiling"] == 8
    assert "the most its requests can hold in flight" in search["answer"], search["answer"]
    for step in json.loads((tmp_path / "result.json").read_text())["steps"]:
        assert step["summary"]["achieved_concurrency"] <= 8


def test_a_first_probe_the_budget_cannot_reach_is_refused_up_front(quick: SimServer, tmp_path: Path) -> None:
    code, out, err = _bench(quick, tmp_path, "--find-max", "concurrency", "-c", "16", "-n", "8")
    assert code == 2, out + err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "never has more than 8 in flight" in err, err
    assert not (tmp_path / "result.json").exists()
