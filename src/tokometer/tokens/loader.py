"""Which tokenizer a ``--tokenizer`` / ``--model`` value means, and loading it.

    (nothing), bundled        the bundled Gemma 3 270M's tokenizer, from its GGUF (offline)
    tiktoken:o200k_base       a tiktoken encoding; an OpenAI model name (gpt-4o, o3...) picks its own
    PATH.gguf                 the tokenizer inside a GGUF file (converted once, cached)
    PATH.tiktoken             a local tiktoken ranks file named after its encoding
    PATH/tokenizer.json       a tokenizer.json (chat template from a tokenizer_config.json beside it)
    DIR                       a Hugging Face model directory (transformers' AutoTokenizer)
    ollama:NAME[:TAG]         the GGUF behind a model in the local Ollama store (~/.ollama/models)
    http://HOST:PORT[/v1]     the server's own /tokenize (llama.cpp, vLLM)
    ORG/NAME                  a Hugging Face model id (AutoTokenizer; the local cache works offline)

A value that names nothing loadable is an error, never a character estimate. The small files beside a
tokenizer (``tokenizer_config.json``, ``chat_template.jinja``, an Ollama manifest) are read whole within a
bound each (`tokometer.util.readlimit`): a larger one is one error naming the bound; one that is there but
cannot be read, or is not UTF-8 or JSON, is an error naming it. A FIFO or a device in place of the first two
is passed over, as a missing one is; in place of a manifest it reads as empty (no wait for a writer).
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Final

from tokometer.tokens.base import BaseTokenizer
from tokometer.util.errors import EngineError, TokenizerError
from tokometer.util.readlimit import open_input, read_json, read_text

__all__ = ["BUNDLED", "MAX_MANIFEST_BYTES", "MAX_TEMPLATE_BYTES", "MAX_TOKENIZER_CONFIG_BYTES", "cached_tokenizer",
           "load_tokenizer", "ollama_model_path"]

MAX_TOKENIZER_CONFIG_BYTES: Final = 16 << 20
"""A ``tokenizer_config.json``: 16 MiB. Most are a few KB; those that list every added token run to a few MB."""
MAX_TEMPLATE_BYTES: Final = 1 << 20
"""A ``chat_template.jinja``: 1 MiB, fifty times the longest templates published (tool-calling ones, ~20 KB)."""
MAX_MANIFEST_BYTES: Final = 1 << 20
"""An Ollama manifest: 1 MiB; a real one lists a handful of layers in under 1 KB."""

BUNDLED = "bundled"
_DEFAULTS = (BUNDLED, "default", "")
_OLLAMA_MODEL = "application/vnd.ollama.image.model"


def _bundled() -> BaseTokenizer:
    from tokometer.bundled import BUNDLED_MODEL, bundled_model_path
    from tokometer.tokens.gguf_vocab import gguf_tokenizer

    try:
        path = bundled_model_path()
    except EngineError as exc:
        raise TokenizerError(f"the default tokenizer is the bundled {BUNDLED_MODEL}'s, and it is missing ({exc}); "
                             "or give --tokenizer / --model") from None
    return gguf_tokenizer(path, name=f"bundled {BUNDLED_MODEL} ({path.name})")


def ollama_model_path(name: str, models_dir: Path | None = None) -> Path:
    """The GGUF blob of an Ollama model (``llama3.2:1b``) in the local Ollama store."""
    root = models_dir or Path(os.environ.get("OLLAMA_MODELS") or Path.home() / ".ollama" / "models")
    model, _, tag = name.partition(":")
    parts = model.split("/")
    if len(parts) == 1:
        parts = ["registry.ollama.ai", "library", *parts]
    elif len(parts) == 2:
        parts = ["registry.ollama.ai", *parts]
    manifest = root / "manifests" / Path(*parts) / (tag or "latest")
    if not manifest.exists():
        raise TokenizerError(f"Ollama model {name!r} not found in {root}: "
                             f"is it pulled (ollama pull {name})? Set OLLAMA_MODELS if the store is elsewhere")
    loaded = read_json(manifest, MAX_MANIFEST_BYTES, "an Ollama manifest is a short list of layers",
                       f"Ollama manifest {manifest}", TokenizerError)
    layers = loaded.get("layers", []) if isinstance(loaded, dict) else []
    for layer in layers:
        if isinstance(layer, dict) and layer.get("mediaType") == _OLLAMA_MODEL:
            blob = root / "blobs" / str(layer.get("digest", "")).replace(":", "-")
            if blob.is_file():
                return blob
            raise TokenizerError(f"the model file of Ollama model {name!r} is missing: {blob}")
    raise TokenizerError(f"the Ollama manifest {manifest} names no model file")


def _named_template(value: object) -> str | None:
    """A ``chat_template`` as transformers reads it: a string, or a list of ``{"name", "template"}`` (the one
    named ``default``, as transformers applies when no template is named); None for anything else."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        named = {t.get("name"): t.get("template") for t in value if isinstance(t, dict)}
        default = named.get("default")
        return default if isinstance(default, str) else None
    return None


def _tokenizer_json(path: Path) -> BaseTokenizer:
    """A tokenizer.json, with the chat template and context of a tokenizer_config.json beside it."""
    from tokometer.tokens.hf import FileTokenizer

    config: dict[str, object] = {}
    beside = path.parent / "tokenizer_config.json"
    if beside.is_file():  # a FIFO or a device here is no config: passed over, as a missing one is
        loaded = read_json(beside, MAX_TOKENIZER_CONFIG_BYTES, "it holds a tokenizer's settings, not its vocabulary",
                           str(beside), TokenizerError)
        config = loaded if isinstance(loaded, dict) else {}
    template, source = _named_template(config.get("chat_template")), "tokenizer_config.json chat_template"
    jinja = path.parent / "chat_template.jinja"
    if template is None and jinja.is_file():
        template = read_text(jinja, MAX_TEMPLATE_BYTES, "a chat template is a page of Jinja", str(jinja),
                             TokenizerError)
        source = "chat_template.jinja"
    special = {k: v for k in ("bos_token", "eos_token", "unk_token", "pad_token")
               if isinstance(v := config.get(k), str)}
    limit = config.get("model_max_length")
    context = limit if isinstance(limit, int) and 0 < limit < 10**9 else None
    return FileTokenizer(path, chat_template=template if isinstance(template, str) else None,
                         chat_template_source=source if template else "",
                         special_tokens=special, context_length=context,
                         context_source="tokenizer_config.json model_max_length" if context else "")


def _local(path: Path) -> BaseTokenizer:
    from tokometer.tokens.gguf_vocab import gguf_tokenizer
    from tokometer.tokens.hf_auto import HFTokenizer, transformers_available
    from tokometer.tokens.tiktoken_ import TiktokenTokenizer

    if path.is_dir():
        if transformers_available():
            return HFTokenizer(str(path))
        if (path / "tokenizer.json").is_file():
            return _tokenizer_json(path / "tokenizer.json")
        raise TokenizerError(f"{path} holds no tokenizer.json; loading it needs transformers: "
                             "pip install 'tokometer[hf]'")
    try:
        with open_input(path) as handle:  # a FIFO nobody writes to: no magic, instead of a wait for a writer
            magic = handle.read(4)
    except OSError as exc:
        raise TokenizerError(f"cannot read {path}: {exc.strerror or exc}") from None
    if magic == b"GGUF":
        return gguf_tokenizer(path)
    if path.suffix == ".tiktoken":
        return TiktokenTokenizer.load(path.stem, local_file=path)
    if path.suffix == ".json":
        return _tokenizer_json(path)
    raise TokenizerError(f"{path} is not a tokenizer: give a .gguf, a tokenizer.json, a .tiktoken file "
                         "or a Hugging Face model directory")


def _looks_like_path(spec: str) -> bool:
    return spec.startswith((".", "/", "~", "\\")) or spec.endswith((".gguf", ".json", ".tiktoken")) or (
        len(spec) > 2 and spec[1] == ":" and spec[2] in "/\\")


def load_tokenizer(spec: str | None = None) -> BaseTokenizer:
    """The tokenizer ``spec`` names (see the module docstring); the bundled Gemma's when None."""
    spec = (spec or "").strip()
    if spec in _DEFAULTS:
        return _bundled()
    if spec.startswith("tiktoken:"):
        from tokometer.tokens.tiktoken_ import TiktokenTokenizer

        return TiktokenTokenizer.load(spec.removeprefix("tiktoken:"))
    if spec.startswith("ollama:"):
        from tokometer.tokens.gguf_vocab import gguf_tokenizer

        name = spec.removeprefix("ollama:")
        return gguf_tokenizer(ollama_model_path(name), name=f"ollama:{name}")
    if spec.startswith(("http://", "https://")):
        from tokometer.tokens.remote import ServerTokenizer

        server = ServerTokenizer(spec)
        server.encode("hello")  # fails here, with the server's address, if there is no /tokenize
        server.read_context_length()
        return server
    path = Path(spec).expanduser()
    if path.exists():
        return _local(path)
    if _looks_like_path(spec):
        raise TokenizerError(f"no such file or directory: {path}")
    from tokometer.tokens.tiktoken_ import TiktokenTokenizer, openai_encoding_for_model

    encoding = openai_encoding_for_model(spec)
    if encoding is not None:
        tok = TiktokenTokenizer.load(encoding)
        tok.name = f"{spec} (tiktoken:{encoding})"
        return tok
    from tokometer.tokens.hf_auto import HFTokenizer

    return HFTokenizer(spec)


@lru_cache(maxsize=8)
def cached_tokenizer(spec: str | None = None) -> BaseTokenizer:
    """``load_tokenizer(spec)``, loaded once per process (for the library functions)."""
    return load_tokenizer(spec)
