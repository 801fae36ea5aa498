"""OpenAI request bodies as a server reads them: `check_request` refuses the wrong types before they are used.

The gateway and the simulator both read ``model``, ``messages``, ``prompt``, ``stream``,
``max_tokens`` and the sampling parameters of a client's request; a value of the wrong type there
(``"messages": [1, 2]``, ``"stream": "yes"``, ``"max_tokens": "5"``) is a 400 that names the field,
as OpenAI answers it, never an exception further in. Fields this module does not know are left to
the engine behind. The shapes are OpenAI's API reference's:

- ``messages``: an array of objects; ``role`` a string; ``content`` a string, null, or an array of
  parts (objects; a part's ``text``, where present, a string);
- ``prompt`` (completions): a string, an array of strings, an array of token ids, or an array of
  arrays of token ids;
- ``stream`` a boolean; ``stream_options`` an object whose ``include_usage`` is a boolean;
- ``max_tokens``, ``max_completion_tokens``: whole numbers from 0 to 2^31 - 1; ``n`` from 1;
  ``seed`` any whole number that fits 64 bits; ``temperature``, ``top_p`` and the penalties finite
  numbers; ``stop`` a string or an array of strings; ``model`` and ``user`` strings.

Every field may also be null (absent).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

__all__ = ["MAX_TOKENS_LIMIT", "check_request"]

MAX_TOKENS_LIMIT = 2**31 - 1
_INT64 = 2**63


def check_request(body: dict[str, Any], chat: bool) -> None:
    """Raise ValueError (naming the field) if a field of this chat (or completions) request has the wrong type."""
    for name, check in _COMMON.items():
        value = body.get(name)
        if value is not None:
            check(name, value)
    if chat:
        _messages(body.get("messages"))
    else:
        _prompt(body.get("prompt"))


def _string(name: str, value: Any) -> None:
    if not isinstance(value, str):
        raise ValueError(f"'{name}' must be a string")


def _boolean(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"'{name}' must be a boolean (true or false)")


def _whole(low: int, high: int) -> Callable[[str, Any], None]:
    def check(name: str, value: Any) -> None:
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise ValueError(f"'{name}' must be a whole number from {low:,} to {high:,}")
    return check


def _number(name: str, value: Any) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise ValueError(f"'{name}' must be a finite number")


def _stop(name: str, value: Any) -> None:
    if not isinstance(value, str) and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
        raise ValueError(f"'{name}' must be a string or an array of strings")


def _stream_options(name: str, value: Any) -> None:
    if not isinstance(value, dict):
        raise ValueError(f"'{name}' must be an object")
    if value.get("include_usage") is not None:
        _boolean(f"{name}.include_usage", value["include_usage"])


_COMMON: dict[str, Callable[[str, Any], None]] = {
    "model": _string,
    "user": _string,
    "stream": _boolean,
    "stream_options": _stream_options,
    "max_tokens": _whole(0, MAX_TOKENS_LIMIT),
    "max_completion_tokens": _whole(0, MAX_TOKENS_LIMIT),
    "n": _whole(1, MAX_TOKENS_LIMIT),
    "seed": _whole(-_INT64, _INT64 - 1),
    "temperature": _number,
    "top_p": _number,
    "presence_penalty": _number,
    "frequency_penalty": _number,
    "stop": _stop,
    "ignore_eos": _boolean,
}


def _messages(messages: Any) -> None:
    if not isinstance(messages, list):
        raise ValueError("'messages' must be an array of message objects")
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            raise ValueError(f"'{where}' must be an object with a role and a content")
        role = message.get("role")
        if role is not None and not isinstance(role, str):
            raise ValueError(f"'{where}.role' must be a string")
        content = message.get("content")
        if content is None or isinstance(content, str):
            continue
        if not isinstance(content, list):
            raise ValueError(f"'{where}.content' must be a string, an array of content parts, or null")
        for number, part in enumerate(content):
            if not isinstance(part, dict):
                raise ValueError(f"'{where}.content[{number}]' must be a content part object")
            if part.get("text") is not None and not isinstance(part["text"], str):
                raise ValueError(f"'{where}.content[{number}].text' must be a string")


def _token_ids(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in value)


def _prompt(prompt: Any) -> None:
    if prompt is None or isinstance(prompt, str):
        return
    if isinstance(prompt, list) and (all(isinstance(p, str) for p in prompt) or _token_ids(prompt)
                                     or all(_token_ids(p) for p in prompt)):
        return
    raise ValueError("'prompt' must be a string, an array of strings, an array of token ids, or an array of "
                     "arrays of token ids")
