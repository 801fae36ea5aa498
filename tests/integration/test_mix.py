"""Tenants and adapters in one run (``bench --mix``) against the simulator serving LoRA adapters (its trace
is the truth: which adapter each request asked for, and whether it had to be loaded), and against a raw server
that records the request heads (a tenant's headers)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SimServer, bench_stored, run_cli
from tests.helpers import bench
from tests.http_servers import RawServer
from tokometer.store import ResultStore

SWITCH_MS = 300.0
TTFT_MS = 20.0
MIX = {"tenants": [
    {"name": "base", "share": 0.5, "input_tokens": 16, "output_tokens": 4, "slo_ttft_ms": 150},
    {"name": "a", "share": 0.25, "model": "adapter-a", "input_tokens": 24, "output_tokens": 6, "slo_ttft_ms": 150},
    {"name": "b", "share": 0.15, "model": "adapter-b", "input_tokens": 16, "output_tokens": 4, "slo_e2e_ms": 5000},
    {"name": "ghost", "share": 0.10, "model": "adapter-z", "input_tokens": 16, "output_tokens": 4}]}
MODELS = {"base": None, "a": "adapter-a", "b": "adapter-b", "ghost": "adapter-z"}


def _lora_sim(sim_factory: Callable[..., SimServer]) -> SimServer:
    return sim_factory("--ttft-ms", str(TTFT_MS), "--itl-ms", "2", "--lora", "adapter-a,adapter-b", "--max-loras",
                       "1", "--lora-switch-ms", str(SWITCH_MS))


def test_each_request_goes_to_its_tenants_model_and_is_counted_for_it(sim_factory: Callable[..., SimServer]) -> None:
    sim = _lora_sim(sim_factory)
    listed = json.loads(sim.call("/v1/models"))["data"]
    assert [m["id"] for m in listed] == ["sim-model", "adapter-a", "adapter-b"]  # as vLLM lists them
    result = bench(sim.openai_url, mix=MIX, concurrency=[1], requests=40, seed=11)
    records = sorted(result.steps[0].records, key=lambda r: r.index)
    trace = sim.trace()
    assert len(trace) == len(records) == 40
    # one at a time: the n-th request the simulator got is the n-th sent; each asked for its tenant's model
    for record, served in zip(records, trace, strict=True):
        assert record.tenant is not None
        wanted = MODELS[record.tenant]
        if wanted == "adapter-z":  # not served: vLLM's 404, an error of that tenant's
            assert served["status"] == 404 and record.error == "http_404", served
            continue
        assert served["adapter"] == wanted and record.ok, (record.tenant, served)
    counts = Counter(r.tenant for r in records)
    assert set(counts) == set(MODELS)
    block = result.steps[0].summary.tenants
    assert block is not None
    by_name = {t["name"]: t for t in block["tenants"]}
    assert [t["name"] for t in block["tenants"]] == ["base", "a", "b", "ghost"]  # the mix's order
    for name, n in counts.items():
        assert by_name[name]["requests"] == n
    assert by_name["ghost"]["failed"] == counts["ghost"] and by_name["ghost"]["errors"] == {"http_404": counts["ghost"]}
    assert by_name["ghost"]["slo_attainment"] is None  # no SLO: not judged
    # each tenant's own prompt and answer lengths, as the simulator counted them
    for record, served in zip(records, trace, strict=True):
        if record.ok:
            tenant = next(t for t in MIX["tenants"] if t["name"] == record.tenant)
            assert served["prompt_tokens"] >= tenant["input_tokens"] and record.output_tokens == tenant["output_tokens"]
    # the same seed, the same assignment
    again = bench(sim.openai_url, mix=MIX, concurrency=[1], requests=40, seed=11)
    assert [r.tenant for r in sorted(again.steps[0].records, key=lambda r: r.index)] == [r.tenant for r in records]


@pytest.mark.timing
def test_per_tenant_ttft_holds_the_adapter_switches(sim_factory: Callable[..., SimServer]) -> None:
    """Base requests never pay for an adapter; an adapter request pays SWITCH_MS when the simulator had to load
    its adapter (one slot, two adapters: each switch). The client's TTFT of each request against the truth."""
    sim = _lora_sim(sim_factory)
    mix = {"tenants": [t for t in MIX["tenants"] if t["name"] != "ghost"]}
    mix["tenants"][2] = {**mix["tenants"][2], "share": 0.25}
    result = bench(sim.openai_url, mix=mix, concurrency=[1], requests=30, seed=4)
    records = sorted(result.steps[0].records, key=lambda r: r.index)
    trace = sim.trace()
    loaded = [bool(t["adapter_loaded"]) for t in trace]
    assert any(loaded) and not all(loaded)
    for record, switched in zip(records, loaded, strict=True):
        ttft_ms = (record.first_token_ns - record.sent_ns) / 1e6
        truth = TTFT_MS + (SWITCH_MS if switched else 0.0)
        assert truth <= ttft_ms < truth + 120, (record.tenant, switched, ttft_ms)
    block = result.steps[0].summary.tenants
    assert block is not None
    by_name = {t["name"]: t for t in block["tenants"]}
    assert by_name["base"]["ttft_ms"]["max"] < TTFT_MS + 120 and by_name["base"]["slo_attainment"] == 1.0
    for name, model in (("a", "adapter-a"), ("b", "adapter-b")):
        switches = sum(1 for t in trace if t["adapter"] == model and t["adapter_loaded"])
        expected = (TTFT_MS * by_name[name]["completed"] + SWITCH_MS * switches) / by_name[name]["completed"]
        assert by_name[name]["ttft_ms"]["mean"] == pytest.approx(expected, abs=60), name


def test_a_tenants_headers_go_with_its_requests_only() -> None:
    answer = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 61\r\n\r\n"
              b'data: {"choices":[{"delta":{"content":"a"}}]}\n\ndata: [DONE]\n\n')
    server = RawServer(lambda conn: conn.sendall(answer), close_after=False)
    server.start()
    mix = {"tenants": [{"name": "plain", "share": 0.5},
                       {"name": "acme", "share": 0.5, "headers": {"x-tenant": "acme",
                                                                 "authorization": "Bearer tenant-key"}}]}
    try:
        result = bench(server.url, model="m", api_key="run-key", mix=mix, concurrency=[1], requests=12,
                       input_tokens=4, output_tokens=4, tokenizer="none", seed=2, server_metrics="off")
    finally:
        server.stop()
    records = sorted(result.steps[0].records, key=lambda r: r.index)
    assert len(server.heads) == len(records) == 12
    for record, head in zip(records, server.heads, strict=True):
        lines = [line.lower() for line in head.split(b"\r\n")]
        auth = [line for line in lines if line.startswith(b"authorization:")]
        if record.tenant == "acme":  # the tenant's key over the run's, sent once (names matched without case)
            assert b"x-tenant: acme" in lines and auth == [b"authorization: bearer tenant-key"], lines
        else:
            assert not any(line.startswith(b"x-tenant:") for line in lines)
            assert auth == [b"authorization: bearer run-key"]


@pytest.mark.slow  # about 55 s in the parallel lane
def test_the_cli_saves_tenants_and_compare_matches_them_by_name(sim_factory: Callable[..., SimServer],
                                                                  tmp_path: Path) -> None:
    sim = _lora_sim(sim_factory)
    mix = tmp_path / "mix.toml"
    mix.write_text('[[tenant]]\nname = "base"\nshare = 0.6\ninput_tokens = 16\noutput_tokens = 4\n'
                   'slo_ttft_ms = 400\n\n[[tenant]]\nname = "a"\nshare = 0.4\nmodel = "adapter-a"\n'
                   'input_tokens = 16\noutput_tokens = 4\nheaders = { "Authorization" = "Bearer sk-secret" }\n',
                   encoding="utf-8")
    store = tmp_path / "runs.db"
    out = tmp_path / "out.json"
    first = bench_stored(store, "--url", sim.openai_url, "--mix", str(mix), "-c", "2", "-n", "30", "--seed", "3",
                         "--json", str(out), "--csv", str(tmp_path / "out.csv"))
    second = bench_stored(store, "--url", sim.openai_url, "--mix", str(mix), "-c", "2", "-n", "30", "--seed", "4")
    saved = json.loads(out.read_text())
    block: dict[str, Any] = saved["steps"][0]["summary"]["tenants"]
    assert [t["name"] for t in block["tenants"]] == ["base", "a"]
    assert saved["spec"]["mix"]["tenants"][1]["headers"] == {"Authorization": "<redacted>"}
    assert "sk-secret" not in out.read_text()
    csv_text = (tmp_path / "out.csv").read_text()
    assert ",tenant base," in csv_text and ",tenant a," in csv_text
    stored = ResultStore(f"sqlite:///{store}", read_only=True)
    try:
        run = stored.run(first)
        records = stored.load_records(first)
    finally:
        stored.close()
    assert run is not None and run.steps[0].summary is not None and run.steps[0].summary.tenants == block
    assert Counter(r.tenant for r in records) == Counter({t["name"]: t["requests"] for t in block["tenants"]})
    done = run_cli("compare", str(first), str(second), "--store", str(store), "--json")
    assert done.returncode in (0, 1), done.stderr
    compared = json.loads(done.stdout)
    assert [s["tenant"] for s in compared["steps"]] == [None, "base", "a"]
    console = run_cli("compare", str(first), str(second), "--store", str(store))
    assert "Concurrency 2, tenant base (" in console.stdout and "Concurrency 2, tenant a (" in console.stdout
    shown = run_cli("bench", "--url", sim.openai_url, "--mix", str(mix), "-c", "1", "-n", "6", "--no-store")
    assert shown.returncode == 0 and "tenants (each against its own SLO)" in shown.stdout
    assert "all tenants" in shown.stdout


@pytest.mark.parametrize(("text", "said"), [
    ('[[tenant]]\nname="a"\nshare=0.5\n', "the shares add up to 0.5"),
    ('[[tenant]]\nname="a"\nshare=1\nmodle="x"\n', "tenant 1 ('a'): modle: unknown key"),
])
def test_a_bad_mix_file_is_one_line_and_exit_2(tmp_path: Path, text: str, said: str) -> None:
    mix = tmp_path / "mix.toml"
    mix.write_text(text, encoding="utf-8")
    done = run_cli("bench", "--url", "http://127.0.0.1:9/v1", "--mix", str(mix), "--no-store")
    assert done.returncode == 2 and said in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
