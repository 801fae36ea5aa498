"""The engine's own tokenizer over HTTP: llama.cpp and vLLM ``/tokenize`` + ``/detokenize``.

Used before a run (to make prompts of an exact length), never on the hot path.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

from tokometer.errors import TokenizerError

__all__ = ["ServerTokenizer", "probe_server_tokenizer"]


def _root(base_url: str) -> str:
    url = base_url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


class ServerTokenizer:
    """Tokenizes by asking the server (``POST {root}/tokenize``)."""

    def __init__(self, base_url: str, model: str = "", api_key: str | None = None, timeout: float = 10.0) -> None:
        self.root = _root(base_url)
        self.model = model
        self.name = f"server:{self.root}/tokenize"
        self._headers = {"Content-Type": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._timeout = timeout

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(self.root + path, json.dumps(body).encode(), self._headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as response:
                data = json.loads(response.read())
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise TokenizerError(f"the server's tokenizer at {self.root}{path} failed: {exc}") from exc
        if not isinstance(data, dict):
            raise TokenizerError(f"{self.root}{path} answered something other than a JSON object")
        return data

    def encode(self, text: str) -> list[int]:
        # llama.cpp reads "content", vLLM reads "prompt"; each ignores the other.
        data = self._post("/tokenize", {"content": text, "prompt": text, "model": self.model,
                                        "add_special": False, "add_special_tokens": False})
        tokens = data.get("tokens")
        if not isinstance(tokens, list):
            raise TokenizerError(f"{self.root}/tokenize answered without a token list")
        return [t if isinstance(t, int) else int(t["id"]) for t in tokens]

    def decode(self, ids: Sequence[int]) -> str:
        data = self._post("/detokenize", {"tokens": list(ids), "model": self.model})
        text = data.get("content", data.get("prompt"))
        if not isinstance(text, str):
            raise TokenizerError(f"{self.root}/detokenize answered without text")
        return text

    def count(self, text: str) -> int:
        return len(self.encode(text))


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
