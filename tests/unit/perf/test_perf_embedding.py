"""``estimate --workload embed`` (`tokometer.perf.embedding`): an embedding pass is the prefill formula alone,
B sequences of T tokens with nothing cached, and the rates follow from its time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tokometer.cli.estimate import command as estimate
from tokometer.perf import Deployment, Efficiency, embedding_pass_s, prefill_s, resolve_hardware, resolve_model
from tokometer.perf.embedding import embedding_estimate
from tokometer.perf.roofline import BOUND

D = Deployment(resolve_model("llama-3.1-8b"), resolve_hardware("H100-SXM"), weight_dtype="bf16")


def test_a_pass_is_a_prefill_of_every_input_and_nothing_else() -> None:
    eff = Efficiency()
    assert embedding_pass_s(D, 8, 128, eff) == prefill_s(D, 8 * 128, 0, eff, sequences=8)
    assert embedding_pass_s(D, 8, 128, eff) < prefill_s(D, 1024, 0, eff)  # eight short attentions, not one long
    e = embedding_estimate(D, [1, 8, 64], 128, eff)
    small, mid, big = e.rows
    assert small.limiter == "bandwidth" and big.limiter == "compute"  # one short input: the weight read rules
    for row in e.rows:
        assert row.bound_s == embedding_pass_s(D, row.batch, 128, BOUND) < row.expected_s
        rates = row.rates(row.expected_s)
        assert rates["inputs_per_s"] == pytest.approx(row.batch * rates["requests_per_s"])
        assert rates["input_tok_s"] == pytest.approx(128 * rates["inputs_per_s"])
    # compute bound: flat but for the fixed per-layer cost of each pass, which a bigger pass shares out more
    flat = embedding_estimate(D, [8, 64], 128, Efficiency(layer_overhead_s=0.0)).rows
    assert flat[1].rates(flat[1].expected_s)["inputs_per_s"] == pytest.approx(
        flat[0].rates(flat[0].expected_s)["inputs_per_s"], rel=0.01)
    assert mid.expected_s == pytest.approx(flat[0].expected_s + 32 * eff.layer_overhead_s)
    assert big.expected_s == pytest.approx(flat[1].expected_s + 32 * eff.layer_overhead_s)


def test_cli_embed_workload_table_json_and_refusals(tmp_path: Path) -> None:
    out = tmp_path / "e.json"
    runner = CliRunner(env={"COLUMNS": "200"})
    done = runner.invoke(estimate, ["--workload", "embed", "-m", "llama-3.1-8b", "-H", "H100-SXM", "-b", "1,8",
                                    "--input-tokens", "128", "--json", str(out)])
    assert done.exit_code == 0, done.output
    assert "a prefill only" in done.output and "inputs/s" in done.output
    rows = json.loads(out.read_text())["estimate"]["batches"]
    assert [r["batch"] for r in rows] == [1, 8]
    assert rows[1]["pass_ms"]["expected"] == pytest.approx(embedding_pass_s(D, 8, 128, Efficiency()) * 1e3)
    refused = runner.invoke(estimate, ["--workload", "embed", "-m", "llama-3.1-8b", "-H", "H100-SXM", "--target", "5"])
    assert refused.exit_code == 2 and "--workload embed estimates passes" in refused.output
