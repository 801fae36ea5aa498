"""vLLM 0.32's exact stream bytes for ``/v1/completions`` and ``/v1/chat/completions``, and a raw server that
sends them.

The shapes are vLLM's pydantic models as its serving code dumps them (checked against the installed
vllm 0.32.0 CPU build: vllm/entrypoints/openai/completion/serving.py and chat_completion/serving.py);
the answer is what that vLLM streamed for `PROMPT` with ``max_tokens`` 8, and the bytes were compared with
what a running vLLM 0.32 (CPU, gemma-3-270m) sent, head included. Used where a test needs a real engine's
bytes on demand without the engine.
"""

from __future__ import annotations

import json
import socket

from tests.http_servers import RawServer

__all__ = ["ANSWER", "PROMPT", "VllmBytesServer", "vllm_chat_events", "vllm_completion_events"]

PROMPT = "The capital of France is"
ANSWER = (" the", " capital", " of", " the", " country", " of", " France", ".")
"""What vLLM 0.32 (CPU) streamed for ``PROMPT`` with ``max_tokens`` 8: eight text events."""

_HEAD = (b"HTTP/1.1 200 OK\r\ndate: Tue, 01 Dec 2026 12:00:00 GMT\r\nserver: uvicorn\r\n"
         b"content-type: text/event-stream; charset=utf-8\r\nvary: Origin\r\ntransfer-encoding: chunked\r\n\r\n")
FINGERPRINT = "vllm-0.32.0-0b139011"
"""vLLM sets ``system_fingerprint`` on the usage chunk (its version and a build hash)."""
"""uvicorn's head for vLLM's StreamingResponse: each ``yield`` of the generator becomes one HTTP chunk."""


def _chunk(part: bytes) -> bytes:
    """One HTTP/1.1 chunk (RFC 9112 section 7.1)."""
    return b"%x\r\n%s\r\n" % (len(part), part)


def vllm_completion_events(model: str, answer: tuple[str, ...] = ANSWER, prompt_tokens: int = 6) -> list[bytes]:
    """vLLM 0.32's ``/v1/completions`` stream, byte for byte: each chunk is
    ``CompletionStreamResponse.model_dump_json(exclude_unset=True)`` (so ``logprobs``, ``stop_reason``,
    ``prompt_token_ids`` and ``token_ids`` come as ``null`` in every event, the finish rides on the last text
    event), then with ``include_usage`` the usage chunk (``exclude_none=True``, vLLM's key order), then
    ``[DONE]`` (vllm/entrypoints/openai/completion/serving.py, checked against the installed source)."""
    head = f'{{"id":"cmpl-9f2c","object":"text_completion","created":1764590000,"model":"{model}","choices":'
    events = []
    for n, text in enumerate(answer):
        finish = '"length"' if n == len(answer) - 1 else "null"
        events.append(f'data: {head}[{{"index":0,"text":{json.dumps(text)},"logprobs":null,"finish_reason":'
                      f'{finish},"stop_reason":null,"prompt_token_ids":null,"token_ids":null}}]}}\n\n'.encode())
    total = prompt_tokens + len(answer)
    events.append(f'data: {head}[],"usage":{{"prompt_tokens":{prompt_tokens},"total_tokens":{total},'
                  f'"completion_tokens":{len(answer)}}},"system_fingerprint":"{FINGERPRINT}"}}\n\n'.encode())
    events.append(b"data: [DONE]\n\n")
    return events


def vllm_chat_events(model: str, answer: tuple[str, ...] = ANSWER, prompt_tokens: int = 6) -> list[bytes]:
    """vLLM 0.32's ``/v1/chat/completions`` stream, byte for byte: the role event (with ``prompt_token_ids``
    and ``prompt_text`` as ``null``), content deltas (``token_ids`` null), the finish on the last one
    (``stop_reason`` too), the usage chunk, ``[DONE]`` (vllm/entrypoints/openai/chat_completion/serving.py)."""
    head = f'{{"id":"chatcmpl-4a1b","object":"chat.completion.chunk","created":1764590000,"model":"{model}",' \
           '"choices":'
    events = [f'data: {head}[{{"index":0,"delta":{{"role":"assistant","content":""}},"logprobs":null,'
              f'"finish_reason":null}}],"prompt_token_ids":null,"prompt_text":null}}\n\n'.encode()]
    for n, text in enumerate(answer):
        last = n == len(answer) - 1
        finish = '"length","stop_reason":null' if last else "null"
        events.append(f'data: {head}[{{"index":0,"delta":{{"content":{json.dumps(text)}}},"logprobs":null,'
                      f'"finish_reason":{finish},"token_ids":null}}]}}\n\n'.encode())
    total = prompt_tokens + len(answer)
    events.append(f'data: {head}[],"usage":{{"prompt_tokens":{prompt_tokens},"total_tokens":{total},'
                  f'"completion_tokens":{len(answer)}}},"system_fingerprint":"{FINGERPRINT}"}}\n\n'.encode())
    events.append(b"data: [DONE]\n\n")
    return events


class VllmBytesServer(RawServer):
    """A raw-socket server written for these tests: answers ``POST /v1/completions`` and
    ``POST /v1/chat/completions`` with vLLM 0.32's exact stream for `ANSWER` (as uvicorn frames it), whatever
    the request asks; the gateway always asks its upstream for a stream with usage."""

    def __init__(self, model: str, completion_events: list[bytes] | None = None) -> None:
        """``completion_events``: what to send for ``/v1/completions`` instead of vLLM's stream."""
        super().__init__(self._answer)
        self.model = model
        self.completion_events = completion_events

    def _answer(self, conn: socket.socket) -> None:
        chat = self.heads[-1].startswith(b"POST /v1/chat/completions")
        events = vllm_chat_events(self.model) if chat else self.completion_events or vllm_completion_events(self.model)
        conn.sendall(_HEAD)
        for event in events:
            conn.sendall(_chunk(event))  # one HTTP chunk per event, as uvicorn writes them
        conn.sendall(b"0\r\n\r\n")
