"""A tune's vLLM variant started for real: vLLM's CPU build with ``max-num-seqs=2`` and chunked prefill off.

One engine start (vLLM's start takes minutes on a small CPU): its own vLLM, not the directory's shared one, which
the file before this one (in name order) has killed by then, so two are never up at once.
"""

from __future__ import annotations

import psutil

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
