"""A tokenizer from a Hugging Face ``tokenizer.json`` file (the `tokenizers` library, no network).

Also the form every GGUF tokenizer takes here once converted (see ``gguf_vocab.py``). Counting many
texts uses ``encode_batch_fast`` (no offsets, Rust threads): this is the path whose throughput
``bench/count_throughput.py`` holds against the raw library.

The file is read here, at most `MAX_TOKENIZER_BYTES` (`tokometer.util.readlimit`), and handed to the library as
bytes: the library's own ``from_file`` reads whatever it is given to its end (``/dev/zero``: the memory).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from tokometer.tokens.base import BaseTokenizer
from tokometer.util.errors import TokenizerError
from tokometer.util.readlimit import read_at_most

if TYPE_CHECKING:
    from tokenizers import Tokenizer as _HFTokenizer

__all__ = ["MAX_TOKENIZER_BYTES", "FileTokenizer", "batch_encoder"]

MAX_TOKENIZER_BYTES: Final = 256 << 20
"""A ``tokenizer.json``, read whole: 256 MiB, eight times the largest in common use (Gemma 3's, 262 k tokens: 33 MB
as converted from its GGUF here); parsed, it takes a few times its size."""


def batch_encoder(tok: Any) -> Any:
    """``encode_batch_fast`` (tokenizers >= 0.21: no offsets) where there is one, else ``encode_batch``."""
    return getattr(tok, "encode_batch_fast", None) or tok.encode_batch


def _unloadable(path: Path, raw: bytes, exc: Exception) -> TokenizerError:
    """Why the library refused ``raw``: not UTF-8 (the first bad byte: the library only says where it stopped
    parsing), or what it said."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as bad:
        return TokenizerError(f"tokenizer {path}: not UTF-8 text (byte {bad.start})")
    said = " ".join(str(exc).split()).removeprefix("Cannot instantiate Tokenizer from buffer: ")
    return TokenizerError(f"cannot load tokenizer {path}: {said}")


class FileTokenizer(BaseTokenizer):
    """Loads ``tokenizer.json`` (or a directory holding one) with no network access.

    ``chat_template``, ``special_tokens`` and ``context_length`` come from whoever knows them
    (a GGUF header, a ``tokenizer_config.json``); the file itself does not say.
    """

    kind = "file"

    def __init__(self, path: str | Path, *, name: str | None = None, chat_template: str | None = None,
                 chat_template_source: str = "", special_tokens: dict[str, str] | None = None,
                 context_length: int | None = None, context_source: str = "") -> None:
        super().__init__()
        from tokenizers import Tokenizer as _HFTokenizer

        p = Path(path).expanduser()
        if p.is_dir():
            p = p / "tokenizer.json"
        if not p.exists():
            raise TokenizerError(f"no tokenizer file at {p}: give a tokenizer.json or a directory holding one")
        raw = read_at_most(p, MAX_TOKENIZER_BYTES, "a tokenizer.json is a vocabulary and its merges", TokenizerError)
        try:
            self._tok: _HFTokenizer = _HFTokenizer.from_buffer(raw)
        except Exception as exc:  # the library raises a bare Exception for bad files
            raise _unloadable(p, raw, exc) from None
        self._encode = batch_encoder(self._tok)
        self.path = p
        self.name = name or str(p)
        self.chat_template = chat_template
        self.chat_template_source = chat_template_source
        self.special_tokens = dict(special_tokens or {})
        self.context_length = context_length
        self.context_source = context_source

    @property
    def backend(self) -> _HFTokenizer:
        """The underlying ``tokenizers.Tokenizer``."""
        return self._tok

    def encode(self, text: str) -> list[int]:
        # The batch encoder, even for one text: it lets go of the GIL while it works (``encode`` holds
        # it: 12 s for 3 M tokens, during which no other thread, an event loop included, runs), and
        # ``encode_batch_fast`` skips the offsets (measured here: as fast for short texts, 1.4x for long).
        return list(self._encode([text], add_special_tokens=False)[0].ids)

    def decode(self, ids: Sequence[int]) -> str:
        return str(self._tok.decode(list(ids), skip_special_tokens=False))

    def count(self, text: str) -> int:
        return len(self._encode([text], add_special_tokens=False)[0])

    def count_batch(self, texts: Sequence[str]) -> list[int]:
        encodings = batch_encoder(self._tok)(list(texts), add_special_tokens=False)
        return [len(e) for e in encodings]

    def render_chats(self, chats: Sequence[Sequence[Mapping[str, Any]]]) -> list[str] | None:
        return [self.render_chat(chat) for chat in chats]

    def count_chat_batch(self, chats: Sequence[Sequence[Mapping[str, Any]]]) -> list[int]:
        return self.count_batch([self.render_chat(chat) for chat in chats])

    def pieces(self, ids: Sequence[int]) -> list[str]:
        return [self._tok.id_to_token(i) or "" for i in ids]

    def offsets(self, text: str) -> list[tuple[int, int]] | None:
        return [(int(a), int(b)) for a, b in self._tok.encode(text, add_special_tokens=False).offsets]
