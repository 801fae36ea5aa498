"""The simulator's ``/v1/responses``: OpenAI's Responses API, server side, as a `ProtocolServer`.

It reads and checks a request (``input`` and ``instructions`` counted as the prompt, the length cap in
``max_output_tokens``) and hands every event to the answer's
`tokometer.protocols.openai_responses.writer.ResponsesStreamWriter`, the writer the gateway's Responses clients get
too: the simulator adds only its counts (reasoning tokens, the prompt's cached tokens) and its faults
(a broken event).
"""

from __future__ import annotations

from typing import Any, ClassVar

from tokometer.protocols.common.server import (
    Count,
    RequestInfo,
    StreamTiming,
    opt_bool,
    opt_int,
    opt_str,
    prompt_tokens,
    stream_field,
)
from tokometer.protocols.common.simtools import ToolCallingServer, pick_tool, whole_call
from tokometer.protocols.openai.request import MAX_TOKENS_LIMIT
from tokometer.protocols.openai_responses.writer import ResponsesStreamWriter

__all__ = ["OpenAIResponsesServer"]


def _check_input(value: Any) -> None:
    if isinstance(value, str):
        return
    if not isinstance(value, list):
        raise ValueError("'input' must be a string or an array of input items")
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            raise ValueError(f"'input[{index}]' must be an object")
        content = item.get("content")
        if content is not None and not isinstance(content, (str, list)):
            raise ValueError(f"'input[{index}].content' must be a string or an array of content parts")


def _tool_to_call(tools: Any, choice: Any) -> str | None:
    """The tool the simulator calls (`tokometer.protocols.common.simtools`) for the Responses API's ``tools``
    (``{"type": "function", "name": ...}``) and ``tool_choice`` (none, auto, required or
    ``{"type": "function", "name": ...}``)."""
    if tools is None:
        return None
    if not isinstance(tools, list) or not all(
            isinstance(t, dict) and t.get("type") == "function" and isinstance(t.get("name"), str) for t in tools):
        raise ValueError("'tools' must be an array of {\"type\": \"function\", \"name\": ...} objects "
                         "(the simulator has no built-in tools)")
    if isinstance(choice, dict):
        named = choice.get("name")
        if choice.get("type") != "function" or not isinstance(named, str):
            raise ValueError("'tool_choice' must be none, auto, required or {\"type\": \"function\", \"name\": ...}")
        return pick_tool([t["name"] for t in tools], "required", named)
    if choice not in (None, "none", "auto", "required"):
        raise ValueError("'tool_choice' must be none, auto, required or {\"type\": \"function\", \"name\": ...}")
    return pick_tool([t["name"] for t in tools], "none" if choice == "none" else "auto")


class OpenAIResponsesServer(ToolCallingServer):
    """The event sequence OpenAI documents (`tokometer.protocols.openai_responses.writer`),
    ``sequence_number`` one apart."""

    path: ClassVar[str] = "/v1/responses"
    carries_reasoning: ClassVar[bool] = True
    stream_default: ClassVar[bool | None] = False

    def read(self, body: dict[str, Any], default_model: str, count: Count) -> RequestInfo:
        model = opt_str(body.get("model"), "model")
        value = body.get("input")
        _check_input(value)
        tokens = count(value) if isinstance(value, str) else prompt_tokens(value, count)
        instructions = body.get("instructions")
        if instructions is not None:
            if not isinstance(instructions, str):
                raise ValueError("'instructions' must be a string")
            tokens += count(instructions)
        max_tokens = opt_int(body.get("max_output_tokens"), "max_output_tokens")
        if max_tokens is not None and max_tokens > MAX_TOKENS_LIMIT:
            raise ValueError(f"'max_output_tokens' must be at most {MAX_TOKENS_LIMIT:,}")
        info = RequestInfo(model=model or default_model, prompt_tokens=tokens, max_tokens=max_tokens,
                           ignore_eos=opt_bool(body.get("ignore_eos"), "ignore_eos"), stream=stream_field(body, False))
        info.tool_name = _tool_to_call(body.get("tools"), body.get("tool_choice"))
        return info

    def _writer(self, info: RequestInfo) -> ResponsesStreamWriter:
        writer = info.writer
        if not isinstance(writer, ResponsesStreamWriter):
            writer = info.writer = ResponsesStreamWriter(info.model, info.max_tokens,
                                                         "resp_" + info.id.replace("-", "_"), info.created)
        return writer

    def _reasoning_tokens(self, info: RequestInfo, completion_tokens: int) -> int | None:
        return None if info.reasoning_tokens is None else min(info.reasoning_tokens, completion_tokens)

    def finish(self, info: RequestInfo, finish: str, completion_tokens: int, timing: StreamTiming) -> bytes:
        return self._writer(info).ending(finish, info.prompt_tokens, completion_tokens,
                                         self._reasoning_tokens(info, completion_tokens), info.cached_tokens)

    def whole(self, info: RequestInfo, text: str, reasoning: str, ids: list[int], finish: str,
              completion_tokens: int, timing: StreamTiming) -> dict[str, Any]:
        calls = whole_call(info, text, finish)
        return self._writer(info).whole("" if calls else text, reasoning, calls, finish, info.prompt_tokens,
                                        completion_tokens, self._reasoning_tokens(info, completion_tokens),
                                        info.cached_tokens)

    def error_event(self, info: RequestInfo, message: str) -> bytes:
        return self._writer(info).error(message)

    def malformed(self) -> bytes:
        return b'event: response.output_text.delta\ndata: {"type": "response.output_text.delta", "delta": "bro\n\n'
