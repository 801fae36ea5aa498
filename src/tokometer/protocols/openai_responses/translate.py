"""A Responses API request as the OpenAI chat request that carries it (the gateway's inbound side).

`chat_request_from_responses` maps ``POST /v1/responses`` onto ``/v1/chat/completions``:

- ``instructions`` becomes the first ``system`` message; ``input`` is a string (one user message) or
  a list of items: messages (``role`` ``user``, ``assistant``, ``system``, ``developer`` as
  ``system``; content a string or ``input_text`` / ``output_text`` / ``input_image`` parts),
  ``function_call`` items (the assistant's ``tool_calls``, consecutive ones in one message) and
  ``function_call_output`` items (``tool`` messages with the ``call_id``);
- ``max_output_tokens`` becomes ``max_tokens``; ``temperature``, ``top_p``, ``stream`` and
  ``ignore_eos`` pass; ``tools`` of type ``function`` (``name``, ``description``, ``parameters``)
  become chat tools and ``tool_choice`` the chat's. Built-in tools (web search, file search, ...)
  and ``previous_response_id`` are refused: the gateway runs no tools and keeps no responses.
  Other fields (``reasoning``, ``text``, ``store``, ``metadata``) are not sent on.

A field of the wrong shape is a ValueError naming it (the caller sends 400).
"""

from __future__ import annotations

from typing import Any

__all__ = ["chat_request_from_responses"]

_PASSED = ("temperature", "top_p", "ignore_eos")
_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}


def _content(content: Any, where: str) -> Any:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise ValueError(f"'{where}.content' must be a string or an array of content parts")
    parts: list[dict[str, Any]] = []
    for index, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("input_text", "output_text", "text") and isinstance(part.get("text"), str):
            parts.append({"type": "text", "text": part["text"]})
        elif kind == "input_image" and isinstance(part.get("image_url"), str):
            parts.append({"type": "image_url", "image_url": {"url": part["image_url"]}})
        else:
            raise ValueError(f"'{where}.content[{index}]': a {kind!r} part is not one this gateway translates "
                             "(input_text, output_text, input_image with an image_url)")
    if all(part["type"] == "text" for part in parts):
        return "".join(part["text"] for part in parts)
    return parts


def _items(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if not isinstance(value, list) or not value:
        raise ValueError("'input' must be a string or a non-empty array of input items")
    out: list[dict[str, Any]] = []
    for index, item in enumerate(value):
        where = f"input[{index}]"
        if not isinstance(item, dict):
            raise ValueError(f"'{where}' must be an object")
        kind = item.get("type", "message")
        if kind == "function_call":
            call = {"id": str(item.get("call_id", "")), "type": "function",
                    "function": {"name": str(item.get("name", "")), "arguments": str(item.get("arguments", ""))}}
            last = out[-1] if out else None
            if last is not None and last["role"] == "assistant" and "tool_calls" in last:
                last["tool_calls"].append(call)
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item.get("output", "")
            out.append({"role": "tool", "tool_call_id": str(item.get("call_id", "")),
                        "content": output if isinstance(output, str) else str(output)})
        elif kind == "message":
            role = _ROLES.get(str(item.get("role")))
            if role is None:
                raise ValueError(f"'{where}.role' must be one of user, assistant, system, developer")
            out.append({"role": role, "content": _content(item.get("content"), where)})
        elif kind == "reasoning":
            continue  # an earlier turn's reasoning: an upstream cannot read it
        else:
            raise ValueError(f"'{where}': a {kind!r} item is not one this gateway translates (message, "
                             "function_call, function_call_output)")
    return out


def _tools(tools: Any) -> list[dict[str, Any]]:
    if not isinstance(tools, list):
        raise ValueError("'tools' must be an array of tool definitions")
    out = []
    for index, tool in enumerate(tools):
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(tool.get("name"), str):
            kind = tool.get("type") if isinstance(tool, dict) else None
            raise ValueError(f"'tools[{index}]': only function tools with a name are relayed (got {kind!r}: the "
                             "gateway runs no built-in tools)")
        function: dict[str, Any] = {"name": tool["name"],
                                    "parameters": tool.get("parameters") or {"type": "object", "properties": {}}}
        for name in ("description", "strict"):
            if tool.get(name) is not None:
                function[name] = tool[name]
        out.append({"type": "function", "function": function})
    return out


def _tool_choice(choice: Any) -> Any:
    if choice in ("auto", "none", "required"):
        return choice
    if isinstance(choice, dict) and choice.get("type") == "function" and isinstance(choice.get("name"), str):
        return {"type": "function", "function": {"name": choice["name"]}}
    raise ValueError("'tool_choice' must be 'auto', 'none', 'required' or {'type': 'function', 'name': ...}")


def chat_request_from_responses(body: dict[str, Any]) -> dict[str, Any]:
    """The chat completions body that asks what the Responses ``body`` asks."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ValueError("'model' is required (a string)")
    if body.get("previous_response_id") is not None:
        raise ValueError("'previous_response_id' is not supported: the gateway keeps no responses (send the "
                         "conversation in 'input')")
    messages = _items(body.get("input"))
    instructions = body.get("instructions")
    if instructions is not None:
        if not isinstance(instructions, str):
            raise ValueError("'instructions' must be a string")
        messages.insert(0, {"role": "system", "content": instructions})
    out: dict[str, Any] = {"model": model, "messages": messages, "stream": body.get("stream", False)}
    if body.get("max_output_tokens") is not None:
        out["max_tokens"] = body["max_output_tokens"]
    for name in _PASSED:
        if name in body:
            out[name] = body[name]
    if body.get("tools") is not None:
        out["tools"] = _tools(body["tools"])
    if body.get("tool_choice") is not None:
        out["tool_choice"] = _tool_choice(body["tool_choice"])
    return out
