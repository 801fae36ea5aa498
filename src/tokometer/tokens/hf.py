"""A tokenizer from a Hugging Face ``tokenizer.json`` file (the `tokenizers` library, no network).

Also the form every GGUF tokenizer takes here once converted (see ``gguf_vocab.py``). Counting many
texts uses ``encode_batch_fast`` (no offsets, Rust threads): this is the path whose throughput
``bench/count_throughput.py`` holds against the raw library.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokometer.tokens.base import BaseTokenizer
from tokometer.util.errors import TokenizerError

if TYPE_CHECKING:
    from tokenizers import Tokenizer as _HFTokenizer

__all__ = ["FileTokenizer", "batch_encoder"]


def batch_encoder(tok: Any) -> Any:
    """``encode_batch_fast`` (tokenizers >= 0.21: no offsets) where there is one, else ``encode_batch``."""
    return getattr(tok, "encode_batch_fast", None) or tok.encode_batch


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
        if not p.is_file():
            raise TokenizerError(f"no tokenizer file at {p}: give a tokenizer.json or a directory holding one")
        try:
            self._tok: _HFTokenizer = _HFTokenizer.from_file(str(p))
        except Exception as exc:  # the library raises a bare Exception for bad files
            raise TokenizerError(f"cannot load tokenizer {p}: {' '.join(str(exc).split())}") from exc
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
