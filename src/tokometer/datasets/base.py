"""The `PromptSource` protocol every dataset implements (its prompts: `tokometer.prompt.Prompt`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from tokometer.prompt import Prompt

__all__ = ["PromptSource"]


class PromptSource(Protocol):
    """An endless or finite supply of prompts, deterministic for a given seed."""

    name: str

    def prompts(self) -> Iterator[Prompt]:
        """Yield prompts; a finite source is cycled by the runner if it runs out."""
        ...
