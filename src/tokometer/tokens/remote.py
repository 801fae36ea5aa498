"""The engine's own tokenizer over HTTP: llama.cpp and vLLM ``/tokenize`` + ``/detokenize``.

Used before a run (to make prompts of an exact length), never on the hot path, and by
``tokometer count --tokenizer URL``. Each request has a deadline for the whole answer and a 16 MiB
limit on it (`tokometer.util.blockinghttp`: a server that trickles or floods fails it, never hangs it).
Chats are rendered by the server itself (llama.cpp
``/apply-template``; vLLM's ``/tokenize`` takes ``messages``); the context window is read from
llama.cpp ``/props`` or vLLM ``/v1/models``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from tokometer.protocols.llamacpp import slot_context
from tokometer.tokens.base import BaseTokenizer
from tokometer.util.blockinghttp import request_bytes
from tokometer.util.errors import TokenizerError
from tokometer.util.jsontext import loads, whole_number

__all__ = ["ServerTokenizer", "probe_server_tokenizer"]


def _root(base_url: str) -> str:
    url = base_url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


class ServerTokenizer(BaseTokenizer):
    """Tokenizes by asking the server (``POST {root}/tokenize``)."""

    kind = "server"

    def __init__(self, base_url: str, model: str = "", api_key: str | None = None, timeout: float = 10.0) -> None:
        super().__init__()
        self.root = _root(base_url)
        self.model = model
        self.name = f"server:{self.root}/tokenize"
        self._headers = {"Content-Type": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._timeout = timeout

    def _post(self, path: str, body: dict[str, Any] | None) -> dict[str, Any]:
        data_out = None if body is None else json.dumps(body).encode()
        method = "GET" if body is None else "POST"
        try:
            data = loads(request_bytes(self.root + path, data_out, self._headers, timeout_s=self._timeout,
                                            method=method))
        except (OSError, ValueError) as exc:  # urllib's errors are OSErrors
            raise TokenizerError(f"the server's tokenizer at {self.root}{path} failed: {exc}") from exc
        if not isinstance(data, dict):
            raise TokenizerError(f"{self.root}{path} answered something other than a JSON object")
        return data

    def encode(self, text: str) -> list[int]:
        # llama.cpp reads "content", vLLM reads "prompt"; each ignores the other.
        data = self._post("/tokenize", {"content": text, "prompt": text, "model": self.model,
                                        "add_special": False, "add_special_tokens": False})
        return self._token_ids(data.get("tokens"))

    def _token_ids(self, tokens: Any) -> list[int]:
        """The ids of a ``/tokenize`` answer's ``tokens``: whole numbers of at least 0, or objects with such an
        ``id`` (llama.cpp with ``with_pieces``); anything else one `TokenizerError` naming the server."""
        if not isinstance(tokens, list):
            raise TokenizerError(f"{self.root}/tokenize answered without a token list")
        ids = []
        for token in tokens:
            if (i := whole_number(token.get("id") if isinstance(token, dict) else token)) is None:
                raise TokenizerError(f"{self.root}/tokenize answered a token that is not an id (a whole number of "
                                     "at least 0): is this a llama.cpp or vLLM server?")
            ids.append(i)
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        data = self._post("/detokenize", {"tokens": list(ids), "model": self.model})
        text = data.get("content", data.get("prompt"))
        if not isinstance(text, str):
            raise TokenizerError(f"{self.root}/detokenize answered without text")
        return text

    def count(self, text: str) -> int:
        return len(self.encode(text))

    def count_chat(self, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = True) -> int:
        """The server renders the chat with its own template and counts it."""
        try:  # llama.cpp: render, then tokenize with BOS as its chat endpoint does
            prompt = self._post("/apply-template", {"messages": list(messages)}).get("prompt")
        except TokenizerError:
            prompt = None
        if isinstance(prompt, str):
            data = self._post("/tokenize", {"content": prompt, "add_special": True, "parse_special": True})
            if isinstance(data.get("tokens"), list):
                return len(self._token_ids(data["tokens"]))
        data = self._post("/tokenize", {"model": self.model, "messages": list(messages),  # vLLM
                                        "add_generation_prompt": add_generation_prompt})
        if (count := whole_number(data.get("count"))) is not None:
            return count
        raise TokenizerError(f"the server at {self.root} cannot render chats (no /apply-template, and its "
                             "/tokenize does not take messages)")

    def render_chat(self, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = True) -> str:
        prompt = self._post("/apply-template", {"messages": list(messages)}).get("prompt")
        if not isinstance(prompt, str):
            raise TokenizerError(f"{self.root}/apply-template answered without a prompt")
        return prompt

    def read_context_length(self) -> None:
        """Fill ``context_length`` from llama.cpp ``/props`` or vLLM ``/v1/models``, where they answer."""
        try:
            if (n_ctx := slot_context(self._post("/props", None))) is not None:
                self.context_length, self.context_source = n_ctx, "server /props n_ctx (per slot)"
                return
        except TokenizerError:
            pass
        try:
            models = self._post("/v1/models", None).get("data")
        except TokenizerError:
            return
        for entry in models if isinstance(models, list) else ():
            length = whole_number(entry.get("max_model_len"), 1) if isinstance(entry, dict) else None
            if length is not None:
                self.context_length, self.context_source = length, "server /v1/models max_model_len"
                return


def probe_server_tokenizer(base_url: str, model: str = "", api_key: str | None = None) -> ServerTokenizer | None:
    """The server's tokenizer if it has a working ``/tokenize`` and ``/detokenize``, else ``None``."""
    tok = ServerTokenizer(base_url, model, api_key, timeout=5.0)
    try:
        ids = tok.encode("hello world")
        if not ids:
            return None
        tok.decode(ids)
    except TokenizerError:
        return None
    return tok
