"""A chat message's content as text: the one reading the bench, the gateway, the simulator and `count` share.

OpenAI's ``content`` is a string, or a list of parts (``{"type": "text", "text": ...}``, images,
audio). The text parts are joined with a newline, as vLLM does when it turns a parts list into a
string for a chat template (``vllm/entrypoints/chat_utils.py``); parts without text count as
nothing. ``None`` (an assistant message with only tool calls) is the empty string.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["content_text", "message_text"]


def content_text(content: Any) -> str:
    """The text of a ``content`` value: a string as it is, the text parts of a list joined by newlines."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part["text"]) for part in content
                         if isinstance(part, Mapping) and part.get("text") is not None)
    return str(content)


def message_text(message: Mapping[str, Any]) -> str:
    """The text of one message (``message["content"]``, see `content_text`)."""
    return content_text(message.get("content"))
