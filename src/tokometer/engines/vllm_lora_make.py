"""Write a small LoRA adapter for a checkpoint with PEFT: run by vLLM's venv, not by tokometer.

``python vllm_lora_make.py CHECKPOINT OUT_DIR RANK SEED``, with the interpreter of `tokometer.engines.vllm_env`
(torch, transformers) and PEFT on its path (`tokometer.engines.vllm_lora`). It imports nothing from tokometer,
so it runs there as a plain file. The adapter targets the attention's ``q_proj`` and ``v_proj`` with rank
``RANK``; its weights are drawn from ``SEED`` (PEFT's ``init_lora_weights=False``: both matrices random, so the
adapter changes the answers, unlike PEFT's default whose B starts at zero). Nothing is trained: the adapter is
there to be loaded and served, which is what a benchmark measures. The result is written to ``OUT_DIR`` (a fresh
directory the caller renames into place): ``adapter_config.json`` and ``adapter_model.safetensors``.
"""

from __future__ import annotations

import sys
from pathlib import Path


def make(checkpoint: Path, out: Path, rank: int, seed: int) -> None:
    """Wrap the model at ``checkpoint`` in a LoRA of ``rank`` (weights from ``seed``) and save the adapter."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(str(checkpoint), dtype=torch.bfloat16)
    config = LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=["q_proj", "v_proj"], lora_dropout=0.0,
                        init_lora_weights=False, task_type="CAUSAL_LM")
    get_peft_model(model, config).save_pretrained(str(out), safe_serialization=True)


if __name__ == "__main__":
    make(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
    print(sorted(p.name for p in Path(sys.argv[2]).iterdir()))
