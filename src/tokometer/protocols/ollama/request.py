"""Ollama ``/api/chat`` request bodies as a server reads them: `CHAT_REQUEST`, checked at the inbound boundary.

Ollama's API documentation's shapes, with the counts of `tokometer.inbound.request_limits`: ``messages``
objects (``role`` and ``content`` strings, ``images`` strings, ``tool_calls`` objects), ``options`` an
object (``num_predict`` a whole number, ``stop`` strings, the sampling numbers), ``tools`` objects,
``stream`` and ``think`` booleans, ``format`` a string or a JSON schema object.
"""

from __future__ import annotations

from tokometer.inbound.shapes import Arr, Bool, Int, Num, Obj, OneOf, Str
from tokometer.protocols.openai.request import MAX_TOKENS_LIMIT, NAME, TOOLS

__all__ = ["CHAT_REQUEST"]

_MESSAGE = Obj({
    "role": NAME,
    "content": Str(),
    "thinking": Str(),
    "images": Arr(Str(), "max_content_parts"),
    "tool_calls": Arr(Obj({"function": Obj({"name": NAME, "arguments": Obj()})}), "max_tools"),
    "tool_name": NAME,
}, says="an object with a role and a content")

CHAT_REQUEST = Obj({
    "model": NAME,
    "messages": Arr(_MESSAGE, "max_messages", says="an array of message objects"),
    "stream": Bool(),
    "think": OneOf((Bool(), NAME), "a boolean or a level"),
    "format": OneOf((Str(), Obj()), "a string or a JSON schema object"),
    "keep_alive": OneOf((Str("max_name_chars"), Num()), "a duration"),
    "tools": TOOLS,
    "options": Obj({
        "num_predict": Int(-2, MAX_TOKENS_LIMIT),
        "num_ctx": Int(0, MAX_TOKENS_LIMIT),
        "seed": Int(-2**63, 2**63 - 1),
        "temperature": Num(),
        "top_p": Num(),
        "top_k": Int(0, MAX_TOKENS_LIMIT),
        "min_p": Num(),
        "repeat_penalty": Num(),
        "stop": Arr(Str(), "max_stop_sequences"),
    }),
})
"""``POST /api/chat``."""
