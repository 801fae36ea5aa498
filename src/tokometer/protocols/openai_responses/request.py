"""Responses API request bodies as a server reads them: `RESPONSES_REQUEST`, checked at the inbound boundary.

OpenAI's API reference's shapes, with the counts and sizes of `tokometer.inbound.request_limits`: ``input``
a string or an array of items (objects: messages with a ``role`` and a ``content`` string or parts,
``function_call`` items with a ``call_id``, ``name`` and ``arguments`` string, ``function_call_output``
items whose ``output`` is a string or parts, never a number); ``instructions`` a string;
``max_output_tokens`` a whole number; ``tools`` objects with a ``type``; ``tool_choice`` a string or
an object.
"""

from __future__ import annotations

from tokometer.inbound.shapes import Arr, Bool, Int, Map, Num, Obj, OneOf, Str
from tokometer.protocols.openai.request import MAX_TOKENS_LIMIT, NAME, TOOL_CHOICE

__all__ = ["RESPONSES_REQUEST"]

_PART = Obj({"type": NAME, "text": Str(), "image_url": Str(), "file_id": NAME, "detail": NAME},
            says="a content part object")
_PARTS = Arr(_PART, "max_content_parts", says="an array of content parts")
_ITEM = Obj({
    "type": NAME,
    "role": NAME,
    "content": OneOf((Str(), _PARTS), "a string or an array of content parts"),
    "id": NAME,
    "call_id": NAME,
    "name": NAME,
    "arguments": Str(),
    "output": OneOf((Str(), _PARTS), "a string or an array of content parts"),
    "status": NAME,
}, says="an input item object")

RESPONSES_REQUEST = Obj({
    "model": NAME,
    "input": OneOf((Str(), Arr(_ITEM, "max_messages", says="an array of input items")),
                   "a string or an array of input items"),
    "instructions": Str(),
    "max_output_tokens": Int(0, MAX_TOKENS_LIMIT),
    "stream": Bool(),
    "temperature": Num(),
    "top_p": Num(),
    "tools": Arr(Obj({"type": NAME, "name": NAME, "description": Str(), "parameters": Obj(), "strict": Bool()},
                     says="a tool definition object"), "max_tools", says="an array of tool definitions"),
    "tool_choice": TOOL_CHOICE,
    "parallel_tool_calls": Bool(),
    "previous_response_id": NAME,
    "reasoning": Obj({"effort": NAME, "summary": NAME}),
    "text": Obj({"format": Obj({"type": NAME})}),
    "metadata": Map(Str(), "max_content_parts"),
    "store": Bool(),
    "user": NAME,
    "ignore_eos": Bool(),
})
"""``POST /v1/responses``."""
