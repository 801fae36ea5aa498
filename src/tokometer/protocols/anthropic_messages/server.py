"""The simulator's ``/v1/messages``: Anthropic's Messages API, server side, as a `ProtocolServer`.

It reads and checks a request (``max_tokens`` required, ``system`` and the messages counted as the
prompt) and hands every event to the answer's `tokometer.protocols.anthropic_messages.writer.AnthropicStreamWriter`,
the writer the gateway's Anthropic clients get too: the simulator adds only what a real server knows
and the gateway does not (the true prompt and cache-read counts in ``message_start``, a thinking
block's signature) and its faults (a broken event).
"""

from __future__ import annotations

from typing import Any, ClassVar

from tokometer.messages import content_text, message_text
from tokometer.protocols.anthropic_messages.writer import AnthropicStreamWriter, anthropic_error_body, error_type
from tokometer.protocols.common.server import (
    Count,
    RequestInfo,
    StreamTiming,
    opt_bool,
    opt_int,
    opt_str,
    stream_field,
)
from tokometer.protocols.common.simtools import ToolCallingServer, pick_tool, whole_call

__all__ = ["SIGNATURE", "AnthropicMessagesServer"]

SIGNATURE = "c2ltdWxhdGVk"
"""The signature that closes the simulator's thinking blocks ("simulated", base64)."""


def _prompt_tokens(body: dict[str, Any], count: Count) -> int:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages: at least one message is required")
    total = 0
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise ValueError(f"messages.{index}: must be an object with a role and a content")
        if message.get("role") not in ("user", "assistant"):
            raise ValueError(f"messages.{index}.role: must be 'user' or 'assistant'")
        content = message.get("content")
        if not isinstance(content, (str, list)):
            raise ValueError(f"messages.{index}.content: must be a string or an array of content blocks")
        total += count(message_text(message))
    system = body.get("system")
    if system is not None:
        if not isinstance(system, (str, list)):
            raise ValueError("system: must be a string or an array of text blocks")
        total += count(content_text(system))
    return total


def _tool_to_call(tools: Any, choice: Any) -> str | None:
    """The tool the simulator calls (`tokometer.protocols.common.simtools`) for Anthropic's ``tools`` (objects
    with a ``name``) and ``tool_choice`` (``{"type": "auto" | "any" | "none" | "tool", "name": ...}``)."""
    if tools is None:
        return None
    if not isinstance(tools, list) or not all(isinstance(t, dict) and isinstance(t.get("name"), str) for t in tools):
        raise ValueError("tools: must be an array of tool objects with a name")
    kind = choice.get("type") if isinstance(choice, dict) else None if choice is None else ""
    if kind not in (None, "auto", "any", "none", "tool"):
        raise ValueError("tool_choice: must be {\"type\": \"auto\" | \"any\" | \"none\" | \"tool\"}")
    named = choice.get("name") if kind == "tool" and isinstance(choice, dict) else None
    if kind == "tool" and not isinstance(named, str):
        raise ValueError("tool_choice.name: required for {\"type\": \"tool\"}")
    return pick_tool([t["name"] for t in tools], "none" if kind == "none" else "auto", named)


class AnthropicMessagesServer(ToolCallingServer):
    """The event sequence Anthropic documents (`tokometer.protocols.anthropic_messages.writer`): reasoning in a
    ``thinking`` block before the ``text`` block."""

    path: ClassVar[str] = "/v1/messages"
    carries_reasoning: ClassVar[bool] = True
    stream_default: ClassVar[bool | None] = False

    def read(self, body: dict[str, Any], default_model: str, count: Count) -> RequestInfo:
        model = opt_str(body.get("model"), "model")
        if body.get("max_tokens") is None:
            raise ValueError("max_tokens: Field required")
        info = RequestInfo(model=model or default_model, prompt_tokens=_prompt_tokens(body, count),
                           max_tokens=opt_int(body.get("max_tokens"), "max_tokens"),
                           ignore_eos=opt_bool(body.get("ignore_eos"), "ignore_eos"), stream=stream_field(body, False))
        info.tool_name = _tool_to_call(body.get("tools"), body.get("tool_choice"))
        return info

    def _writer(self, info: RequestInfo) -> AnthropicStreamWriter:
        """The answer's writer, made at its first event (when the prompt's cached tokens are known)."""
        writer = info.writer
        if not isinstance(writer, AnthropicStreamWriter):
            writer = info.writer = AnthropicStreamWriter(info.model, info.prompt_tokens,
                                                         "msg_" + info.id.replace("-", "_"), info.cached_tokens,
                                                         SIGNATURE)
        return writer

    def finish(self, info: RequestInfo, finish: str, completion_tokens: int, timing: StreamTiming) -> bytes:
        return self._writer(info).ending(finish, info.prompt_tokens, completion_tokens, None, info.cached_tokens)

    def whole(self, info: RequestInfo, text: str, reasoning: str, ids: list[int], finish: str,
              completion_tokens: int, timing: StreamTiming) -> dict[str, Any]:
        calls = whole_call(info, text, finish)
        return self._writer(info).whole("" if calls else text, reasoning, calls, finish, info.prompt_tokens,
                                        completion_tokens, info.cached_tokens)

    def error_event(self, info: RequestInfo, message: str) -> bytes:
        return self._writer(info).error(message)

    def malformed(self) -> bytes:
        return b'event: content_block_delta\ndata: {"type": "content_block_delta", "delta": {"text": "bro\n\n'

    def error_body(self, status: int, message: str, kind: str) -> dict[str, Any]:
        return anthropic_error_body(error_type(status), message)
