"""Anthropic Messages request bodies as a server reads them: `MESSAGES_REQUEST`, checked at the inbound boundary.

Anthropic's API reference's shapes, with the counts and sizes of `tokometer.inbound.request_limits`:
``model`` a string, ``max_tokens`` a whole number, ``messages`` an array of
``{"role": "user" | "assistant", "content": string | blocks}``; a block is an object with a ``type``: a
``text`` block's ``text`` a string, an ``image``'s ``source`` an object, a ``tool_use``'s ``input`` an object,
a ``tool_result``'s ``content`` a string or an array of blocks (a tool result that is a number, or an array
where an object belongs, is a 400 naming it); ``system`` a string or text blocks; ``stop_sequences`` an
array of strings; ``tools`` objects with a ``name``; ``tool_choice`` an object with a ``type``.
"""

from __future__ import annotations

from tokometer.inbound.shapes import Anything, Arr, Bool, Int, Num, Obj, OneOf, Str
from tokometer.protocols.openai.request import MAX_TOKENS_LIMIT, NAME

__all__ = ["MESSAGES_REQUEST"]

_TEXT_BLOCK = Obj({"type": NAME, "text": Str()}, required=("type",), says="a content block object")
_TEXT_BLOCKS = Arr(_TEXT_BLOCK, "max_content_parts", says="an array of content blocks")
_BLOCK = Obj({
    "type": NAME,
    "text": Str(),
    "source": Obj({"type": NAME, "media_type": NAME, "data": Str(), "url": Str()}),
    "id": NAME,
    "name": NAME,
    "input": Obj(),
    "tool_use_id": NAME,
    "content": OneOf((Str(), _TEXT_BLOCKS), "a string or an array of content blocks"),
    "is_error": Bool(),
    "thinking": Str(),
    "signature": Str(),
}, required=("type",), says="a content block object")
_MESSAGE = Obj({
    "role": Str(options=("user", "assistant")),
    "content": OneOf((Str(), Arr(_BLOCK, "max_content_parts", says="an array of content blocks")),
                     "a string or an array of content blocks"),
}, required=("role", "content"), says="an object with a role and a content")

MESSAGES_REQUEST = Obj({
    "model": NAME,
    "max_tokens": Int(0, MAX_TOKENS_LIMIT),
    "messages": Arr(_MESSAGE, "max_messages", says="an array of messages"),
    "system": OneOf((Str(), _TEXT_BLOCKS), "a string or an array of text blocks"),
    "stop_sequences": Arr(Str(), "max_stop_sequences", says="an array of strings"),
    "stream": Bool(),
    "temperature": Num(),
    "top_p": Num(),
    "top_k": Int(0, MAX_TOKENS_LIMIT),
    "tools": Arr(Obj({"name": NAME, "description": Str(), "input_schema": Obj(), "type": NAME}, required=("name",),
                     says="a tool definition object"), "max_tools", says="an array of tool definitions"),
    "tool_choice": Obj({"type": NAME, "name": NAME, "disable_parallel_tool_use": Bool()}, required=("type",)),
    "metadata": Obj({"user_id": NAME}),
    "thinking": Obj({"type": NAME, "budget_tokens": Int(0, MAX_TOKENS_LIMIT)}),
    "service_tier": NAME,
    "ignore_eos": Bool(),
    "container": Anything(),
})
"""``POST /v1/messages`` (which fields are required, the translation and the server say, in Anthropic's words)."""
