"""The `Tokenizer` protocol every tokenizer provides, and `BaseTokenizer`, what the local ones add.

`Tokenizer` is all the benchmark needs (encode, decode, count; no special tokens added).
`BaseTokenizer` is what ``tokometer count`` and the budget functions use: batch counting, the
pieces behind ids, the chat template, and the model's context window when the source says it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from tokometer.tokens.template import render_template
from tokometer.util.errors import TokenizerError

__all__ = ["BaseTokenizer", "Tokenizer"]


@runtime_checkable
class Tokenizer(Protocol):
    """Encode text to token ids and back, as the model does (no special tokens added)."""

    name: str

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...

    def count(self, text: str) -> int: ...


class BaseTokenizer:
    """A `Tokenizer` with what ``tokometer count`` shows besides the count.

    ``kind`` says where it comes from (``gguf``, ``hf``, ``file``, ``tiktoken``, ``server``);
    ``context_length``/``context_source`` are the model's context window and where it was read.
    """

    name: str = "tokenizer"
    kind: str = "tokenizer"
    chat_template: str | None = None
    chat_template_source: str = ""
    context_length: int | None = None
    context_source: str = ""

    def __init__(self) -> None:
        self.special_tokens: dict[str, str] = {}

    def encode(self, text: str) -> list[int]:
        raise NotImplementedError

    def decode(self, ids: Sequence[int]) -> str:
        raise NotImplementedError

    def count(self, text: str) -> int:
        return len(self.encode(text))

    def count_batch(self, texts: Sequence[str]) -> list[int]:
        """Counts of many texts (implementations batch this where their library can)."""
        return [self.count(text) for text in texts]

    def pieces(self, ids: Sequence[int]) -> list[str]:
        """The vocabulary entry behind each id (``▁world``, ``Ġworld``, ``<0xE4>``)."""
        return [self.decode([i]) for i in ids]

    def offsets(self, text: str) -> list[tuple[int, int]] | None:
        """Character span of each token of ``text`` in ``text``, where the library gives them."""
        return None

    def render_chat(self, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = True) -> str:
        """The prompt text the chat template makes of ``messages``."""
        if not self.chat_template:
            raise TokenizerError(f"{self.name} has no chat template: give --tokenizer a Hugging Face model or "
                                 "directory whose tokenizer_config.json has one, or a GGUF file that carries one")
        return render_template(self.chat_template, messages, add_generation_prompt=add_generation_prompt,
                               **self.special_tokens)

    def count_chat(self, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = True) -> int:
        """Tokens of the rendered chat (control tokens in it count as one token each)."""
        return self.count(self.render_chat(messages, add_generation_prompt=add_generation_prompt))

    def render_chats(self, chats: Sequence[Sequence[Mapping[str, Any]]]) -> list[str] | None:
        """The prompts of many chats, where this tokenizer renders them itself and the rendered text
        counts exactly (then they can be counted in one batch); None where ``count_chat`` must count."""
        return None

    def count_chat_batch(self, chats: Sequence[Sequence[Mapping[str, Any]]]) -> list[int]:
        """``count_chat`` of many chats (with the generation prompt)."""
        return [self.count_chat(chat) for chat in chats]
