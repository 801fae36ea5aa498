"""A Hugging Face model's tokenizer through ``transformers.AutoTokenizer`` (model id or local directory).

The usual route: ``AutoTokenizer.from_pretrained(model)`` brings the tokenizer as
the model's authors configured it, and its chat template. transformers is imported only here and
only when such a tokenizer is asked for (the ``hf`` extra; torch is never needed). Counting goes
through the fast tokenizer's Rust backend, so batch counting runs at the library's own speed.

Offline: a model id that is not in the local Hugging Face cache gives a one-line error naming it
and how to point at a local copy; tokometer never falls back to a character estimate.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from tokometer.tokens.base import BaseTokenizer
from tokometer.tokens.hf import MAX_TOKENIZER_BYTES, batch_encoder
from tokometer.util.errors import TokenizerError
from tokometer.util.hubreach import hub_reachable
from tokometer.util.readlimit import read_json

__all__ = ["MAX_MODEL_CONFIG_BYTES", "HFTokenizer", "transformers_available"]

MAX_MODEL_CONFIG_BYTES: Final = 4 << 20
"""A model's ``config.json``, read for its context length: 4 MiB (real ones are a few KB); a larger one, or one
that is not JSON, leaves the context unknown."""

_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                    "config.json", "generation_config.json", "chat_template.jinja", "chat_template.json", "vocab.json",
                    "vocab.txt", "merges.txt", "tokenizer.model", "spiece.model")
"""The files of a model directory that transformers may read, whole, to build its tokenizer."""
_HUGE = 10**9  # transformers' "no limit" sentinel for model_max_length is ~1e30


def transformers_available() -> bool:
    """Whether transformers can be imported (the ``hf`` extra)."""
    import importlib.util

    return importlib.util.find_spec("transformers") is not None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _offline_error(source: str) -> TokenizerError:
    from huggingface_hub import constants

    return TokenizerError(
        f"cannot load the tokenizer {source!r}: it is not in the local Hugging Face cache and "
        f"{constants.ENDPOINT} cannot be reached (offline). Download it once where there is network "
        f"(hf download {source} --include 'tokenizer*' config.json) and copy the cache over, or give "
        "--tokenizer a local directory holding tokenizer.json, or a .gguf file; tokometer does not fall back "
        "to counting characters")


def _check_directory(directory: Path) -> None:
    """Refuse, before transformers reads them (whole, with no bound of its own), a model directory's tokenizer files
    that are not regular files (a FIFO: a wait for a writer; ``/dev/zero``: the memory) or are larger than
    `MAX_TOKENIZER_BYTES`."""
    for name in _TOKENIZER_FILES:
        try:
            status = (directory / name).stat()
        except OSError:
            continue  # not there (or unreadable: transformers says so)
        if not stat.S_ISREG(status.st_mode):
            raise TokenizerError(f"{directory / name} is not a regular file (a pipe or a device?): "
                                 "give a directory of ordinary files")
        if status.st_size > MAX_TOKENIZER_BYTES:
            raise TokenizerError(f"{directory / name} is larger than {MAX_TOKENIZER_BYTES >> 20} MiB: "
                                 "not a tokenizer's file")


def _load(source: str) -> Any:
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise TokenizerError(f"the tokenizer {source!r} is loaded with transformers, which is not installed: "
                             "pip install 'tokometer[hf]' (no torch needed), or point --tokenizer at a "
                             "tokenizer.json or a .gguf file") from None
    errors = (OSError, ValueError, KeyError, ImportError)
    if Path(source).expanduser().is_dir():
        _check_directory(Path(source).expanduser())
        try:
            return AutoTokenizer.from_pretrained(str(Path(source).expanduser()))
        except errors as exc:
            raise TokenizerError(f"could not load the tokenizer in {source}: {_first_line(exc)}") from None
    from huggingface_hub import try_to_load_from_cache

    if any(isinstance(try_to_load_from_cache(source, name), str) for name in ("tokenizer_config.json",
                                                                              "tokenizer.json")):
        try:  # cached: no network at all
            return AutoTokenizer.from_pretrained(source, local_files_only=True)
        except errors:
            pass
    if not hub_reachable():
        raise _offline_error(source)
    try:
        return AutoTokenizer.from_pretrained(source)
    except errors as exc:
        raise TokenizerError(f"could not load the tokenizer of Hugging Face model {source!r}: {_first_line(exc)} "
                             "(is the model id right? gated models need HF_TOKEN); tokometer does not fall back "
                             "to counting characters") from None


def _context_from_config(source: str) -> tuple[int | None, str]:
    """``max_position_embeddings`` (or a similar key) from the model's config.json, if it can be had offline."""
    path = Path(source).expanduser() / "config.json"
    if not path.is_file():
        try:
            from huggingface_hub import try_to_load_from_cache

            cached = try_to_load_from_cache(source, "config.json")
        except (ImportError, ValueError):
            return None, ""
        if not isinstance(cached, str):
            return None, ""
        path = Path(cached)
    try:
        config = read_json(path, MAX_MODEL_CONFIG_BYTES, "not read", str(path), TokenizerError)
    except TokenizerError:  # the context is a nicety: a config.json that cannot say it leaves it unknown
        return None, ""
    if not isinstance(config, dict):
        return None, ""
    inner = config.get("text_config")
    text_config: dict[str, Any] = inner if isinstance(inner, dict) else {}
    for key in ("max_position_embeddings", "max_sequence_length", "seq_length", "n_positions"):
        for where in (config, text_config):
            value = where.get(key)
            if isinstance(value, int) and value > 0:
                return value, f"config.json {key}"
    return None, ""


class HFTokenizer(BaseTokenizer):
    """``AutoTokenizer.from_pretrained(source)`` behind the tokometer tokenizer interface."""

    kind = "hf"

    def __init__(self, source: str) -> None:
        super().__init__()
        self._hf = _load(source)
        backend = getattr(self._hf, "backend_tokenizer", None)
        if backend is None:
            raise TokenizerError(f"{source!r} has no fast (Rust) tokenizer; tokometer needs one "
                                 "(a tokenizer.json in the model's files)")
        self._backend = backend
        self.name = source
        self.chat_template = getattr(self._hf, "chat_template", None) or None
        self.chat_template_source = "tokenizer_config.json chat_template" if self.chat_template else ""
        for key in ("bos_token", "eos_token", "unk_token", "pad_token"):
            value = getattr(self._hf, key, None)
            if isinstance(value, str):
                self.special_tokens[key] = value
        self.context_length, self.context_source = _context_from_config(source)
        limit = getattr(self._hf, "model_max_length", None)
        if self.context_length is None and isinstance(limit, int) and 0 < limit < _HUGE:
            self.context_length, self.context_source = limit, "tokenizer_config.json model_max_length"

    def encode(self, text: str) -> list[int]:
        return list(self._backend.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: Sequence[int]) -> str:
        return str(self._backend.decode(list(ids), skip_special_tokens=False))

    def count(self, text: str) -> int:
        return len(self._backend.encode(text, add_special_tokens=False).ids)

    def count_batch(self, texts: Sequence[str]) -> list[int]:
        return [len(e) for e in batch_encoder(self._backend)(list(texts), add_special_tokens=False)]

    def pieces(self, ids: Sequence[int]) -> list[str]:
        return [self._backend.id_to_token(i) or "" for i in ids]

    def offsets(self, text: str) -> list[tuple[int, int]] | None:
        return [(int(a), int(b)) for a, b in self._backend.encode(text, add_special_tokens=False).offsets]

    def render_chat(self, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = True) -> str:
        if not self.chat_template:
            return super().render_chat(messages, add_generation_prompt=add_generation_prompt)
        try:
            text = self._hf.apply_chat_template(list(messages), tokenize=False,
                                                add_generation_prompt=add_generation_prompt)
        except Exception as exc:  # jinja2's TemplateError and the template's own raise_exception
            raise TokenizerError(f"the chat template of {self.name} failed on these messages: "
                                 f"{_first_line(exc)}") from None
        return str(text)

    def count_chat(self, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = True) -> int:
        if not self.chat_template:
            return super().count_chat(messages, add_generation_prompt=add_generation_prompt)
        try:
            ids = self._hf.apply_chat_template(list(messages), tokenize=True, return_dict=False,
                                               add_generation_prompt=add_generation_prompt)
        except Exception as exc:
            raise TokenizerError(f"the chat template of {self.name} failed on these messages: "
                                 f"{_first_line(exc)}") from None
        return len(ids)
