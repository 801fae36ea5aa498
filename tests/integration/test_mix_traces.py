"""A tenant mix whose tenants replay traces (``trace = FILE`` in a tenant's table) against the simulator serving
LoRA adapters (its log is the truth: which adapter each request asked for). Each traced tenant sends exactly its
trace's requests at the trace's own times, a tenant with a rate its own arrivals beside them over the trace's
span; the per-tenant blocks count each tenant's requests, in one process or shared by ``--workers``."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SimServer, run_cli
from tests.helpers import bench
from tokometer.benchmark.mixtrace import mix_timeline
from tokometer.benchmark.spec import BenchSpec

TRACE: list[dict[str, Any]] = [
    {"timestamp": t, "input_length": 40 + 8 * k, "output_length": 3 + k % 3, "hash_ids": [k % 2]}
    for k, t in enumerate((0, 40, 90, 150, 220, 400))]
SECOND = [{"timestamp": t, "input_length": 24, "output_length": 2} for t in (10, 300)]


def _mix(tmp_path: Path) -> dict[str, object]:
    first = tmp_path / "prod.jsonl"
    first.write_text("".join(json.dumps(e) + "\n" for e in TRACE))
    second = tmp_path / "batch.jsonl"
    second.write_text("".join(json.dumps(e) + "\n" for e in SECOND))
    return {"tenants": [
        {"name": "prod", "trace": str(first), "model": "adapter-a", "slo_ttft_ms": 5000},
        {"name": "batch", "trace": str(second), "model": "adapter-b"},
        {"name": "bg", "rate": 20.0, "input_tokens": 16, "output_tokens": 2}]}


@pytest.mark.parametrize("workers", [1, 2])
def test_each_tenant_sends_its_trace_at_its_times(sim_factory: Callable[..., SimServer], tmp_path: Path,
                                                  workers: int) -> None:
    sim = sim_factory("--ttft-ms", "3", "--itl-ms", "1", "--lora", "adapter-a,adapter-b")
    mix = _mix(tmp_path)
    result = bench(sim.openai_url, mix=mix, seed=4, tokenizer="none", workers=workers)
    (step,) = result.steps
    records = sorted(step.records, key=lambda r: r.index)
    assert all(r.ok for r in records)
    spec = BenchSpec(url=sim.openai_url, mix=mix, seed=4)
    offsets, order = mix_timeline(spec.mix, spec)  # type: ignore[arg-type]
    counts = Counter(r.tenant for r in records)
    assert counts == {"prod": len(TRACE), "batch": len(SECOND), "bg": round(20.0 * 0.4)}
    assert [r.tenant for r in records] == [spec.mix.tenants[k].name for k in order]  # type: ignore[union-attr]
    start = records[0].due_ns - offsets[0]
    assert [r.due_ns - start for r in records] == list(offsets)  # each at its time on the merged timeline
    prod = [r for r in records if r.tenant == "prod"]
    assert [r.due_ns - start for r in prod] == [e["timestamp"] * 1_000_000 for e in TRACE]
    assert [r.output_tokens for r in prod] == [e["output_length"] for e in TRACE]
    served = Counter(t["adapter"] for t in sim.trace())
    assert served == {"adapter-a": len(TRACE), "adapter-b": len(SECOND), None: counts["bg"]}
    block = step.summary.tenants
    assert block is not None
    assert {t["name"]: t["requests"] for t in block["tenants"]} == dict(counts)
    assert next(t for t in block["tenants"] if t["name"] == "prod")["slo_attainment"] == 1.0


@pytest.mark.parametrize(("tenants", "extra", "said"), [
    ('[[tenant]]\nname = "a"\ntrace = "t.jsonl"\nshare = 1\n', [], "a trace sends its requests at its own times"),
    ('[[tenant]]\nname = "a"\ntrace = "t.jsonl"\n[[tenant]]\nname = "b"\nshare = 1\n', [],
     "tenant 'b' gives a share, but a trace sets its tenant's traffic"),
    ('[[tenant]]\nname = "a"\ntrace = "t.jsonl"\n', ["-c", "2"], "the traces of --mix set the step's times"),
    ('[[tenant]]\nname = "a"\nshare = 1\n', ["--trace", "example"], "give each tenant its own trace"),
])
def test_a_trace_in_a_mix_refuses_what_means_nothing(tmp_path: Path, tenants: str, extra: list[str],
                                                     said: str) -> None:
    (tmp_path / "t.jsonl").write_text(json.dumps(TRACE[0]) + "\n")
    path = tmp_path / "mix.toml"
    path.write_text(tenants)
    done = run_cli("bench", "--url", "http://127.0.0.1:9/v1", "--mix", str(path), "--no-store", *extra)
    assert done.returncode == 2 and said in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
