"""How many GPUs served a run (`tokometer.gpu_count`): stated with ``bench --gpus``, else the product of
the parallel sizes on the vLLM or SGLang command line saved with the run."""

from __future__ import annotations

from tokometer.gpu_count import gpu_count


def test_gpu_count_from_the_engine_saved_with_the_run() -> None:
    argv = ["vllm", "serve", "m", "--tensor-parallel-size", "2", "-pp=2"]
    assert gpu_count({"engine": "vllm", "argv": argv}) == (4, "4 GPUs from the vllm command line")
    assert gpu_count({"engine": "sglang", "argv": ["--tp", "8"]}) == (8, "8 GPUs from the sglang command line")
    assert gpu_count({"engine": "vllm", "argv": ["vllm", "serve", "m"]})[0] == 1
    assert gpu_count({"engine": "vllm", "device": "cpu", "argv": argv}) == (None, "a vllm engine on CPU")
    assert gpu_count({"engine": "llama.cpp"}) == (None, "the llama.cpp engine saved with the run names no GPU count")
    assert gpu_count(None) == (None, "no engine saved with the run says how many GPUs served it")


def test_gpus_stated_with_bench_come_before_the_engine_s() -> None:
    """``bench --gpus N`` (the spec's ``gpus``) is taken first; anything but a whole number of at least 1 is not."""
    vllm = {"engine": "vllm", "argv": ["vllm", "serve", "m", "-tp", "4"]}
    assert gpu_count(None, 2) == (2, "2 GPUs from bench --gpus")
    assert gpu_count(vllm, 1) == (1, "1 GPU from bench --gpus")
    for not_a_count in (None, 0, -2, True, 1.5, "2"):
        assert gpu_count(vllm, not_a_count) == (4, "4 GPUs from the vllm command line")


def test_a_gpu_count_out_of_range_or_not_ascii_digits_is_not_taken() -> None:
    """``"²"`` passes ``str.isdigit`` but ``int()`` refuses it; 10**400 GPUs overflowed the per-GPU division."""
    from tokometer.util.limits import MAX_GPUS

    assert MAX_GPUS == 65536
    vllm = {"engine": "vllm", "argv": ["-tp", "4"]}
    for not_a_count in (10**400, MAX_GPUS + 1):
        assert gpu_count(vllm, not_a_count) == (4, "4 GPUs from the vllm command line")
    assert gpu_count(None, MAX_GPUS) == (MAX_GPUS, f"{MAX_GPUS} GPUs from bench --gpus")
    assert gpu_count({"engine": "vllm", "argv": ["-tp", "\u00b2"]})[0] == 1  # not a size: none named
    assert gpu_count({"engine": "vllm", "argv": ["-tp=\u0662"]})[0] == 1  # Arabic-Indic 2
    assert gpu_count({"engine": "vllm", "argv": ["-tp", "1" * 5000]})[0] == 1  # past int()'s digit limit
    assert gpu_count({"engine": "vllm", "argv": ["-tp", str(MAX_GPUS + 1)]})[0] == 1
    too_many = gpu_count({"engine": "vllm", "argv": ["-tp", "4096", "-pp", "4096"]})
    assert too_many == (None, f"the vllm command line's parallel sizes multiply to 16777216 GPUs, more than "
                              f"{MAX_GPUS}")
