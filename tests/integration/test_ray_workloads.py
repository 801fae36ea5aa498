"""Agent sessions and a tenant mix on a real two-node Ray cluster on this machine (tests/ray_cluster.py), against
the simulator: the actors deal out whole agent sessions (every turn once, numbered by its place in the trace)
and a mix's requests (each on the tenant one process gives it), as worker processes do."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import SimServer, require_ray, run_cli
from tests.ray_cluster import LocalRayCluster, start_local_cluster
from tokometer.datasets.agentic import read_agent_trace
from tokometer.records import RequestRecord
from tokometer.store import ResultStore

pytestmark = pytest.mark.slow

_QUIET = ("--no-check", "--tokenizer", "none", "--server-metrics", "off", "--gpu-metrics", "off", "-q")


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalRayCluster]:
    require_ray()
    started = start_local_cluster(nodes=2, cpus_per_node=1, object_store_mb=200)
    yield started
    started.stop()
    assert not started.processes(), "the test cluster's processes outlived it"


def _records(url: str, store: Path, *args: str) -> list[RequestRecord]:
    done = run_cli("bench", "--url", url, *_QUIET, "--store", str(store), *args, timeout=240)
    assert done.returncode == 0, done.stderr
    saved = ResultStore(f"sqlite:///{store}", read_only=True)
    try:
        return list(saved.load_records(int(saved.list_runs(1)[0]["id"])))
    finally:
        saved.close()


def test_agents_and_a_mix_are_shared_out_between_the_actors(
        cluster: LocalRayCluster, sim_factory: Callable[..., SimServer], tmp_path: Path) -> None:
    sim = sim_factory("--ttft-ms", "5", "--itl-ms", "1", "--lora", "adapter-a")
    agents = _records(sim.openai_url, tmp_path / "agents.db", "--agents", "example", "--output-tokens", "8",
                      "--ray", cluster.address)
    total = sum(len(s.turns) for s in read_agent_trace("example"))
    assert sorted(r.index for r in agents) == list(range(total))
    assert all(r.ok for r in agents) and {r.actor for r in agents} == {0, 1}
    mix = tmp_path / "mix.toml"
    mix.write_text('[[tenant]]\nname = "a"\nshare = 0.5\nmodel = "adapter-a"\n'
                   '[[tenant]]\nname = "b"\nshare = 0.5\ninput_tokens = 12\n')
    args = ("--mix", str(mix), "-c", "2", "-n", "24", "--seed", "9", "--output-tokens", "4")
    one = _records(sim.openai_url, tmp_path / "one.db", *args)
    ray = _records(sim.openai_url, tmp_path / "ray.db", *args, "--ray", cluster.address)
    tenants = {r.index: r.tenant for r in one}
    assert {r.index: r.tenant for r in ray} == tenants and len(tenants) == 24
    assert {r.actor for r in ray} == {0, 1}
