"""OpenAI's Responses API: ``POST {base}/responses`` with ``input``, streamed as typed SSE events.

Every event is an SSE ``event: TYPE`` line and a ``data:`` line holding a JSON object whose ``type``
is TYPE again (the data line is what `tokometer.wire.framing.sse_payload` reads). The ones read:

- ``response.output_text.delta``: answer text (``delta``);
- ``response.reasoning_text.delta`` (vLLM, open models) and ``response.reasoning_summary_text.delta``
  (OpenAI's reasoning models): reasoning text (``delta``);
- ``response.completed`` / ``response.incomplete``: the end, with the whole ``response`` object: its
  ``status`` (``completed``; ``incomplete`` with ``incomplete_details.reason`` ``max_output_tokens`` is
  a ``length`` finish; vLLM sends ``response.completed`` with status ``incomplete``) and ``usage``
  (``input_tokens``, ``output_tokens``, ``input_tokens_details.cached_tokens``,
  ``output_tokens_details.reasoning_tokens``);
- ``response.failed`` (``response.error.message``) and ``error`` (``message``, ``code``): failures.

The rest (``response.created``, ``response.in_progress``, ``response.output_item.added``,
``response.content_part.added``, the ``*.done`` events) carry nothing a measurement needs. There is no
``[DONE]`` sentinel. The request's length cap is ``max_output_tokens``; ``stream`` defaults to false.
The API has no ``seed``; ``ignore_eos`` is sent only when asked for (vLLM reads it).
"""

from __future__ import annotations

from typing import Any, ClassVar

import orjson

from tokometer.datasets.base import Prompt
from tokometer.wire.base import Backend, GenerationParams, HttpRequest, ParsedEvent, answer_length
from tokometer.wire.numbers import count, obj, text_field
from tokometer.wire.openai_request import MAX_TOKENS_LIMIT
from tokometer.wire.server_protocol import (
    Count,
    RequestInfo,
    ServerProtocol,
    StreamTiming,
    no_field,
    opt_int,
    prompt_tokens,
    stream_field,
)

__all__ = ["OpenAIResponses", "OpenAIResponsesServer", "read_responses_usage", "responses_event"]

_REASONING_DELTAS = frozenset({"response.reasoning_text.delta", "response.reasoning_summary_text.delta"})
_FINAL = frozenset({"response.completed", "response.incomplete"})


class OpenAIResponses(Backend):
    """``POST {base}/responses``."""

    name: ClassVar[str] = "openai-responses"

    def build(self, prompt: Prompt, params: GenerationParams) -> HttpRequest:
        body: dict[str, Any] = {
            "model": params.model,
            "input": [{"role": m.role, "content": m.content} for m in prompt.messages],
            "stream": True,
        }
        if (max_tokens := answer_length(prompt, params)) is not None:
            body["max_output_tokens"] = max_tokens
        if params.temperature is not None:
            body["temperature"] = params.temperature
        if params.ignore_eos:
            body["ignore_eos"] = True
        body.update(params.extra_body)
        return HttpRequest("/responses", body)

    def parse(self, payload: bytes) -> ParsedEvent | None:
        data = orjson.loads(payload)
        if not isinstance(data, dict):
            raise ValueError("event is not a JSON object")
        kind = data.get("type")
        if kind == "response.output_text.delta":
            return ParsedEvent(text=text_field(data, "delta"))
        if kind in _REASONING_DELTAS:
            return ParsedEvent(reasoning=text_field(data, "delta"))
        if kind in _FINAL:
            event = ParsedEvent(done=True, meta=True)
            response = obj(data.get("response"))
            event.finish_reason = _finish(response)
            usage = response.get("usage")
            if isinstance(usage, dict):
                read_responses_usage(usage, event)
            return event
        if kind == "response.failed":
            error = obj(obj(data.get("response")).get("error"))
            return ParsedEvent(error=_error_text(error) or "response.failed without an error message")
        if kind == "error":
            nested = data.get("error")
            return ParsedEvent(error=_error_text(obj(nested) if isinstance(nested, dict) else data) or "error event")
        if kind is None and data.get("error"):  # an OpenAI error object sent as an event
            error = data["error"]
            return ParsedEvent(error=_error_text(error) if isinstance(error, dict) else str(error))
        return None


def _error_text(error: dict[str, Any]) -> str:
    message = str(error.get("message") or "")
    code = error.get("code") or error.get("type")
    return f"{code}: {message}" if code and message else message or (str(code) if code else "")


def _finish(response: dict[str, Any]) -> Any:
    status = response.get("status")
    if status == "completed":
        return "stop"
    if status == "incomplete":
        reason = obj(response.get("incomplete_details")).get("reason")
        return "length" if reason in (None, "max_output_tokens") else "unknown"
    return None


def read_responses_usage(usage: dict[str, Any], event: ParsedEvent) -> None:
    """The Responses API's ``usage`` onto ``event``, every count through `tokometer.wire.numbers.count`."""
    event.prompt_tokens = count(event, "usage.input_tokens", usage.get("input_tokens"))
    event.completion_tokens = count(event, "usage.output_tokens", usage.get("output_tokens"))
    cached = count(event, "usage.input_tokens_details.cached_tokens",
                   obj(usage.get("input_tokens_details")).get("cached_tokens"))
    if cached is not None:
        event.cached_prompt_tokens = cached
    event.reasoning_tokens = count(event, "usage.output_tokens_details.reasoning_tokens",
                                   obj(usage.get("output_tokens_details")).get("reasoning_tokens"))


def responses_event(payload: dict[str, Any]) -> bytes:
    """One streamed event as the API writes it: ``event: TYPE`` and the JSON ``data`` line."""
    return b"event: " + str(payload["type"]).encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"


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


class OpenAIResponsesServer(ServerProtocol):
    """The server side (the simulator): the event sequence OpenAI documents, with ``sequence_number``s that
    rise through the stream (not one apart: the numbering follows the tokens sent)."""

    path: ClassVar[str] = "/v1/responses"
    carries_reasoning: ClassVar[bool] = True
    stream_default: ClassVar[bool | None] = False

    def read(self, body: dict[str, Any], default_model: str, count: Count) -> RequestInfo:
        model = body.get("model")
        if model is not None and not isinstance(model, str):
            raise ValueError("'model' must be a string")
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
        ignore_eos = body.get("ignore_eos")
        if ignore_eos is not None and not isinstance(ignore_eos, bool):
            raise ValueError("'ignore_eos' must be a boolean (true or false)")
        return RequestInfo(model=model or default_model, prompt_tokens=tokens, max_tokens=max_tokens,
                           ignore_eos=bool(ignore_eos), stream=stream_field(body, False))

    def _id(self, info: RequestInfo) -> str:
        return "resp_" + info.id.replace("-", "_")

    def _response(self, info: RequestInfo, status: str, output: list[dict[str, Any]] | None = None,
                  usage: dict[str, Any] | None = None, incomplete: bool = False) -> dict[str, Any]:
        return {"id": self._id(info), "object": "response", "created_at": info.created, "status": status,
                "model": info.model, "output": output or [], "error": None,
                "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
                "max_output_tokens": info.max_tokens, "usage": usage}

    def _reasoning_n(self, info: RequestInfo) -> int:
        return info.reasoning_tokens or 0

    def _item(self, info: RequestInfo, reasoning: bool) -> tuple[int, str]:
        """(output_index, item id) of the reasoning item or the message item."""
        if reasoning:
            return 0, "rs_" + info.id.replace("-", "_")
        return (1 if self._reasoning_n(info) else 0), "msg_" + info.id.replace("-", "_")

    def _event(self, kind: str, seq: int, **fields: Any) -> bytes:
        return responses_event({"type": kind, "sequence_number": seq, **fields})

    def _opening(self, info: RequestInfo) -> bytes:
        response = self._response(info, "in_progress")
        return self._event("response.created", 0, response=response) + \
            self._event("response.in_progress", 1, response=response)

    def _added(self, info: RequestInfo, reasoning: bool, seq: int) -> bytes:
        index, item_id = self._item(info, reasoning)
        if reasoning:
            item = {"id": item_id, "type": "reasoning", "summary": [], "content": [], "status": "in_progress"}
            return self._event("response.output_item.added", seq, output_index=index, item=item)
        item = {"id": item_id, "type": "message", "role": "assistant", "content": [], "status": "in_progress"}
        part = {"type": "output_text", "text": "", "annotations": []}
        return (self._event("response.output_item.added", seq, output_index=index, item=item)
                + self._event("response.content_part.added", seq + 1, item_id=item_id, output_index=index,
                              content_index=0, part=part))

    def tokens(self, info: RequestInfo, ids: list[int], text: str, done_before: int, reasoning: str = "") -> bytes:
        no_field(self, reasoning)
        seq = 2 + 8 * done_before  # rises through the stream: at most 8 events per content event
        out = [self._opening(info)] if done_before == 0 else []
        n = self._reasoning_n(info)
        if reasoning:
            if done_before == 0:
                out.append(self._added(info, True, seq))
            index, item_id = self._item(info, True)
            out.append(self._event("response.reasoning_text.delta", seq + 1, item_id=item_id, output_index=index,
                                   content_index=0, delta=reasoning))
        if text:
            if done_before <= n:  # the answer's first token is in this event
                out.append(self._added(info, False, seq + 2))
            index, item_id = self._item(info, False)
            out.append(self._event("response.output_text.delta", seq + 4, item_id=item_id, output_index=index,
                                   content_index=0, delta=text, logprobs=[]))
        return b"".join(out)

    def _usage(self, info: RequestInfo, completion_tokens: int) -> dict[str, Any]:
        usage: dict[str, Any] = {"input_tokens": info.prompt_tokens, "output_tokens": completion_tokens,
                                 "total_tokens": info.prompt_tokens + completion_tokens}
        if info.cached_tokens is not None:
            usage["input_tokens_details"] = {"cached_tokens": info.cached_tokens}
        if info.reasoning_tokens is not None:
            usage["output_tokens_details"] = {"reasoning_tokens": min(info.reasoning_tokens, completion_tokens)}
        return usage

    def finish(self, info: RequestInfo, finish: str, completion_tokens: int, timing: StreamTiming) -> bytes:
        opening = self._opening(info) if completion_tokens == 0 else b""
        incomplete = finish == "length"
        response = self._response(info, "incomplete" if incomplete else "completed",
                                  usage=self._usage(info, completion_tokens), incomplete=incomplete)
        kind = "response.incomplete" if incomplete else "response.completed"
        return opening + self._event(kind, 2 + 8 * completion_tokens + 8, response=response)

    def whole(self, info: RequestInfo, text: str, reasoning: str, ids: list[int], finish: str,
              completion_tokens: int, timing: StreamTiming) -> dict[str, Any]:
        output: list[dict[str, Any]] = []
        if reasoning:
            output.append({"id": self._item(info, True)[1], "type": "reasoning", "summary": [], "status": "completed",
                           "content": [{"type": "reasoning_text", "text": reasoning}]})
        output.append({"id": self._item(info, False)[1], "type": "message", "role": "assistant", "status": "completed",
                       "content": [{"type": "output_text", "text": text, "annotations": []}]})
        incomplete = finish == "length"
        return self._response(info, "incomplete" if incomplete else "completed", output,
                              self._usage(info, completion_tokens), incomplete)

    def error_event(self, message: str) -> bytes:
        return responses_event({"type": "error", "code": "server_error", "message": message, "param": None,
                                "sequence_number": 0})

    def malformed(self) -> bytes:
        return b'event: response.output_text.delta\ndata: {"type": "response.output_text.delta", "delta": "bro\n\n'

