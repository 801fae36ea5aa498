"""A tune's vLLM variant started for real: vLLM's CPU build with ``max-num-seqs=2`` and chunked prefill off; and
a whole tune of it (max-num-seqs 1 against 4), the baseline run again at the end.

The first test is one engine start (vLLM's start takes minutes on a small CPU), the second three, one after
another: each its own vLLM, not the directory's shared one, which the file before this one (in name order) has
killed by then, so two are never up at once.
"""

from __future__ import annotations

import json
from pathlib import Path

import psutil
import pytest

from tests.conftest import run_cli
from tests.vllm.conftest import MAX_MODEL_LEN, START_TIMEOUT_S, TEST_VLLM_ARGS, require_vllm
from tokometer.engines.ready import http_json
from tokometer.tune.launch import LaunchOptions, start_variant
from tokometer.tune.outcome import Variant


def _group(leader: int) -> list[psutil.Process]:
    """The engine's leader (the reaper) and every process under it (vLLM's API server, engine core, workers)."""
    process = psutil.Process(leader)
    return [process, *process.children(recursive=True)]


def _running(process: psutil.Process) -> bool:
    """Still running (a zombie waiting for its parent to reap it has stopped)."""
    try:
        return bool(process.is_running() and process.status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def test_a_vllm_variant_starts_with_its_scheduler_settings_on_its_command_line() -> None:
    require_vllm()
    eager = {arg.removeprefix("--"): "" for arg in TEST_VLLM_ARGS}
    settings = {"max-num-seqs": "2", "enable-chunked-prefill": "off", "max-num-batched-tokens": str(MAX_MODEL_LEN),
                "max-model-len": str(MAX_MODEL_LEN), "kv-cache-gb": "1", **eager}
    variant = Variant(1, "max-num-seqs=2,enable-chunked-prefill=off", settings,
                      ("max-num-seqs", "enable-chunked-prefill"))
    with start_variant(variant, LaunchOptions(engine="vllm", ready_timeout_s=START_TIMEOUT_S)) as launched:
        argv = launched.command_line
        assert argv[argv.index("--max-num-seqs") + 1] == "2"
        assert "--no-enable-chunked-prefill" in argv and "--enable-chunked-prefill" not in argv
        assert argv[argv.index("--max-model-len") + 1] == str(MAX_MODEL_LEN) and "--enforce-eager" in argv
        assert launched.handle.identity["env"]["VLLM_CPU_KVCACHE_SPACE"] == "1"
        assert launched.startup.first_s > 0 and launched.startup.second_s is None
        status, answer = http_json(launched.handle.openai_url + "/completions",
                                   {"model": launched.handle.model, "prompt": "Hello", "max_tokens": 2}, timeout=120)
        assert status == 200 and answer["choices"]
        assert launched.handle.process is not None
        engine = _group(launched.handle.process.pid)
        assert len(engine) > 2
    assert not launched.handle.alive() and not any(_running(process) for process in engine)


_TUNE_WORKLOAD = ("-c", "2", "-n", "4", "--input-tokens", "16", "--output-tokens", "8", "--warmup", "0", "--quiet")


@pytest.mark.timeout(3600)  # three vLLM starts (baseline, variant, baseline again): minutes each on 2 cores
def test_a_whole_tune_of_vllm_saves_each_variant_and_judges_it_against_the_baseline_s_drift(tmp_path: Path) -> None:
    """``tokometer tune --engine vllm`` as a user runs it: max-num-seqs 1 against 4, a tiny workload; each
    variant's run, command line, start-up and peak memory saved; the verdicts in the tune's words, judged
    against the baseline's second run."""
    require_vllm()
    store, out = tmp_path / "runs.db", tmp_path / "tune.json"
    baseline = ("--set", "enforce-eager=", "--set", f"max-model-len={MAX_MODEL_LEN}", "--set", "kv-cache-gb=1",
                "--set", "max-num-seqs=1")
    done = run_cli("tune", "--engine", "vllm", *baseline, "--vary", "max-num-seqs=4", "--name", "seqs",
                   "--store", str(store), "--json", str(out), "--ready-timeout", str(START_TIMEOUT_S),
                   *_TUNE_WORKLOAD, timeout=3500)
    assert done.returncode == 0, done.stderr[-3000:]
    for name in ("baseline", "max-num-seqs=4", "baseline again"):
        assert f"{name}: done: start-up" in done.stdout, done.stdout
    document = json.loads(out.read_text("utf-8"))
    rows = document["variants"]
    assert [(r["name"], r["status"]) for r in rows] == [("baseline", "finished"), ("max-num-seqs=4", "finished")]
    again = document["baseline_again"]
    assert again["status"] == "finished" and again["run_id"] not in (rows[0]["run_id"], rows[1]["run_id"])
    for row, seqs in ((rows[0], "1"), (rows[1], "4"), (again, "1")):
        argv = row["command_line"]
        assert argv[argv.index("--max-num-seqs") + 1] == seqs and "--enforce-eager" in argv
        assert row["startup_s"] > 0 and row["peak_memory_bytes"] > 2**28  # vLLM and torch: far above 256 MiB
        assert "kernel high-water mark" in row["peak_memory_note"]
    words = {"better", "worse", "no change", "cannot decide"}
    assert rows[1]["verdicts"] and {x["verdict"] for x in rows[1]["verdicts"].values()} <= words
    assert document["noise_floor"]["run_id"] == again["run_id"] and document["noise_floor"]["status"] == "finished"
    best = {b["objective"]: b for b in document["best"]}
    assert best["memory"]["verdict"] in ("decided", "cannot decide") and best["memory"]["value"] > 2**28
    assert best["ttft_p99"]["verdict"] == "cannot decide"  # 4 requests: no p99 to judge
    shown = run_cli("runs", "--store", str(store), "--id", str(rows[1]["run_id"]))
    assert shown.returncode == 0 and "--max-num-seqs 4" in shown.stderr
