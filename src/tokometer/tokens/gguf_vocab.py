"""The tokenizer inside a GGUF file, converted once to a ``tokenizer.json`` and cached.

A GGUF carries its tokenizer as metadata (``tokenizer.ggml.tokens``, ``scores``, ``token_type``,
``merges``, ``chat_template``...), not as a ``tokenizer.json``. We convert it once and cache the
result under ``<user cache>/tokometer/tokenizers/<sha256 of the GGUF>/``:

    tokenizer.json   the converted tokenizer (loaded with the `tokenizers` library)
    tokometer.json   name, converter version, chat template, special tokens, context window

How it is converted:
  * Gemma (``gemma``, ``gemma2``, ``gemma3`` with a SentencePiece vocabulary; the bundled model):
    here, without transformers. This is transformers' own recipe for Gemma GGUFs
    (``integrations/gguf/gguf_tokenizer_mapping.py``): BPE with byte fallback, spaces as ``▁``,
    multi-space tokens re-spelt, merges rebuilt from the vocabulary in file order, control and
    user-defined tokens matched whole. Tests hold its ids against llama.cpp's ``/tokenize``.
  * Everything else (Llama, Qwen, Mistral, GPT-2 style byte-level BPE, T5...): transformers'
    converter, fed the fields read here (transformers' own GGUF reader imports torch). Needs the
    ``hf`` extra; without it the error says so.

Converting the bundled Gemma takes ~5 s once; loading the cached file ~1 s
(``python -m tokometer.tokens.warm`` does the conversion ahead of time). Where the cache cannot be written (a
read-only home, a full disk, ``XDG_CACHE_HOME`` naming a file), the tokenizer is converted into a temporary
directory each time instead, and the command goes on.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from tokometer.bundled import file_sha256, gemma_chat_template
from tokometer.tokens.hf import FileTokenizer
from tokometer.util.atomicfile import atomic_path
from tokometer.util.cachedir import cache_root
from tokometer.util.errors import OutputError, TokenizerError, TokometerError
from tokometer.util.gguf import read_gguf
from tokometer.util.readlimit import read_json

if TYPE_CHECKING:
    from tokenizers import Tokenizer as _HFTokenizer

__all__ = ["CONVERTER_VERSION", "MAX_TOKEN_CHARS", "MAX_VOCAB", "check_vocabulary", "convert_gguf_tokenizer",
           "gguf_tokenizer", "tokenizer_cache_dir"]

CONVERTER_VERSION = 1
_MAX_FACTS_BYTES: Final = 4 << 20
"""A converted tokenizer's ``tokometer.json`` (its chat template, special tokens, context), read whole: 4 MiB,
room for the longest templates; larger, replaced (a FIFO, ``/dev/zero``) or not JSON, and it is converted again."""
_GEMMA_ARCHS = frozenset({"gemma", "gemma2", "gemma3"})
_CONTROL, _USER_DEFINED = 3, 4
_SPECIAL_IDS = {"bos_token": "bos_token_id", "eos_token": "eos_token_id", "unk_token": "unknown_token_id",
                "pad_token": "padding_token_id"}


def tokenizer_cache_dir() -> Path:
    """``<user cache>/tokometer/tokenizers``: one directory per converted tokenizer."""
    return cache_root() / "tokenizers"


def _generate_merges(vocab: Mapping[str, int], scores: Mapping[str, float]) -> list[tuple[str, str]]:
    """Every split of every token into two tokens, best merged token first (transformers'
    ``generate_merges`` with scores, so that both converters give the same order)."""
    merges: list[tuple[str, str, float]] = []
    for piece, score in scores.items():
        local = [(piece[:i], piece[i:], score) for i in range(1, len(piece))
                 if piece[:i] in vocab and piece[i:] in vocab]
        local.sort(key=lambda m: (vocab[m[0]], vocab[m[1]]))
        merges.extend(local)
    merges.sort(key=lambda m: (m[2], len(m[0]), len(m[1])), reverse=True)
    return [(left, right) for left, right, _ in merges]


def _gemma(meta: dict[str, Any]) -> _HFTokenizer:
    from tokenizers import AddedToken, Tokenizer, decoders, normalizers, pre_tokenizers
    from tokenizers.models import BPE

    tokens: list[str] = meta["tokenizer.ggml.tokens"]
    types: list[int] = meta.get("tokenizer.ggml.token_type") or []
    # The file stores a token of two or more spaces as spaces; the vocabulary spells spaces "▁".
    spelt = ["\u2581" * len(t) if " " in t and not t.strip() else t for t in tokens]
    vocab = {token: index for index, token in enumerate(spelt)}
    # Gemma's scores do not follow its merge order; the order of the tokens in the file does.
    order = {token: -index for index, token in enumerate(spelt)}
    unk_id = meta.get("tokenizer.ggml.unknown_token_id")
    unk = tokens[unk_id] if isinstance(unk_id, int) and 0 <= unk_id < len(tokens) else "<unk>"
    tok = Tokenizer(BPE(vocab=vocab, merges=_generate_merges(vocab, order), unk_token=unk, fuse_unk=True,
                        byte_fallback=True, dropout=None))
    tok.normalizer = normalizers.Replace(" ", "\u2581")
    tok.pre_tokenizer = pre_tokenizers.Split(pattern=" ", behavior="merged_with_previous", invert=False)
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()])
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True)
                            for t, kind in zip(tokens, types, strict=False) if kind == _CONTROL])
    known = tok.get_vocab()
    tok.add_tokens([AddedToken(t, normalized=False, special=False)
                    for t, kind in zip(tokens, types, strict=False) if kind == _USER_DEFINED and t in known])
    return tok


def _with_transformers(meta: dict[str, Any], path: Path) -> _HFTokenizer:
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    import importlib

    # transformers >= 5.x has gguf/gguf_tokenizer_mapping.py; earlier ones have the same two names in ggml.py.
    for module_name in ("transformers.integrations.gguf.gguf_tokenizer_mapping", "transformers.integrations.ggml"):
        try:
            module = importlib.import_module(module_name)
            mapping: dict[str, dict[str, str]] = module.GGUF_TOKENIZER_MAPPING
            convert = module.convert_gguf_tokenizer
            break
        except (ImportError, AttributeError):
            continue
    else:
        kind = meta.get("tokenizer.ggml.model")
        raise TokenizerError(f"{path.name} has a {kind!r} tokenizer, which tokometer converts with "
                             "transformers: pip install 'tokometer[hf]' (no torch needed)")
    fields = {name: meta[f"tokenizer.{key}"] for key, name in mapping["tokenizer"].items()
              if f"tokenizer.{key}" in meta}
    try:
        backend, _ = convert(str(meta.get("general.architecture", "")), fields)
    except Exception as exc:  # transformers' converter on a header it does not expect: any of its errors
        raise TokenizerError(f"cannot convert the tokenizer of {path.name}: {exc}") from exc
    from tokenizers import Tokenizer

    if not isinstance(backend, Tokenizer):
        raise TokenizerError(f"transformers returned no tokenizer for {path.name}")
    try:
        backend.encode(_PROBE)
    except Exception as exc:
        raise TokenizerError(f"the tokenizer converted from {path.name} cannot encode text: {exc}") from exc
    return backend


MAX_VOCAB = 1 << 22
"""Tokens a vocabulary may have (4.2 million; the largest real ones have about 260 thousand)."""
MAX_TOKEN_CHARS = 1024
"""Characters one token may have (real vocabularies stay under a few hundred); longer ones are refused
before the merges are rebuilt, which costs the square of a token's length."""
_PROBE = "Hello, world: 1 + 1 = 2 ✓"
"""A text a converted tokenizer must encode before it is cached."""
_TYPED_ARRAYS = {"tokenizer.ggml.token_type": (int,), "tokenizer.ggml.scores": (int, float),
                 "tokenizer.ggml.merges": (str,)}


def check_vocabulary(meta: dict[str, Any], path: Path) -> None:
    """TokenizerError unless the header's tokenizer arrays have the shapes and types of a real one: tokens
    a list of strings of at most `MAX_TOKEN_CHARS` characters (at most `MAX_VOCAB` of them); token types,
    scores and merges, where present, lists of integers, numbers and strings; the chat template a string."""
    tokens = meta.get("tokenizer.ggml.tokens")
    if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
        raise TokenizerError(f"{path}: tokenizer.ggml.tokens is not a list of strings")
    if not tokens or len(tokens) > MAX_VOCAB:
        raise TokenizerError(f"{path}: tokenizer.ggml.tokens has {len(tokens):,} tokens (1 to {MAX_VOCAB:,} expected)")
    longest = max(len(t) for t in tokens)
    if longest > MAX_TOKEN_CHARS:
        raise TokenizerError(f"{path}: a token of tokenizer.ggml.tokens has {longest:,} characters "
                             f"(at most {MAX_TOKEN_CHARS:,} expected)")
    for key, kinds in _TYPED_ARRAYS.items():
        values = meta.get(key)
        if values is not None and (not isinstance(values, list) or not all(
                isinstance(v, kinds) and not isinstance(v, bool) for v in values)):
            raise TokenizerError(f"{path}: {key} is not a list of {' or '.join(k.__name__ for k in kinds)}")
    template = meta.get("tokenizer.chat_template")
    if template is not None and not isinstance(template, str):
        raise TokenizerError(f"{path}: tokenizer.chat_template is not a string")


def convert_gguf_tokenizer(meta: dict[str, Any], path: Path) -> _HFTokenizer:
    """A ``tokenizers.Tokenizer`` for the tokenizer described by a GGUF header (see the module docstring)."""
    if "tokenizer.ggml.tokens" not in meta:
        raise TokenizerError(f"{path} carries no tokenizer (no tokenizer.ggml.tokens in its header)")
    check_vocabulary(meta, path)
    arch = str(meta.get("general.architecture", ""))
    if meta.get("tokenizer.ggml.model") == "llama" and arch in _GEMMA_ARCHS:
        try:
            tok = _gemma(meta)
            tok.encode(_PROBE)  # a vocabulary it cannot encode with (no unknown token...) fails here, not later
        except Exception as exc:  # the tokenizers library refusing what the header describes
            raise TokenizerError(f"cannot convert the tokenizer of {path.name}: {exc}") from exc
        return tok
    return _with_transformers(meta, path)


def _facts(meta: dict[str, Any], path: Path) -> dict[str, Any]:
    """What ``tokometer.json`` records beside the converted tokenizer."""
    tokens: list[str] = meta["tokenizer.ggml.tokens"]
    special = {}
    for key, field in _SPECIAL_IDS.items():
        index = meta.get(f"tokenizer.ggml.{field}")
        if isinstance(index, int) and 0 <= index < len(tokens):
            special[key] = tokens[index]
    arch = str(meta.get("general.architecture", ""))
    template = meta.get("tokenizer.chat_template")
    template_source = "the GGUF's tokenizer.chat_template"
    gemma = gemma_chat_template(meta)
    if gemma is not None:
        template = gemma
        template_source = "Gemma's turn format (the GGUF has none; llama.cpp gets the same)"
    context = meta.get(f"{arch}.context_length")
    label = meta.get("general.name") or path.stem
    return {
        "converter_version": CONVERTER_VERSION,
        "label": str(label),
        "architecture": arch,
        "tokenizer_model": meta.get("tokenizer.ggml.model"),
        "chat_template": template or None,
        "chat_template_source": template_source if template else "",
        "special_tokens": special,
        "context_length": context if isinstance(context, int) else None,
        "context_source": f"GGUF {arch}.context_length" if isinstance(context, int) else "",
    }


def _write_atomic(target: Path, write: Any) -> None:
    with atomic_path(target) as partial:
        write(str(partial))


def _load_cached(directory: Path, gguf: Path, name: str | None) -> FileTokenizer | None:
    try:
        facts = read_json(directory / "tokometer.json", _MAX_FACTS_BYTES, "not read", "tokometer.json")
    except TokometerError:  # missing, replaced or corrupt: converted again
        return None
    if not isinstance(facts, dict) or facts.get("converter_version") != CONVERTER_VERSION \
            or not (directory / "tokenizer.json").is_file():
        return None
    tok = FileTokenizer(directory / "tokenizer.json", name=name or f"{gguf.name} ({facts.get('label', 'GGUF')})",
                        chat_template=facts.get("chat_template"),
                        chat_template_source=facts.get("chat_template_source", ""),
                        special_tokens=facts.get("special_tokens"), context_length=facts.get("context_length"),
                        context_source=facts.get("context_source", ""))
    tok.kind = "gguf"
    return tok


def gguf_tokenizer(path: str | Path, *, name: str | None = None, cache_dir: Path | None = None) -> FileTokenizer:
    """The tokenizer of the GGUF file at ``path``, converted on first use and cached (offline)."""
    gguf = Path(path).expanduser()
    if not gguf.is_file():
        raise TokenizerError(f"GGUF file not found: {gguf}")
    try:
        digest = file_sha256(gguf)
    except OSError as exc:
        raise TokenizerError(f"cannot read {gguf}: {exc}") from exc
    directory = (cache_dir or tokenizer_cache_dir()) / digest
    cached = _load_cached(directory, gguf, name)
    if cached is not None:
        return cached
    try:
        meta = read_gguf(gguf, tensors=False).metadata
    except (OSError, ValueError) as exc:
        raise TokenizerError(f"cannot read the GGUF header of {gguf}: {exc}") from exc
    backend = convert_gguf_tokenizer(meta, gguf)
    facts = _facts(meta, gguf)
    try:
        return _saved_and_loaded(directory, backend, facts, gguf, name)
    except OutputError:  # a cache that cannot be written (read-only, full, not a directory): convert every time
        with tempfile.TemporaryDirectory(prefix="tokometer-tokenizer-") as scratch:
            try:
                return _saved_and_loaded(Path(scratch), backend, facts, gguf, name)
            except OutputError as exc:
                raise TokenizerError(f"cannot write the converted tokenizer to {directory} nor to a temporary "
                                     f"directory: {exc}") from exc


def _saved_and_loaded(directory: Path, backend: Any, facts: dict[str, Any], gguf: Path,
                      name: str | None) -> FileTokenizer:
    """The converted tokenizer written to ``directory`` and loaded from it (into memory: the files may go)."""
    _write_atomic(directory / "tokenizer.json", lambda p: backend.save(p))
    _write_atomic(directory / "tokometer.json",
                  lambda p: Path(p).write_text(json.dumps(facts, indent=1), encoding="utf-8"))
    loaded = _load_cached(directory, gguf, name)
    if loaded is None:
        raise TokenizerError(f"the converted tokenizer in {directory} could not be read back")
    return loaded
