"""--kv-free-fraction: the KV cache sized as TensorRT-LLM sizes it (a share of the memory the weights leave), beside
vLLM's share of the whole (--gpu-memory-utilization). Numbers worked by hand for Llama 3.1 70B in fp8 on one 80 GB
H100, where the two rules part most (the weights nearly fill the GPU)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tokometer.cli import main
from tokometer.cli.estimate import command as estimate
from tokometer.perf import Deployment, resolve_hardware, resolve_model
from tokometer.perf.target import reach_target
from tokometer.util.errors import ConfigError
from tokometer.util.units import GIB

TOKENS = 128 + 2048


@pytest.fixture(autouse=True)
def _own_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # no stored calibration


def _d() -> Deployment:
    return Deployment(resolve_model("llama-3.1-70b"), resolve_hardware("H100-SXM"), "fp8", "fp8")


def test_the_share_of_free_memory_by_hand() -> None:
    d = _d()
    weights = d.weight_bytes_per_gpu / GIB  # 67.66 GiB of fp8 weights (and the bf16 embeddings and head)
    assert 67.6 < weights < 67.7
    # (0.95 × (80 − W − 2) + W + 2) / 80: the whole-memory share that leaves the cache 0.95 of what is free
    share = d.utilization_for_free_share(0.95)
    assert share == pytest.approx((0.95 * (80 - weights - 2) + weights + 2) / 80)
    assert d.kv_budget_bytes(share) / GIB == pytest.approx(0.95 * (80 - weights - 2), abs=1e-6)
    # 160 KiB a token: 9.82 GiB holds 64,364 tokens, 29 sequences of 2,176; vLLM's rule at 0.9 holds 7
    assert (d.kv_sequences(TOKENS, share), d.kv_sequences(TOKENS, 0.9)) == (29, 7)
    # a share of the whole never passes 1, and weights that do not fit leave no room under either rule
    big = Deployment(resolve_model("llama-3.1-405b"), resolve_hardware("H100-SXM"), "fp8", "fp8")
    assert big.utilization_for_free_share(0.95) == 1.0 and big.kv_sequences(TOKENS, 1.0) == 0
    for bad in (0.0, 1.5, -0.1):
        with pytest.raises(ConfigError, match="share of the free memory"):
            d.utilization_for_free_share(bad)


def test_the_cli_sizes_the_cache_by_it_and_says_so(tmp_path: Path) -> None:
    out = tmp_path / "e.json"
    args = ["-m", "llama-3.1-70b", "-H", "H100", "--dtype", "fp8", "--input-tokens", "128", "--output-tokens",
            "2048", "-b", "1,16"]
    shown = CliRunner().invoke(estimate, [*args, "--kv-free-fraction", "0.95", "--explain", "--json", str(out)])
    assert shown.exit_code == 0, shown.output
    assert "0.95 of the memory the weights leave: 0.994 of all of it): 29 sequences of 2,176" in shown.output
    assert "× 0.95 (the share of free memory given, TensorRT-LLM's kv_cache_free_gpu_mem_fraction)" in shown.output
    doc = json.loads(out.read_text())["estimate"]
    assert doc["kv_free_fraction"] == 0.95 and doc["max_sequences"] == 29
    assert doc["gpu_memory_utilization"] == pytest.approx(_d().utilization_for_free_share(0.95))
    assert doc["max_load"]["batch"] == 29
    plain = CliRunner().invoke(estimate, [*args, "--json", str(out)])
    assert plain.exit_code == 0 and json.loads(out.read_text())["estimate"]["kv_free_fraction"] is None
    assert json.loads(out.read_text())["estimate"]["max_sequences"] == 7


def test_two_rules_at_once_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["estimate", "-m", "llama-3.1-70b", "-H", "H100", "--kv-free-fraction", "0.9",
              "--gpu-memory-utilization", "0.8"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "give one" in err and "Traceback" not in err


def test_target_sizes_each_deployment_by_it() -> None:
    model, h100 = resolve_model("llama-3.1-70b"), resolve_hardware("H100-SXM")
    whole = reach_target(model, 100_000, [h100], ["fp8"], input_tokens=128, output_tokens=2048)
    free = reach_target(model, 100_000, [h100], ["fp8"], input_tokens=128, output_tokens=2048,
                        kv_free_fraction=0.95)
    # the fastest single request on one GPU: the same speed, the room each rule leaves
    assert whole.best_single_gpu is not None and free.best_single_gpu is not None
    assert (whole.best_single_gpu.max_sequences, free.best_single_gpu.max_sequences) == (7, 29)
    # every option is sized by the rule: none holds fewer sequences with the engine's share of free memory
    rooms = {o.deployment.tp: o.max_sequences for o in whole.options}
    assert all(o.max_sequences >= rooms[o.deployment.tp] for o in free.options)
