"""Hugging Face TGI's native streaming API, server side: the simulator's ``/generate_stream`` (`TgiServer`)."""

from __future__ import annotations

from typing import Any, ClassVar

import orjson

from tokometer.protocols.common.server import Count, ProtocolServer, RequestInfo, StreamTiming, no_field, opt_int

__all__ = ["TgiServer"]

class TgiServer(ProtocolServer):
    path: ClassVar[str] = "/generate_stream"

    def read(self, body: dict[str, Any], default_model: str, count: Count) -> RequestInfo:
        inputs = body.get("inputs")
        if not isinstance(inputs, str):
            raise ValueError("'inputs' must be a string")
        parameters = body.get("parameters") or {}
        if not isinstance(parameters, dict):
            raise ValueError("'parameters' must be an object")
        return RequestInfo(
            model=default_model,
            prompt_tokens=count(inputs),
            max_tokens=opt_int(parameters.get("max_new_tokens"), "parameters.max_new_tokens"),
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

    def tokens(self, info: RequestInfo, ids: list[int], text: str, done_before: int, reasoning: str = "") -> bytes:
        no_field(self, reasoning)
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
        self, info: RequestInfo, ids: list[int], text: str, done_before: int, finish: str, timing: StreamTiming,
        reasoning: str = "",
    ) -> bytes:
        no_field(self, reasoning)
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

    def error_event(self, info: RequestInfo, message: str) -> bytes:
        return b"data:" + orjson.dumps({"error": message, "error_type": "generation"}) + b"\n\n"

    def error_body(self, status: int, message: str, kind: str) -> dict[str, Any]:
        return {"error": message, "error_type": kind}



def _drop_last_word(text: str) -> str:
    return text[: text.rfind(" ")] if " " in text else ""
