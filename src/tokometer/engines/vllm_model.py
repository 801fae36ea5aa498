"""The bundled Gemma as a checkpoint vLLM can load: converted once from the GGUF, cached by its content.

vLLM loads Hugging Face checkpoints, and nothing here may come from a hub, so the bundled GGUF
(`tokometer.bundled`) is converted with transformers' GGUF loader inside vLLM's own venv
(`tokometer.engines.vllm_env`; the conversion script is ``vllm_convert.py`` beside this file, run by
that venv's interpreter) into plain bf16 safetensors. Both engines then serve the same weights:
llama.cpp with its Q4_K_M kernels, vLLM the dequantised weights in bf16 — so a comparison of the two
is a comparison of quantised against unquantised arithmetic on one set of weights.

The checkpoint lives in ``<cache>/vllm/models/gemma-3-270m-bf16-<sha12>-r<recipe>/``: the GGUF's
sha256 and the conversion recipe name it, so a new model file or a changed recipe converts anew.
It is written into a temporary directory and renamed into place under a lock, so a killed
conversion leaves nothing that looks finished.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from tokometer.bundled import GEMMA_CHAT_TEMPLATE, bundled_model_path, file_sha256
from tokometer.engines.vllm_env import prepare_vllm_env
from tokometer.util.cachedir import cache_root, file_lock
from tokometer.util.errors import EngineError

__all__ = ["BUNDLED_VLLM_NAME", "bundled_checkpoint", "find_bundled_checkpoint"]

BUNDLED_VLLM_NAME = "gemma-3-270m-bf16"  # the name vLLM serves the converted bundled model under
ARCHITECTURE = "Gemma3ForCausalLM"
RECIPE = 1  # bump when vllm_convert.py changes what it writes
CONVERTER = Path(__file__).with_name("vllm_convert.py")


def _target() -> Path:
    digest = file_sha256(bundled_model_path())  # the package's known hash for the bundled file: no hashing
    return cache_root() / "vllm" / "models" / f"{BUNDLED_VLLM_NAME}-{digest[:12]}-r{RECIPE}"


def find_bundled_checkpoint() -> Path | None:
    """The converted bundled model, if it has been made here; else None."""
    target = _target()
    return target if (target / "config.json").is_file() else None


def bundled_checkpoint(say: Callable[[str], None] | None = None) -> Path:
    """The converted bundled model's directory, converting it first if needed (a minute or two, once)."""
    found = find_bundled_checkpoint()
    if found is not None:
        return found
    say = say or (lambda message: None)
    target = _target()
    target.parent.mkdir(parents=True, exist_ok=True)
    venv = prepare_vllm_env(say)
    with file_lock(target.parent / ".lock"):
        if find_bundled_checkpoint() is not None:
            return target
        gguf = bundled_model_path()
        work = Path(tempfile.mkdtemp(prefix=".convert-", dir=target.parent))
        try:
            template = work / "chat_template.jinja.in"
            template.write_text(GEMMA_CHAT_TEMPLATE, encoding="utf-8")
            out = work / "checkpoint"
            say(f"converting the bundled model for vLLM (once): {gguf.name} -> bf16 safetensors")
            env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_TARGET_DEVICE": "cpu"}
            try:
                done = subprocess.run([str(venv / "bin" / "python"), str(CONVERTER), str(gguf), str(out),
                                       str(template), ARCHITECTURE], capture_output=True, text=True, env=env,
                                      timeout=1800, check=False)
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise EngineError(f"converting {gguf} for vLLM failed: {exc}") from exc
            if done.returncode != 0:
                tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
                raise EngineError(f"converting {gguf} for vLLM failed (status {done.returncode}): {tail}")
            os.replace(out, target)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    say(f"converted: {target}")
    return target
