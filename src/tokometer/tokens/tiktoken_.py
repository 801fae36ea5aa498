"""OpenAI's tokenizers: tiktoken encodings (``tiktoken:o200k_base``, or a model name such as ``gpt-4o``).

tiktoken downloads an encoding's ranks file on first use and caches it (``TIKTOKEN_CACHE_DIR``,
else a ``data-gym-cache`` folder in the temp directory). Offline that download fails, and we say
which encoding and how to provide it: a local ``o200k_base.tiktoken`` given as ``--tokenizer PATH``
is checked against the hash tiktoken expects and put in tiktoken's cache, so later runs find it. It is
read at most `MAX_RANKS_BYTES` (``/dev/zero`` under that name is one error, not the memory).

OpenAI does not publish its chat template; chat counts follow OpenAI's cookbook formula
(``num_tokens_from_messages``): 3 tokens per message, 1 more per ``name``, 3 to prime the reply.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from tokometer.tokens.base import BaseTokenizer
from tokometer.tokens.chat import message_text
from tokometer.util.atomicfile import write_atomic
from tokometer.util.errors import OutputError, TokenizerError
from tokometer.util.readlimit import read_at_most

if TYPE_CHECKING:
    import tiktoken

__all__ = ["ENCODING_FILES", "MAX_RANKS_BYTES", "TiktokenTokenizer", "openai_encoding_for_model"]

MAX_RANKS_BYTES: Final = 16 << 20
"""A local ``.tiktoken`` ranks file: 16 MiB, four times the largest (o200k_base's, 3.6 MB); any other file fails
the sha256 check anyway."""

_BASE = "https://openaipublic.blob.core.windows.net/encodings/"
# encoding -> (ranks file URL, its sha256), as in tiktoken_ext/openai_public.py
ENCODING_FILES: dict[str, tuple[str, str]] = {
    "r50k_base": (_BASE + "r50k_base.tiktoken", "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"),
    "p50k_base": (_BASE + "p50k_base.tiktoken", "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069"),
    "p50k_edit": (_BASE + "p50k_base.tiktoken", "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069"),
    "cl100k_base": (_BASE + "cl100k_base.tiktoken",
                    "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"),
    "o200k_base": (_BASE + "o200k_base.tiktoken", "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"),
    "o200k_harmony": (_BASE + "o200k_base.tiktoken",
                      "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"),
}
_OPENAI_PREFIXES = ("gpt-", "o1", "o3", "o4", "chatgpt-", "text-embedding-", "davinci", "babbage")
_TOKENS_PER_MESSAGE, _TOKENS_PER_NAME, _REPLY_PRIMING = 3, 1, 3


def _import() -> Any:
    try:
        import tiktoken
    except ImportError:
        raise TokenizerError("OpenAI tokenizers need tiktoken: pip install 'tokometer[openai]'") from None
    return tiktoken


def openai_encoding_for_model(model: str) -> str | None:
    """The tiktoken encoding of an OpenAI model name (``gpt-4o`` -> ``o200k_base``), or None."""
    try:
        import tiktoken.model
    except ImportError:
        if model.startswith(_OPENAI_PREFIXES):
            raise TokenizerError(f"{model} is an OpenAI model; its tokenizer needs tiktoken: "
                                 "pip install 'tokometer[openai]'") from None
        return None
    try:
        return str(tiktoken.model.encoding_name_for_model(model))
    except KeyError:
        return None


def _tiktoken_cache_dir() -> Path:
    for variable in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if os.environ.get(variable):
            return Path(os.environ[variable])
    return Path(tempfile.gettempdir()) / "data-gym-cache"


def _install_local_file(path: Path, name: str) -> None:
    """Check a local ranks file against tiktoken's expected hash and put it where tiktoken looks."""
    url, expected = ENCODING_FILES[name]
    data = read_at_most(path, MAX_RANKS_BYTES, f"not the {name} ranks file", TokenizerError)
    if hashlib.sha256(data).hexdigest() != expected:
        raise TokenizerError(f"{path} is not the {name} ranks file tiktoken expects (sha256 differs): "
                             f"get it from {url}")
    cache = _tiktoken_cache_dir()
    target = cache / hashlib.sha1(url.encode()).hexdigest()
    try:
        write_atomic(target, data)  # the bytes just checked, not a second read of the file
    except OutputError as exc:
        raise TokenizerError(f"cannot copy {path} into tiktoken's cache {cache}: {exc}") from exc


def _offline_error(name: str, exc: BaseException) -> TokenizerError:
    url = ENCODING_FILES.get(name, ("", ""))[0]
    reason = " ".join(str(exc).split())[:160]
    where = f" from {url}" if url else ""
    return TokenizerError(
        f"could not load the tiktoken encoding {name!r}: it is downloaded on first use{where} and that "
        f"failed ({type(exc).__name__}: {reason}). Offline, copy {name}.tiktoken onto this machine and "
        f"pass --tokenizer /path/to/{name}.tiktoken, or set TIKTOKEN_CACHE_DIR to a directory where tiktoken "
        "has cached it; tokometer does not fall back to counting characters")


class TiktokenTokenizer(BaseTokenizer):
    """A ``tiktoken.Encoding``; ``load(name)`` gets a named one, the constructor takes any."""

    kind = "tiktoken"

    def __init__(self, encoding: tiktoken.Encoding, *, name: str | None = None) -> None:
        super().__init__()
        self._enc = encoding
        self.name = name or f"tiktoken:{encoding.name}"
        self.chat_template_source = ("OpenAI's cookbook formula (3 tokens per message, 1 per name, 3 for the "
                                     "reply); OpenAI does not publish its template")

    @classmethod
    def load(cls, name: str, *, local_file: Path | None = None) -> TiktokenTokenizer:
        """The encoding ``name`` (``o200k_base``...), from tiktoken's cache, a download, or ``local_file``."""
        tiktoken = _import()
        if local_file is not None:
            if name not in ENCODING_FILES:
                raise TokenizerError(f"{local_file.name}: name the file after its encoding "
                                     f"({', '.join(sorted(ENCODING_FILES))}), e.g. o200k_base.tiktoken")
            _install_local_file(local_file, name)
        if name not in tiktoken.list_encoding_names():
            raise TokenizerError(f"unknown tiktoken encoding {name!r}; known: "
                                 f"{', '.join(sorted(tiktoken.list_encoding_names()))}")
        try:
            encoding = tiktoken.get_encoding(name)
        except (OSError, ValueError) as exc:  # requests' errors are OSErrors
            raise _offline_error(name, exc) from None
        return cls(encoding)

    def encode(self, text: str) -> list[int]:
        return list(self._enc.encode_ordinary(text))

    def decode(self, ids: Sequence[int]) -> str:
        return str(self._enc.decode(list(ids)))

    def count(self, text: str) -> int:
        return len(self._enc.encode_ordinary(text))

    def count_batch(self, texts: Sequence[str]) -> list[int]:
        return [len(ids) for ids in self._enc.encode_ordinary_batch(list(texts))]

    def pieces(self, ids: Sequence[int]) -> list[str]:
        return [self._enc.decode_single_token_bytes(i).decode("utf-8", "backslashreplace") for i in ids]

    def offsets(self, text: str) -> list[tuple[int, int]] | None:
        ids = self._enc.encode_ordinary(text)
        decoded, starts = self._enc.decode_with_offsets(ids)
        if decoded != text:
            return None
        ends = [*starts[1:], len(text)]
        return list(zip(starts, ends, strict=True))

    def render_chat(self, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = True) -> str:
        raise TokenizerError(f"{self.name}: OpenAI does not publish its chat template, so there is no rendered "
                             "prompt to show; chat counts use OpenAI's cookbook formula")

    def count_chat(self, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = True) -> int:
        total = _REPLY_PRIMING if add_generation_prompt else 0
        for message in messages:
            total += _TOKENS_PER_MESSAGE + self.count(str(message.get("role", ""))) + self.count(message_text(message))
            if message.get("name"):
                total += _TOKENS_PER_NAME + self.count(str(message["name"]))
        return total
