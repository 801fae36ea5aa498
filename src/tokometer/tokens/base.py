"""The `Tokenizer` protocol every tokenizer implementation provides."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

__all__ = ["Tokenizer"]


@runtime_checkable
class Tokenizer(Protocol):
    """Encode text to token ids and back, as the model does (no special tokens added)."""

    name: str

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...

    def count(self, text: str) -> int: ...
