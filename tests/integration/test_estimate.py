"""``tokometer estimate`` from the command line: the tables, --explain, --target, --json, errors, --run."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import SimServer, bench_stored, require_llama_server, run_cli
from tokometer.cli.estimate import command as estimate
from tokometer.perf.roofline import Efficiency
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
    assert "206.0 → 123.1" in text  # batch 1, 1,500 tokens cached: bound → expected at 82.5 % + 32 × 70 µs
    data = json.loads(out.read_text())
    assert data["schema"] == "tokometer.estimate/1"
    assert [b["batch"] for b in data["estimate"]["batches"]] == [1, 8, 64]
    assert data["estimate"]["kv_bytes_per_token"] == 131_072


def test_the_estimate_says_how_far_it_has_been_from_published_figures(tmp_path: Path) -> None:
    """Its record on the kind asked about and on the deployment itself, counted from the published table; none
    at efficiencies given (the record is the typical ones')."""
    from tokometer.perf.published import KNOWN_MISSES

    out = tmp_path / "estimate.json"
    args = ["-m", "qwen3-30b-a3b", "-H", "B200", "--dtype", "nvfp4", "--kv-dtype", "fp8", "--json", str(out)]
    result = CliRunner(env=WIDE).invoke(estimate, args)
    assert result.exit_code == 0, result.output
    assert re.search(r"checked .* held out from fitting: mixture of experts at maximum load \d+ of \d+ within ±15 %",
                     result.output)
    assert re.search(r"this deployment \(qwen3-30b-a3b B200 TP1 nvfp4\): 16 figures \(held out\), \d+ within ±15 %",
                     result.output)
    check = json.loads(out.read_text())["estimate"]["published_check"]
    assert check["deployment"]["figures"] == 16 and check["deployment"]["split"] == "held-out"
    assert check["deployment"]["known_miss"] == KNOWN_MISSES["qwen3-30b-a3b B200 TP1 nvfp4"]
    assert check["kind"]["scope"] == "mixture of experts" and check["fixed_concurrency"]["figures"] > 0
    assert 0 < check["few_users"]["figures"] < check["fixed_concurrency"]["figures"]
    # the default batch (1) is a few users: the line says how the estimate has done there, and leans which way
    assert re.search(r"\(the batch rows\) \d+ of \d+ \(\d+ %\); at 1-5 users \d+ of \d+, the estimate "
                     r"(a median \d+ % (faster|slower)|within 0.5 % at the median)", result.output)
    wide = CliRunner(env=WIDE).invoke(estimate, [*args, "--batch", "64"])
    assert wide.exit_code == 0 and "users" not in wide.output.split("checked")[1].split("\n")[0]
    given = CliRunner(env=WIDE).invoke(estimate, [*args, "--bw-efficiency", "0.7"])
    assert given.exit_code == 0, given.output
    assert "checked" not in given.output and json.loads(out.read_text())["estimate"]["published_check"] is None


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
    # (0.268e9 × 2 B + 405,372 B of activations + 18,432 B × 105.5 tokens) / 10 ms / 100 GB/s = 53.8 %
    assert step["mbu"] == pytest.approx((536e6 + 405_372 + 18_432 * 105.5) / 0.010 / 100e9)
    assert step["bottleneck"] == "bandwidth" and "54%" in result.output and "bottleneck rule" in result.output
    # beside it, the closed loop of exactly that load: one user, 100 → 11 tokens
    loop = json.loads(out.read_text())["run_efficiency"]["closed_loop"][0]
    assert (loop["concurrency"], loop["input_tokens"], loop["output_tokens"]) == (1, 100, 11)
    assert loop["measured"]["itl_ms"] == pytest.approx(10) and loop["measured"]["ttft_ms"] == pytest.approx(100)
    assert "measured beside the estimate for the same concurrency and lengths" in result.output
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
    assert data["compute_dtype"] == "int8"  # llama.cpp's CPU kernels multiply Q4_K_M in 8-bit integers
    for name in ("mbu", "prefill_mfu"):  # an efficiency, or (over 100 %) a ratio said to mean a wrong peak
        assert (step[name] is not None and 0 < step[name] <= 1) or step["over_peak"][name]["ratio"] > 1
    assert step["prefill_source"] == "server prompt time" and step["decode_batch"] == pytest.approx(1.0)
    assert "MBU" in done.stdout and "bottleneck" in done.stdout


def _host_cache(cache: Path, matmul_gflops: float, torch_bf16_gflops: float, bandwidth_gbs: float) -> None:
    """A cached host measurement (`tokometer.perf.host`) with figures chosen by the test, for this very host."""
    from tokometer.util.hostinfo import host_info

    info = host_info()
    (cache / "tokometer").mkdir(parents=True)
    (cache / "tokometer" / "host-perf.json").write_text(json.dumps({
        "measured_at": "2026-01-01T00:00:00+00:00", **{k: info[k] for k in ("cpu_model", "physical_cores",
                                                                            "logical_cpus", "ram_bytes")},
        "bandwidth_gbs": bandwidth_gbs, "copy_gbs": bandwidth_gbs, "read_gbs": bandwidth_gbs,
        "matmul_gflops": matmul_gflops, "threads": 2, "array_mib": 128, "matmul_n": 1536, "clock_ghz": 2.0,
        "torch": {"bf16": torch_bf16_gflops, "fp16": torch_bf16_gflops, "torch": "test", "python": "test"}}))


@pytest.mark.timing  # its run must not be client-bound: beside the other lanes the event loop lagged 1.5 s
def test_a_run_beyond_the_host_peak_says_the_peak_is_wrong(tmp_path: Path,
                                                           sim_factory: Callable[..., SimServer]) -> None:
    """A real bench of ``tokometer sim`` (first token after 200 ms, then one every 40 ms: slow enough that the
    client keeps up on a loaded machine) judged as Llama-3.1-8B bf16 on a host whose cached measurement says
    1 GFLOP/s bf16 and 1 GB/s: prefill of ~2 × 7.5 B × 64 FLOPs in ≥ 200 ms and 16 GB read per 40 ms step are
    thousands of times those peaks, which no efficiency can be."""
    sim = sim_factory("--ttft-ms", "200", "--itl-ms", "40")
    db = tmp_path / "runs.db"
    run = bench_stored(db, "--url", sim.openai_url, "-c", "1", "-n", "3", "--input-tokens", "64",
                       "--output-tokens", "4", "-q")
    cache = tmp_path / "cache"
    _host_cache(cache, matmul_gflops=1.0, torch_bf16_gflops=1.0, bandwidth_gbs=1.0)
    env = {"XDG_CACHE_HOME": str(cache), "TOKOMETER_CALIBRATION": str(tmp_path / "calibration.json"), **WIDE}
    out = tmp_path / "eff.json"
    done = run_cli("estimate", "--run", str(run), "--store", str(db), "-m", "llama-3.1-8b", "-H", "host",
                   "--dtype", "bf16", "--json", str(out), env=env)
    assert done.returncode == 0, done.stderr
    data = json.loads(out.read_text())["run_efficiency"]
    assert data["compute_dtype"] == "bf16" and data["peak"]["basis"] == "measured" and data["peak"]["flops"] == 1e9
    step = data["steps"][0]
    assert step["prefill_mfu"] is None and step["mbu"] is None  # not efficiencies
    prefill = step["over_peak"]["prefill_mfu"]
    # the known truth: TTFT ≥ the sim's 200 ms, so the ratio is at most FLOPs / 200 ms / 1 GFLOP/s (and it is that
    # within the client's and the loaded machine's delays)
    from tokometer.perf import resolve_model
    from tokometer.perf.roofline import prefill_flops

    flops = prefill_flops(resolve_model("llama-3.1-8b"), int(step["prefill_tokens"]))
    assert step["prefill_tokens"] >= 64 and 0.200 <= step["prefill_s"] < 1.0
    assert prefill["ratio"] == pytest.approx(flops * step["prefill_concurrency"] / step["prefill_s"] / 1e9)
    assert flops / 1.0 / 1e9 < prefill["ratio"] <= flops / 0.200 / 1e9
    assert "— above 100 %: the host peak used (bf16, measured 1 GFLOP/s) is too low for this run" in prefill["message"]
    assert "--remeasure" in prefill["message"] and "--hardware-file" in prefill["message"]
    assert "(bandwidth, measured 1 GB/s) is too low" in step["over_peak"]["mbu"]["message"]
    text = done.stdout
    assert "above peak" in text and "the host peak used (bf16, measured 1 GFLOP/s) is too low" in text
    for line in text.splitlines():  # outside the lines that say so, no percentage above 100
        if "above" not in line:
            assert all(float(p.replace(",", "")) <= 100 for p in re.findall(r"([\d,.]+) ?%", line)), line

    assert step["bottleneck"] != "client", step["why"]  # else --calibrate has no sample
    done = run_cli("estimate", "--calibrate", str(run), "--store", str(db), "-m", "llama-3.1-8b", "-H", "host",
                   "--dtype", "bf16", env=env)
    assert done.returncode == 0, done.stderr
    typical = Efficiency().prefill_compute  # kept: a run above the peak says the peak is wrong, not the efficiency
    assert f"prefill compute {100 * typical:.0f}% (typical: the runs reached" in done.stdout.replace("\n", " ")
    stored = json.loads((tmp_path / "calibration.json").read_text())["host"]
    assert stored["efficiency"]["prefill_compute"] == typical and "prefill_compute" in stored["over_peak"]
    assert "is too low for them" in stored["over_peak"]["prefill_compute"]
