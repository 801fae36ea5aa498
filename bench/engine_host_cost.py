"""How much host time does a real serving engine spend on each sequence in each step?

An engine's scheduler, input preparation, sampling bookkeeping and output handling run on the CPU once a step for
every sequence in the batch; the estimate's roofline (`tokometer.perf.roofline`) counts the GPU's work only. This
measures that host work for vLLM's V1 engine: its CPU build (the venv ``make test`` prepares) serves a Llama of one
layer, hidden size 64 and a 512-token vocabulary with dummy weights, so that the model's own work is a few
microseconds a sequence, and decodes N sequences in lockstep (16-token prompts, a fixed answer length, greedy,
no detokenizing). A step's time grows with N by the host's work a sequence plus the model's; the same run with
four layers gives the model's part a layer, which is taken off:

    slope(L)  = d(step time) / dN            (least squares over the N)
    model     = (slope(4) − slope(1)) / 3    (a layer's work a sequence)
    host      = slope(1) − model

    .venv/bin/python bench/engine_host_cost.py [--sizes 256,512,1024] [--answer 128] [--repeats 2]

The bench page records the figure with the machine; `published-figures` says what it does (and does not) explain.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tokometer.engines.vllm_env import find_prepared_env
from tokometer.util.hostinfo import cpu_model

ENGINE_PROGRAM = """
import json, sys, time
from vllm import LLM, SamplingParams
from vllm.inputs import TokensPrompt

def main():
    model, sizes, answer, repeats = sys.argv[1], [int(n) for n in sys.argv[2].split(",")], int(sys.argv[3]), \\
        int(sys.argv[4])
    llm = LLM(model=model, load_format="dummy", skip_tokenizer_init=True, max_num_seqs=max(sizes),
              max_num_batched_tokens=max(8192, 20 * max(sizes)), enforce_eager=True, max_model_len=1024,
              enable_prefix_caching=False)
    params = SamplingParams(max_tokens=answer, ignore_eos=True, temperature=0.0, detokenize=False)
    warm = SamplingParams(max_tokens=8, ignore_eos=True, detokenize=False)
    for _ in range(repeats):
        for n in sizes:
            prompts = [TokensPrompt(prompt_token_ids=[(7 * i + j) % 500 + 3 for j in range(16)]) for i in range(n)]
            llm.generate(prompts[:max(1, n // 4)], warm, use_tqdm=False)
            start = time.perf_counter()
            llm.generate(prompts, params, use_tqdm=False)
            print("STEP " + json.dumps({"n": n, "step_s": (time.perf_counter() - start) / answer}), flush=True)

if __name__ == "__main__":
    main()
"""


def tiny_llama(folder: Path, layers: int) -> Path:
    """A Llama config.json of ``layers`` layers, hidden size 64 and a 512-token vocabulary (dummy weights)."""
    model = folder / f"llama-{layers}"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": layers, "num_attention_heads": 1, "num_key_value_heads": 1, "head_dim": 64,
        "vocab_size": 512, "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "tie_word_embeddings": True, "torch_dtype": "bfloat16", "bos_token_id": 1, "eos_token_id": 2,
        "hidden_act": "silu"}))
    return model


def step_times(python: Path, model: Path, sizes: str, answer: int, repeats: int, folder: Path) -> dict[int, float]:
    """The fastest step time (seconds) at each N, over ``repeats`` runs in one engine."""
    program = folder / "engine_steps.py"
    program.write_text(ENGINE_PROGRAM)
    env = {**os.environ, "VLLM_TARGET_DEVICE": "cpu", "VLLM_CPU_KVCACHE_SPACE": "2", "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([str(python), str(program), str(model), sizes, str(answer), str(repeats)], env=env,
                         capture_output=True, text=True, timeout=1800, check=False)
    steps: dict[int, float] = {}
    for line in out.stdout.splitlines():
        if line.startswith("STEP "):
            row = json.loads(line[5:])
            steps[row["n"]] = min(steps.get(row["n"], float("inf")), row["step_s"])
    if not steps:
        sys.exit(f"vLLM did not run (exit {out.returncode}):\n{out.stderr[-3000:]}")
    return steps


def slope(steps: dict[int, float]) -> float:
    """Least-squares seconds a step per sequence."""
    ns = sorted(steps)
    mean_n, mean_t = sum(ns) / len(ns), sum(steps[n] for n in ns) / len(ns)
    return sum((n - mean_n) * (steps[n] - mean_t) for n in ns) / sum((n - mean_n) ** 2 for n in ns)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="256,512,1024", help="sequences decoded at once, comma list")
    parser.add_argument("--answer", type=int, default=128, help="tokens each sequence decodes")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    venv = find_prepared_env()
    if venv is None:
        sys.exit("no prepared vLLM venv here: run `make vllm` (or `python -m tokometer.engines.vllm_env`) first")
    python = venv / "bin" / "python"
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        slopes = {}
        for layers in (1, 4):
            steps = step_times(python, tiny_llama(folder, layers), args.sizes, args.answer, args.repeats, folder)
            slopes[layers] = slope(steps)
            shown = ", ".join(f"N={n}: {1e3 * t:.2f} ms" for n, t in sorted(steps.items()))
            print(f"{layers} layer(s): a step {shown}; {1e6 * slopes[layers]:.1f} us more a sequence")
    model = (slopes[4] - slopes[1]) / 3
    host = slopes[1] - model
    print(f"model's work: {1e6 * model:.1f} us a layer a sequence; host's: {1e6 * host:.1f} us a sequence a step "
          f"(vLLM's V1 engine, CPU build; {cpu_model()}, {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
