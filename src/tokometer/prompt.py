"""`Prompt`: what one request sends, in chat and plain-text form; `Message`, one chat message.

A leaf: the prompt sources (`tokometer.datasets`) make prompts and the protocols (`tokometer.protocols`) send
them, so it lives below both.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Message", "Prompt", "chat_to_text"]


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message."""

    role: str
    content: str


@dataclass(frozen=True, slots=True)
class Prompt:
    """What one request sends.

    ``messages`` is the chat form; ``text`` the plain-completion form of the same
    prompt (for chat prompts, the messages joined, since no chat template is
    applied on the client side). ``input_tokens`` is the length the source made
    it to be, when known. ``max_tokens`` overrides the run's output length for
    this prompt (ShareGPT-style sources carry a reference answer length; a trace, the exact one).
    ``prefix_group`` is the shared prefix the prompt starts with (``--prefix-groups``), and
    ``prefix_first`` marks the source's first prompt with it.
    """

    messages: tuple[Message, ...]
    text: str
    input_tokens: int | None = None
    max_tokens: int | None = None
    prefix_group: int | None = None
    prefix_first: bool = False
    exact_length: bool = False
    """``max_tokens`` is the answer's length to reproduce (a trace's ``output_length``), not a reference: it
    holds with ``--ignore-eos`` too (`tokometer.protocols.common.base.answer_length`)."""
    images: tuple[str, ...] = ()
    """Images sent with the last message, as ``data:`` URLs (``--images``; chat APIs only)."""
    tenant: str | None = None
    """The tenant of a mix that sends it (``--mix``, `tokometer.datasets.mix`); None: no mix."""
    model: str | None = None
    """The model (or LoRA adapter) asked for instead of the run's; None: the run's."""
    headers: tuple[tuple[str, str], ...] = ()
    """Headers sent with it over the run's own (a tenant's)."""

    @classmethod
    def from_text(cls, text: str, *, input_tokens: int | None = None, max_tokens: int | None = None) -> Prompt:
        return cls((Message("user", text),), text, input_tokens, max_tokens)

    @classmethod
    def from_messages(cls, messages: tuple[Message, ...], *, max_tokens: int | None = None) -> Prompt:
        return cls(messages, chat_to_text(messages), None, max_tokens)


def chat_to_text(messages: tuple[Message, ...]) -> str:
    """Join chat messages for protocols that take plain text."""
    if len(messages) == 1:
        return messages[0].content
    return "\n\n".join(f"{m.role}: {m.content}" for m in messages)
