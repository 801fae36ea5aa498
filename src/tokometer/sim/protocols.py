"""Wire formats the simulator speaks: request readers and stream writers.

One class per protocol, each turning the simulator's neutral "these tokens are
ready now" into the exact bytes the real engine would send: OpenAI chat and
completions (SSE, as vLLM sends them: `tokometer.wire.openai`'s chunks, the
gateway's too), Ollama ``/api/chat`` (NDJSON), TGI ``/generate_stream`` (SSE,
one token per event) and llama.cpp ``/completion``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import orjson

from tokometer.messages import message_text
from tokometer.wire.openai import DONE, ChunkWriter, error_event

__all__ = ["PROTOCOLS", "Protocol", "RequestInfo", "StreamTiming", "count_words"]


def count_words(text: str) -> int:
    """The simulator's tokenizer: one whitespace-separated word is one token."""
    return len(text.split())


@dataclass(slots=True)
class RequestInfo:
    """What the simulator needs from a request, whatever protocol it came in."""

    model: str
    prompt_tokens: int
    max_tokens: int | None
    ignore_eos: bool = False
    include_usage: bool = False
    return_tokens: bool = False
    sent_stream_options: bool = False
    id: str = ""
    created: int = 0
    writer: ChunkWriter | None = None
    """The OpenAI chunk renderer of this answer, made once (OpenAI protocols only)."""


@dataclass(slots=True)
class StreamTiming:
    """Server-side durations of one answer, for protocols that report them."""

    prompt_ms: float
    decode_ms: float
    total_ms: float


class Protocol(ABC):
    """One wire protocol of the simulator."""

    path: ClassVar[str]
    content_type: ClassVar[str] = "text/event-stream"

    @abstractmethod
    def read(self, body: dict[str, Any], default_model: str) -> RequestInfo:
        """Parse a request body; raise `ValueError` for a malformed one."""

    def start(self, info: RequestInfo) -> bytes:
        """An empty role-only event, for protocols that have one; else nothing."""
        return b""

    @abstractmethod
    def tokens(self, info: RequestInfo, ids: list[int], text: str, done_before: int) -> bytes:
        """One content event carrying ``ids`` (``done_before`` tokens were sent earlier)."""

    @abstractmethod
    def finish(self, info: RequestInfo, finish: str, completion_tokens: int, timing: StreamTiming) -> bytes:
        """The closing event(s): finish reason, usage and timings where the protocol has them."""

    def last_tokens(
        self, info: RequestInfo, ids: list[int], text: str, done_before: int, finish: str, timing: StreamTiming
    ) -> bytes:
        """The last content event followed by the closing event(s), in one write."""
        return self.tokens(info, ids, text, done_before) + self.finish(info, finish, done_before + len(ids), timing)

    @abstractmethod
    def error_event(self, message: str) -> bytes:
        """An error reported inside an already started stream."""

    def malformed(self) -> bytes:
        return b'data: {"choices": [{"delta": {"content": "broken\n\n'

    def error_body(self, status: int, message: str, kind: str) -> dict[str, Any]:
        """The JSON body of an HTTP error (OpenAI shape unless overridden)."""
        return {"error": {"message": message, "type": kind, "param": None, "code": status}}


def _prompt_words(messages: Any) -> int:
    if not isinstance(messages, list):
        raise ValueError("'messages' must be a list")
    total = 0
    for message in messages:
        if not isinstance(message, dict):
            raise ValueError("each message must be an object")
        total += count_words(message_text(message))
    return total


def _opt_int(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"'{name}' must be a non-negative integer")
    return value


class _OpenAIBase(Protocol):
    chat: ClassVar[bool]

    def _read_common(self, body: dict[str, Any], default_model: str, prompt_tokens: int) -> RequestInfo:
        options = body.get("stream_options") or {}
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
        return RequestInfo(
            model=str(body.get("model") or default_model),
            prompt_tokens=prompt_tokens,
            max_tokens=_opt_int(max_tokens, "max_tokens"),
            ignore_eos=bool(body.get("ignore_eos")),
            include_usage=bool(isinstance(options, dict) and options.get("include_usage")),
            sent_stream_options="stream_options" in body,
        )

    def _writer(self, info: RequestInfo) -> ChunkWriter:
        if info.writer is None:
            info.writer = ChunkWriter(self.chat, info.model, info.id, info.created)
        return info.writer

    def start(self, info: RequestInfo) -> bytes:
        return self._writer(info).role()

    def tokens(self, info: RequestInfo, ids: list[int], text: str, done_before: int) -> bytes:
        return self._writer(info).content(text)

    def finish(self, info: RequestInfo, finish: str, completion_tokens: int, timing: StreamTiming) -> bytes:
        writer = self._writer(info)
        out = writer.finish(finish)
        if info.include_usage:
            out += writer.usage(info.prompt_tokens, completion_tokens)
        return out + DONE

    def error_event(self, message: str) -> bytes:
        return error_event(message, "server_error", 500)


class OpenAIChat(_OpenAIBase):
    path: ClassVar[str] = "/v1/chat/completions"
    chat: ClassVar[bool] = True

    def read(self, body: dict[str, Any], default_model: str) -> RequestInfo:
        return self._read_common(body, default_model, _prompt_words(body.get("messages")))


class OpenAICompletions(_OpenAIBase):
    path: ClassVar[str] = "/v1/completions"
    chat: ClassVar[bool] = False

    def read(self, body: dict[str, Any], default_model: str) -> RequestInfo:
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            raise ValueError("'prompt' must be a string")
        return self._read_common(body, default_model, count_words(prompt))


class OllamaChat(Protocol):
    path: ClassVar[str] = "/api/chat"
    content_type: ClassVar[str] = "application/x-ndjson"

    def read(self, body: dict[str, Any], default_model: str) -> RequestInfo:
        options = body.get("options") or {}
        if not isinstance(options, dict):
            raise ValueError("'options' must be an object")
        return RequestInfo(
            model=str(body.get("model") or default_model),
            prompt_tokens=_prompt_words(body.get("messages")),
            max_tokens=_opt_int(options.get("num_predict"), "options.num_predict"),
        )

    def _line(self, info: RequestInfo, content: str, **extra: Any) -> bytes:
        payload: dict[str, Any] = {
            "model": info.model,
            "created_at": "2026-01-01T00:00:00Z",
            "message": {"role": "assistant", "content": content},
        }
        payload.update(extra)
        return orjson.dumps(payload) + b"\n"

    def tokens(self, info: RequestInfo, ids: list[int], text: str, done_before: int) -> bytes:
        return self._line(info, text, done=False)

    def finish(self, info: RequestInfo, finish: str, completion_tokens: int, timing: StreamTiming) -> bytes:
        return self._line(
            info,
            "",
            done=True,
            done_reason=finish,
            total_duration=int(timing.total_ms * 1e6),
            load_duration=0,
            prompt_eval_count=info.prompt_tokens,
            prompt_eval_duration=int(timing.prompt_ms * 1e6),
            eval_count=completion_tokens,
            eval_duration=int(timing.decode_ms * 1e6),
        )

    def error_event(self, message: str) -> bytes:
        return orjson.dumps({"error": message}) + b"\n"

    def malformed(self) -> bytes:
        return b'{"message": {"content": "broken\n'

    def error_body(self, status: int, message: str, kind: str) -> dict[str, Any]:
        return {"error": message}


class TgiGenerateStream(Protocol):
    path: ClassVar[str] = "/generate_stream"

    def read(self, body: dict[str, Any], default_model: str) -> RequestInfo:
        inputs = body.get("inputs")
        if not isinstance(inputs, str):
            raise ValueError("'inputs' must be a string")
        parameters = body.get("parameters") or {}
        if not isinstance(parameters, dict):
            raise ValueError("'parameters' must be an object")
        return RequestInfo(
            model=default_model,
            prompt_tokens=count_words(inputs),
            max_tokens=_opt_int(parameters.get("max_new_tokens"), "parameters.max_new_tokens"),
            return_tokens=bool(parameters.get("details")),
        )

    def _event(self, index: int, token_id: int, text: str, final: dict[str, Any] | None = None) -> bytes:
        payload: dict[str, Any] = {
            "index": index,
            "token": {"id": token_id, "text": text, "logprob": -0.25, "special": False},
            "generated_text": None,
            "details": None,
            "top_tokens": None,
        }
        if final:
            payload.update(final)
        return b"data:" + orjson.dumps(payload) + b"\n\n"

    def tokens(self, info: RequestInfo, ids: list[int], text: str, done_before: int) -> bytes:
        words = text.split()
        pairs = enumerate(zip(ids, words, strict=True))
        return b"".join(self._event(done_before + i + 1, token_id, " " + word) for i, (token_id, word) in pairs)

    def _details(self, info: RequestInfo, finish: str, completion_tokens: int) -> dict[str, Any]:
        return {
            "finish_reason": "length" if finish == "length" else "eos_token",
            "generated_tokens": completion_tokens,
            "seed": None,
            "input_length": info.prompt_tokens,
        }

    def last_tokens(
        self, info: RequestInfo, ids: list[int], text: str, done_before: int, finish: str, timing: StreamTiming
    ) -> bytes:
        # As TGI does: the last token's event also carries generated_text and details.
        head = self.tokens(info, ids[:-1], _drop_last_word(text), done_before)
        final = {"generated_text": "", "details": self._details(info, finish, done_before + len(ids))}
        return head + self._event(done_before + len(ids), ids[-1], " " + text.split(" ")[-1], final)

    def finish(self, info: RequestInfo, finish: str, completion_tokens: int, timing: StreamTiming) -> bytes:
        # Only for an answer of zero tokens: TGI would send nothing at all; the simulator
        # sends a token-less closing event so the stream has an end.
        payload = {"index": 0, "token": None, "generated_text": "",
                   "details": self._details(info, finish, completion_tokens), "top_tokens": None}
        return b"data:" + orjson.dumps(payload) + b"\n\n"

    def error_event(self, message: str) -> bytes:
        return b"data:" + orjson.dumps({"error": message, "error_type": "generation"}) + b"\n\n"

    def error_body(self, status: int, message: str, kind: str) -> dict[str, Any]:
        return {"error": message, "error_type": kind}


class LlamaCppCompletion(Protocol):
    path: ClassVar[str] = "/completion"

    def read(self, body: dict[str, Any], default_model: str) -> RequestInfo:
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            raise ValueError("'prompt' must be a string")
        n_predict = body.get("n_predict")
        return RequestInfo(
            model=default_model,
            prompt_tokens=count_words(prompt),
            max_tokens=None if n_predict in (None, -1) else _opt_int(n_predict, "n_predict"),
            ignore_eos=bool(body.get("ignore_eos")),
            return_tokens=bool(body.get("return_tokens")),
        )

    def tokens(self, info: RequestInfo, ids: list[int], text: str, done_before: int) -> bytes:
        payload = {
            "index": 0,
            "content": text,
            "tokens": ids if info.return_tokens else [],
            "stop": False,
            "id_slot": 0,
            "tokens_predicted": done_before + len(ids),
            "tokens_evaluated": info.prompt_tokens,
        }
        return b"data: " + orjson.dumps(payload) + b"\n\n"

    def finish(self, info: RequestInfo, finish: str, completion_tokens: int, timing: StreamTiming) -> bytes:
        decode_n = max(completion_tokens - 1, 0)
        payload = {
            "index": 0,
            "content": "",
            "tokens": [],
            "id_slot": 0,
            "stop": True,
            "model": info.model,
            "tokens_predicted": completion_tokens,
            "tokens_evaluated": info.prompt_tokens,
            "stop_type": "limit" if finish == "length" else "eos",
            "stopping_word": "",
            "tokens_cached": info.prompt_tokens + completion_tokens,
            "timings": {
                "cache_n": 0,
                "prompt_n": info.prompt_tokens,
                "prompt_ms": timing.prompt_ms,
                "predicted_n": completion_tokens,
                "predicted_ms": timing.decode_ms,
                "predicted_per_token_ms": timing.decode_ms / decode_n if decode_n else 0.0,
            },
        }
        return b"data: " + orjson.dumps(payload) + b"\n\n"

    def error_event(self, message: str) -> bytes:
        return b"data: " + orjson.dumps({"error": {"code": 500, "message": message, "type": "server_error"}}) + b"\n\n"

    def error_body(self, status: int, message: str, kind: str) -> dict[str, Any]:
        return {"error": {"code": status, "message": message, "type": kind}}


def _drop_last_word(text: str) -> str:
    return text[: text.rfind(" ")] if " " in text else ""


PROTOCOLS: dict[str, Protocol] = {
    p.path: p for p in (OpenAIChat(), OpenAICompletions(), OllamaChat(), TgiGenerateStream(), LlamaCppCompletion())
}
