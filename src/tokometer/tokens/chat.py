"""Chats: parsing JSON messages and counting what the chat template adds.

A model never sees bare messages: its chat template wraps each in role markers and control tokens
(Gemma: ``<start_of_turn>user\\n…<end_of_turn>\\n``), and those tokens count against the context
window and the bill like any other. ``count_chat`` reports them apart:

    total     tokens of the rendered prompt, as the engine will see it (generation prompt included)
    content   the sum of each message's content counted on its own
    template  total - content: what the template costs

The template is rendered by the tokenizer (`BaseTokenizer.render_chat`, through
`tokometer.tokens.template`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tokometer.messages import message_text
from tokometer.tokens.base import BaseTokenizer
from tokometer.util.errors import DatasetError
from tokometer.util.jsontext import loads

__all__ = ["ChatCount", "Messages", "count_chat", "looks_like_json", "message_text", "parse_messages"]

Messages = list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class ChatCount:
    """Tokens of a chat: the rendered prompt, its messages' content, and the template's share."""

    total: int
    content: int
    messages: int
    template_source: str

    @property
    def template(self) -> int:
        return self.total - self.content


def looks_like_json(text: str) -> bool:
    """Whether ``text`` is meant as JSON messages (it starts with ``[`` or ``{``)."""
    return text.lstrip()[:1] in ("[", "{")


def _check_message(item: Any, where: str) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise DatasetError(f"{where}: a message must be an object with 'role' and 'content'")
    role = item.get("role")
    if not isinstance(role, str) or not role:
        raise DatasetError(f"{where}: a message needs a 'role' string (system, user, assistant, ...)")
    content = item.get("content")
    if content is not None and not isinstance(content, str):
        if not isinstance(content, list) or not all(isinstance(p, dict) for p in content):
            raise DatasetError(f"{where}: 'content' must be a string or a list of parts")
        if any(p.get("type", "text") != "text" for p in content):
            raise DatasetError(f"{where}: only text parts can be counted (found an image or other part)")
    if content is None and "tool_calls" not in item:
        raise DatasetError(f"{where}: a message needs 'content'")
    return item


def parse_messages(data: str | Any, where: str = "chat") -> Messages:
    """Messages from JSON text or a parsed value: ``[{"role", "content"}, ...]`` or ``{"messages": [...]}``.

    Raises ``DatasetError`` with one line saying what is wrong."""
    if isinstance(data, str):
        try:
            data = loads(data)
        except ValueError as exc:
            raise DatasetError(f"invalid chat JSON in {where}: {exc} (give a list of messages, e.g. "
                               '[{"role": "user", "content": "Hello"}])') from None
    if isinstance(data, dict) and "messages" in data:
        data = data["messages"]
    if not isinstance(data, list) or not data:
        raise DatasetError(f"invalid chat JSON in {where}: expected a non-empty list of messages "
                           '(e.g. [{"role": "user", "content": "Hello"}]) or {"messages": [...]}')
    return [_check_message(item, f"{where}, message {i + 1}") for i, item in enumerate(data)]


def count_chat(tokenizer: BaseTokenizer, messages: Sequence[Mapping[str, Any]], *,
               add_generation_prompt: bool = True) -> ChatCount:
    """Count ``messages`` with ``tokenizer``'s chat template; see the module docstring."""
    total = tokenizer.count_chat(messages, add_generation_prompt=add_generation_prompt)
    texts = [message_text(m) for m in messages]
    content = sum(tokenizer.count_batch(texts))
    return ChatCount(total=total, content=content, messages=len(messages),
                     template_source=tokenizer.chat_template_source or "the model's chat template")
