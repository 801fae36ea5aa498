"""Turn a GGUF file into a Hugging Face checkpoint that vLLM loads: run by vLLM's venv, not by tokometer.

``python vllm_convert.py MODEL.gguf OUT_DIR CHAT_TEMPLATE_FILE ARCHITECTURE``, with the interpreter of
`tokometer.engines.vllm_env` (torch, transformers, gguf, accelerate). It imports nothing from tokometer,
so it runs there as a plain file. transformers' GGUF loader dequantises the weights (they stay packed
unless asked), which are saved as bf16 safetensors, and two traps are closed:

- ``config.json`` names the architecture (``Gemma3ForCausalLM``): without it vLLM takes the checkpoint
  for an embedding model;
- the converted fast tokenizer adds no ``<bos>`` (llama.cpp adds it, from the GGUF's
  ``add_bos_token``), and without it Gemma babbles: the tokenizer's post-processor is set to put the
  BOS token first, as llama.cpp does, and ``add_bos_token`` is recorded.

The chat template is tokometer's (the bundled GGUF is a base model with none), so both engines format
chats alike. The result is written to ``OUT_DIR`` (a fresh directory the caller renames into place).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _bos_first(out: Path, bos: str, bos_id: int) -> None:
    path = out / "tokenizer.json"
    tokenizer = json.loads(path.read_text(encoding="utf-8"))
    special = {"SpecialToken": {"id": bos, "type_id": 0}}
    tokenizer["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [special, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [special, {"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {bos: {"id": bos, "ids": [bos_id], "tokens": [bos]}},
    }
    path.write_text(json.dumps(tokenizer, ensure_ascii=False), encoding="utf-8")
    config_path = out / "tokenizer_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config.update(add_bos_token=True, local_files_only=True)
    config_path.write_text(json.dumps(config, indent=2), encoding="utf-8")


def convert(gguf: Path, out: Path, chat_template: str, architecture: str) -> None:
    """Load ``gguf`` with transformers (dequantised, bf16) and save it as a checkpoint in ``out``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.bfloat16,
                                                 quantization_config=GgufConfig(dequantize=True))
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.config.architectures = [architecture]
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.chat_template = chat_template
    tokenizer.save_pretrained(out)
    _bos_first(out, tokenizer.bos_token, int(tokenizer.bos_token_id))
    from transformers import AutoTokenizer as Check

    ids = Check.from_pretrained(str(out))("Hello").input_ids
    if not ids or ids[0] != tokenizer.bos_token_id:
        raise SystemExit(f"the converted tokenizer does not start with {tokenizer.bos_token}: {ids}")


def main() -> int:
    if len(sys.argv) != 5:
        print("usage: vllm_convert.py MODEL.gguf OUT_DIR CHAT_TEMPLATE_FILE ARCHITECTURE", file=sys.stderr)
        return 2
    gguf, out, template, architecture = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]
    convert(gguf, out, template.read_text(encoding="utf-8"), architecture)
    return 0


if __name__ == "__main__":
    sys.exit(main())
