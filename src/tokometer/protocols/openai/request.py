"""OpenAI request bodies as a server reads them: `CHAT_REQUEST` and `COMPLETIONS_REQUEST`, checked by `check_request`.

The gateway and the simulator both read ``model``, ``messages``, ``prompt``, ``stream``,
``max_tokens``, the sampling parameters, ``tools`` and ``logit_bias`` of a client's request; a value of the
wrong type there (``"messages": [1, 2]``, ``"stream": "yes"``, ``"max_tokens": "5"``) or over a limit (10,000
tools, 100,000 stop sequences, a 300,000-entry ``logit_bias``: `tokometer.inbound.request_limits`) is a 400
that names the field, as OpenAI answers it, never an exception further in nor work for the engine. Fields
this module does not know are left to the engine behind. The shapes are OpenAI's API reference's:

- ``messages``: an array of objects; ``role`` a string; ``content`` a string, null, or an array of
  parts (objects; a part's ``text``, where present, a string); an assistant's ``tool_calls`` objects;
- ``prompt`` (completions): a string, an array of strings, an array of token ids, or an array of
  arrays of token ids;
- ``stream`` a boolean; ``stream_options`` an object whose ``include_usage`` is a boolean;
- ``max_tokens``, ``max_completion_tokens``: whole numbers from 0 to 2^31 - 1; ``n`` from 1 to 128;
  ``seed`` any whole number that fits 64 bits; ``temperature``, ``top_p`` and the penalties finite
  numbers; ``stop`` a string or an array of strings; ``model`` and ``user`` strings;
- ``tools``: function definitions (objects, ``function.name`` a string); ``tool_choice`` a string or an
  object; ``logit_bias`` an object of token ids to numbers from -100 to 100.

Every field may also be null (absent).
"""

from __future__ import annotations

from typing import Any

from tokometer.inbound.request_limits import DEFAULT_LIMITS, RequestLimits
from tokometer.inbound.shapes import Arr, Bool, Int, Map, Num, Obj, OneOf, Str, check

__all__ = ["CHAT_REQUEST", "COMPLETIONS_REQUEST", "MAX_TOKENS_LIMIT", "TOKEN_ID", "check_request"]

MAX_TOKENS_LIMIT = 2**31 - 1
_INT64 = 2**63
NAME = Str("max_name_chars")
TOKEN_ID = Int(0, MAX_TOKENS_LIMIT)
STOP = OneOf((Str(), Arr(Str(), "max_stop_sequences")), "a string or an array of strings")
LOGIT_BIAS = Map(Num(-100, 100), "max_logit_bias_entries", NAME, "an object of token ids to numbers")

_PART = Obj({"type": NAME, "text": Str(), "image_url": OneOf((Str(), Obj({"url": Str()})), "a URL or {\"url\": ...}")},
            says="a content part object")
_CALL = Obj({"id": NAME, "type": NAME, "function": Obj({"name": NAME, "arguments": Str()})}, says="a tool call object")
_MESSAGE = Obj({
    "role": NAME,
    "name": NAME,
    "content": OneOf((Str(), Arr(_PART, "max_content_parts", says="an array of content parts")),
                     "a string, an array of content parts, or null"),
    "tool_calls": Arr(_CALL, "max_tools"),
    "tool_call_id": NAME,
}, says="an object with a role and a content")
TOOLS = Arr(Obj({"type": NAME, "function": Obj({"name": NAME, "description": Str(), "parameters": Obj()},
                                                 required=("name",))}, says="a tool definition object"), "max_tools")
TOOL_CHOICE = OneOf((Str("max_name_chars"), Obj({"type": NAME, "function": Obj({"name": NAME})})),
                    "a string or an object")

_COMMON: dict[str, Any] = {
    "model": NAME,
    "user": NAME,
    "stream": Bool(),
    "stream_options": Obj({"include_usage": Bool()}),
    "max_tokens": Int(0, MAX_TOKENS_LIMIT),
    "max_completion_tokens": Int(0, MAX_TOKENS_LIMIT),
    "n": Int(1, 128),
    "best_of": Int(1, 128),
    "seed": Int(-_INT64, _INT64 - 1),
    "temperature": Num(),
    "top_p": Num(),
    "top_k": Int(-1, MAX_TOKENS_LIMIT),
    "min_p": Num(),
    "presence_penalty": Num(),
    "frequency_penalty": Num(),
    "repetition_penalty": Num(),
    "stop": STOP,
    "stop_token_ids": Arr(TOKEN_ID, "max_stop_sequences"),
    "ignore_eos": Bool(),
    "logit_bias": LOGIT_BIAS,
    "logprobs": OneOf((Bool(), Int(0, 1024)), "a boolean or a whole number"),
    "top_logprobs": Int(0, 1024),
    "response_format": Obj({"type": NAME}),
}

CHAT_REQUEST = Obj({
    **_COMMON,
    "messages": Arr(_MESSAGE, "max_messages", says="an array of message objects"),
    "tools": TOOLS,
    "tool_choice": TOOL_CHOICE,
    "parallel_tool_calls": Bool(),
    "reasoning_effort": NAME,
}, required=("messages",))
"""``POST /v1/chat/completions``."""

_IDS = Arr(TOKEN_ID, says="an array")
COMPLETIONS_REQUEST = Obj({
    **_COMMON,
    "prompt": OneOf((Str(), Arr(Str(), "max_inputs"), _IDS, Arr(_IDS, "max_inputs")),
                    "a string, an array of strings, an array of token ids, or an array of arrays of token ids"),
    "echo": Bool(),
    "suffix": Str(),
    "logprobs": Int(0, 1024),
})
"""``POST /v1/completions``."""



def check_request(body: dict[str, Any], chat: bool, limits: RequestLimits = DEFAULT_LIMITS) -> None:
    """Raise ValueError (`tokometer.inbound.shapes.FieldError`, naming the field) if this chat (or completions)
    request has a field of the wrong type or over ``limits``."""
    check(CHAT_REQUEST if chat else COMPLETIONS_REQUEST, body, limits)
