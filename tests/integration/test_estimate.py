"""``tokometer estimate`` from the command line: the tables, --explain, --target, --json, errors, --run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import require_llama_server, run_cli
from tokometer.cli.estimate import command as estimate
from tokometer.records import RequestRecord, ServerTiming
from tokometer.store import ResultStore

MS = 1_000_000
WIDE = {"COLUMNS": "200"}


def test_the_issues_example(tmp_path: Path) -> None:
    out = tmp_path / "estimate.json"
    result = CliRunner(env=WIDE).invoke(estimate, [
        "--model", "llama-3.1-8b", "--hardware", "H100-SXM", "--dtype", "bf16", "--batch", "1,8,64",
        "--input-tokens", "1000", "--output-tokens", "1000", "--json", str(out)])
    assert result.exit_code == 0, result.output
    text = result.output
    assert "llama-3.1-8b bf16 (KV bf16) on 1 × H100-SXM" in text
    assert "hardware: NVIDIA H100 datasheet" in text
    assert "weights   16.06 GB (14.96 GiB) in bf16" in text
    assert "128.0 KiB per token" in text and "450,911 tokens fit" in text
    assert "4.79 ms → 208.6 tok/s at most" in text
    assert "206.1 → 123.6" in text  # batch 1, 1,500 tokens cached: bound → expected at 60 %
    data = json.loads(out.read_text())
    assert data["schema"] == "tokometer.estimate/1"
    assert [b["batch"] for b in data["estimate"]["batches"]] == [1, 8, 64]
    assert data["estimate"]["kv_bytes_per_token"] == 131_072


def test_explain_and_target() -> None:
    runner = CliRunner(env=WIDE)
    explained = runner.invoke(estimate, ["-m", "llama-3.1-8b", "-H", "h100", "--explain"])
    assert explained.exit_code == 0, explained.output
    assert "Weights: 8.03 B params × 2 B (bf16) = 16.06 GB = 14.96 GiB." in explained.output
    assert "Turning point" in explained.output
    target = runner.invoke(estimate, ["-m", "llama-3.1-8b", "--target", "14000"])
    assert target.exit_code == 0, target.output
    assert "What would it take to see 14,000 tok/s" in target.output
    assert "1,000 tokens take 0.071 s" in target.output
    assert "does not reach it" in target.output  # per request: no single request gets there
    assert "B200" in target.output and "In aggregate" in target.output
    listed = runner.invoke(estimate, ["--list-hardware", "--list-models"])
    assert "NVIDIA H100 datasheet" in listed.output and "deepseek-v3" in listed.output


def test_unknown_names_are_one_line_with_close_matches() -> None:
    done = run_cli("estimate", "--model", "llama-3.1-9b", "--hardware", "H100")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "did you mean llama-3.2-1b, llama-3.1-8b" in done.stderr
    done = run_cli("estimate", "--model", "llama-3.1-8b", "--hardware", "H1000")
    assert done.returncode == 2 and "unknown hardware 'H1000': did you mean H100-SXM" in done.stderr
    done = run_cli("estimate", "--model", "llama-3.1-8b")
    assert done.returncode == 2 and "--hardware is required" in done.stderr


def _synthetic_run(path: Path) -> None:
    store = ResultStore(f"sqlite:///{path}")
    run = store.create_run(target="http://127.0.0.1:8000/v1", api="openai-chat", model="m", spec={}, engine=None,
                           host=None)
    store.start_step(run, 0, {"concurrency": 1})
    for i in range(3):
        sent = i * 500 * MS
        first, last = sent + 100 * MS, sent + 200 * MS
        store.append(run, RequestRecord(
            index=i, sent_ns=sent, first_token_ns=first, last_token_ns=last, end_ns=last + MS,
            event_ns=[first + k * 10 * MS for k in range(11)], event_tokens=[1.0] * 11, input_tokens=100,
            output_tokens=11, status=200, finish_reason="length",
            server=ServerTiming(prompt_tokens=100, prompt_ms=80, decode_tokens=10, decode_ms=100)))
    store.finish_step(run, 0, {}, {"saturated": False}, False)
    store.finish_run(run, "completed")
    store.close()


def test_efficiency_of_a_saved_run(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    _synthetic_run(db)
    hw = tmp_path / "hw.toml"
    hw.write_text('[[hardware]]\nname = "box"\nkind = "cpu"\nmemory_gb = 16\nbandwidth_gbs = 100\n'
                  'bf16_tflops_dense = 1\nsource = "made up"\n')
    out = tmp_path / "eff.json"
    runner = CliRunner(env=WIDE)
    result = runner.invoke(estimate, ["--run", "1", "--store", str(db), "-m", "gemma-3-270m", "-H", "box",
                                      "--hardware-file", str(hw), "--json", str(out)])
    assert result.exit_code == 0, result.output
    step = json.loads(out.read_text())["run_efficiency"]["steps"][0]
    # (0.268e9 × 2 B + 18,432 B × 105.5 tokens) / 10 ms / 100 GB/s = 53.8 %
    assert step["mbu"] == pytest.approx((536e6 + 18_432 * 105.5) / 0.010 / 100e9)
    assert step["bottleneck"] == "bandwidth" and "54%" in result.output and "bottleneck rule" in result.output
    missing = runner.invoke(estimate, ["--run", "1", "--store", str(db)])
    assert missing.exit_code != 0 and "--model is required for run 1" in str(missing.exception)


@pytest.mark.engine
def test_efficiency_of_an_embedded_engine_run(tmp_path: Path) -> None:
    require_llama_server()
    db = tmp_path / "runs.db"
    done = run_cli("bench", "-c", "1", "-n", "2", "--input-tokens", "32", "--output-tokens", "16", "--store",
                   str(db), "-q", timeout=300)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "eff.json"
    # no --model / --hardware: the run's GGUF file on this host (measured into a fresh cache dir)
    done = run_cli("estimate", "--run", "1", "--store", str(db), "--json", str(out),
                   env={"XDG_CACHE_HOME": str(tmp_path / "cache"), **WIDE})
    assert done.returncode == 0, done.stderr
    data = json.loads(out.read_text())["run_efficiency"]
    assert data["hardware"] == "host" and data["weight_dtype"] == "Q4_K_M" and data["kv_dtype"] == "fp16"
    assert data["weight_bytes"] == 246_587_904
    step = data["steps"][0]
    assert 0 < step["mbu"] < 1.5 and 0 < step["prefill_mfu"] < 1.5
    assert step["prefill_source"] == "server prompt time" and step["decode_batch"] == pytest.approx(1.0)
    assert "MBU" in done.stdout and "bottleneck" in done.stdout
