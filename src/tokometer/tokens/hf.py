"""A tokenizer from a Hugging Face ``tokenizer.json`` file (the `tokenizers` library)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tokometer.errors import TokenizerError

__all__ = ["FileTokenizer"]


class FileTokenizer:
    """Loads ``tokenizer.json`` (or a directory holding one) with no network access."""

    def __init__(self, path: str | Path) -> None:
        from tokenizers import Tokenizer as _HFTokenizer

        p = Path(path)
        if p.is_dir():
            p = p / "tokenizer.json"
        if not p.is_file():
            raise TokenizerError(f"no tokenizer file at {p}: give a tokenizer.json or a directory holding one")
        try:
            self._tok = _HFTokenizer.from_file(str(p))
        except Exception as exc:  # the library raises a bare Exception for bad files
            raise TokenizerError(f"cannot load tokenizer {p}: {exc}") from exc
        self.name = str(p)

    def encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: Sequence[int]) -> str:
        return str(self._tok.decode(list(ids), skip_special_tokens=False))

    def count(self, text: str) -> int:
        return len(self._tok.encode(text, add_special_tokens=False).ids)
