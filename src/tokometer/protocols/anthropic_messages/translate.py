"""An Anthropic Messages request as the OpenAI chat request that carries it (the gateway's inbound side).

`chat_request_from_anthropic` maps ``POST /v1/messages`` onto ``/v1/chat/completions``:

- ``system`` (a string or text blocks) becomes the first ``system`` message;
- each message's content blocks: ``text`` becomes text, ``image`` (``source`` ``base64`` or ``url``)
  an ``image_url`` part (a data URL), an assistant's ``tool_use`` a ``tool_calls`` entry (its ``input``
  as JSON ``arguments``), a user's ``tool_result`` a ``tool`` message (``tool_call_id``) ahead of the
  rest of that turn; ``thinking`` blocks of earlier turns are dropped (an upstream cannot read them);
- ``max_tokens`` (required), ``temperature``, ``top_p``, ``top_k``, ``stop_sequences`` (``stop``),
  ``stream``; ``tools`` (``name``, ``description``, ``input_schema``) become ``function`` tools and
  ``tool_choice`` (``auto``, ``any``, ``tool``, ``none``) the chat's; ``ignore_eos`` passes (vLLM
  reads it). Other fields (``metadata``, ``thinking``, ``service_tier``) are not sent on.

A field of the wrong shape is a ValueError naming it, as the API answers (the caller sends 400).
"""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["chat_request_from_anthropic"]

_PASSED = ("temperature", "top_p", "top_k", "ignore_eos")


def _text_of(blocks: Any, where: str) -> str:
    if isinstance(blocks, str):
        return blocks
    if not isinstance(blocks, list):
        raise ValueError(f"{where}: must be a string or an array of text blocks")
    parts = []
    for index, block in enumerate(blocks):
        if not isinstance(block, dict) or block.get("type") != "text" or not isinstance(block.get("text"), str):
            raise ValueError(f"{where}.{index}: must be a text block")
        parts.append(block["text"])
    return "".join(parts)


def _image(block: dict[str, Any], where: str) -> dict[str, Any]:
    source = block.get("source")
    if isinstance(source, dict) and source.get("type") == "base64":
        url = f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}"
    elif isinstance(source, dict) and source.get("type") == "url" and isinstance(source.get("url"), str):
        url = source["url"]
    else:
        raise ValueError(f"{where}.source: must be a base64 or url image source")
    return {"type": "image_url", "image_url": {"url": url}}


def _message(message: Any, index: int) -> list[dict[str, Any]]:
    """The chat messages of one Anthropic message (a user turn with tool results is several)."""
    where = f"messages.{index}"
    if not isinstance(message, dict):
        raise ValueError(f"{where}: must be an object with a role and a content")
    role = message.get("role")
    if role not in ("user", "assistant"):
        raise ValueError(f"{where}.role: must be 'user' or 'assistant'")
    content = message.get("content")
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    if not isinstance(content, list):
        raise ValueError(f"{where}.content: must be a string or an array of content blocks")
    parts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for number, block in enumerate(content):
        at = f"{where}.content.{number}"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append({"type": "text", "text": block["text"]})
        elif kind == "image":
            parts.append(_image(block, at))
        elif kind == "tool_use" and role == "assistant":
            calls.append({"id": str(block.get("id", "")), "type": "function",
                          "function": {"name": str(block.get("name", "")),
                                       "arguments": orjson.dumps(block.get("input", {})).decode()}})
        elif kind == "tool_result" and role == "user":
            result = block.get("content", "")
            text = result if isinstance(result, str) else "".join(
                part["text"] for part in result if isinstance(part, dict) and isinstance(part.get("text"), str)
            ) if isinstance(result, list) else ""
            results.append({"role": "tool", "tool_call_id": str(block.get("tool_use_id", "")), "content": text})
        elif kind in ("thinking", "redacted_thinking"):
            continue
        else:
            raise ValueError(f"{at}: a {kind!r} block is not one this gateway translates (text, image, "
                             "tool_use, tool_result, thinking)")
    out = list(results)
    if parts or calls or not results:
        text_only = all(part["type"] == "text" for part in parts)
        turn: dict[str, Any] = {"role": role,
                                "content": "".join(p["text"] for p in parts) if text_only else parts}
        if calls:
            turn["tool_calls"] = calls
        out.append(turn)
    return out


def _tools(tools: Any) -> list[dict[str, Any]]:
    if not isinstance(tools, list):
        raise ValueError("tools: must be an array of tool definitions")
    out = []
    for index, tool in enumerate(tools):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            raise ValueError(f"tools.{index}: must be an object with a name")
        function: dict[str, Any] = {"name": tool["name"],
                                    "parameters": tool.get("input_schema") or {"type": "object", "properties": {}}}
        if isinstance(tool.get("description"), str):
            function["description"] = tool["description"]
        out.append({"type": "function", "function": function})
    return out


def _tool_choice(choice: Any) -> Any:
    kind = choice.get("type") if isinstance(choice, dict) else None
    if kind == "auto":
        return "auto"
    if kind == "any":
        return "required"
    if kind == "none":
        return "none"
    if kind == "tool" and isinstance(choice.get("name"), str):
        return {"type": "function", "function": {"name": choice["name"]}}
    raise ValueError("tool_choice: must be {'type': 'auto' | 'any' | 'none'} or {'type': 'tool', 'name': ...}")


def chat_request_from_anthropic(body: dict[str, Any]) -> dict[str, Any]:
    """The chat completions body that asks what the Messages ``body`` asks."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ValueError("model: Field required (a string)")
    max_tokens = body.get("max_tokens")
    if max_tokens is None:
        raise ValueError("max_tokens: Field required")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages: at least one message is required")
    chat: list[dict[str, Any]] = []
    if body.get("system") is not None:
        chat.append({"role": "system", "content": _text_of(body["system"], "system")})
    for index, message in enumerate(messages):
        chat += _message(message, index)
    out: dict[str, Any] = {"model": model, "messages": chat, "max_tokens": max_tokens,
                           "stream": body.get("stream", False)}
    for name in _PASSED:
        if name in body:
            out[name] = body[name]
    stop = body.get("stop_sequences")
    if stop is not None:
        if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
            raise ValueError("stop_sequences: must be an array of strings")
        out["stop"] = stop
    if body.get("tools") is not None:
        out["tools"] = _tools(body["tools"])
    if body.get("tool_choice") is not None:
        out["tool_choice"] = _tool_choice(body["tool_choice"])
    return out
