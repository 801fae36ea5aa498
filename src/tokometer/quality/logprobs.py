"""Non-streamed requests for greedy token paths with their top-k log-probabilities, and teacher forcing.

Sent with the project's HTTP client (`tokometer.client.http1.HttpPool`), one request at a time
per endpoint, so a server decodes each answer alone (batch size 1): concurrent requests would share
batches and could change the last bits of the logits, and with them a greedy choice. On llama.cpp
the prompt cache is turned off (``cache_prompt: false``) for these requests for the same reason:
a prefix reused from the previous request would have been computed in another batch split.

- `greedy_path`: ``temperature 0`` and ``logprobs`` (completions: ``logprobs: k``; chat:
  ``logprobs: true, top_logprobs: k``), parsed by `agreement.parse_logprobs`.
- `forced_step`: B's next-token distribution after the prompt and A's first ``j`` tokens, asked as a
  completions request whose prompt is token ids (``/tokenize`` ids of the prompt, then A's ids) for
  one token. Only where both servers tokenize alike (``/tokenize``: llama.cpp's and vLLM's shapes) and A's
  path carries token ids (llama.cpp).
Failures are data: each call returns the result or a one-line reason, never raises (but cancellation).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from tokometer.client.http1 import (
    MAX_SMALL_BODY_BYTES,
    ConnectError,
    HttpPool,
    HttpTimeout,
    PeerReset,
    StreamedResponse,
    TlsOptions,
)
from tokometer.protocols.registry import protocol_named
from tokometer.quality.agreement import TokenStep, parse_logprobs
from tokometer.quality.endpoints import Endpoint
from tokometer.util.jsontext import loads
from tokometer.util.readbudget import answer_budget
from tokometer.util.shown import clipped

__all__ = ["LogprobClient"]


class LogprobClient:
    """Greedy paths, tokenization and forced steps against one endpoint."""

    def __init__(self, endpoint: Endpoint, api: str, top_k: int, max_tokens: int, timeout_s: float = 300.0) -> None:
        self.endpoint = endpoint
        self.api = api
        self.top_k = top_k
        self.max_tokens = max_tokens
        self.pool = HttpPool(endpoint.base_url, connect_timeout=10.0, idle_timeout=timeout_s,
                             total_timeout=timeout_s, tls=TlsOptions())
        self.root = HttpPool(endpoint.root_url, connect_timeout=10.0, idle_timeout=timeout_s,
                             total_timeout=timeout_s, tls=TlsOptions())
        self.headers = {"Content-Type": "application/json"}
        if endpoint.api_key:
            self.headers["Authorization"] = f"Bearer {endpoint.api_key}"

    async def close(self) -> None:
        await self.pool.close()
        await self.root.close()

    async def _post(self, pool: HttpPool, path: str, body: dict[str, Any]) -> tuple[Any, str]:
        """(the JSON answer, "") or (None, why not)."""
        response = StreamedResponse(max_body_bytes=MAX_SMALL_BODY_BYTES,  # a whole answer: limited, as every GET
                                    max_bytes=answer_budget(MAX_SMALL_BODY_BYTES))
        try:
            await pool.request(pool.encode("POST", path, orjson.dumps(body), self.headers), response)
        except (ConnectError, HttpTimeout, PeerReset) as exc:
            return None, f"{type(exc).__name__}: {exc}"
        text = b"".join(response.chunks)
        if response.status != 200:
            return None, f"HTTP {response.status}: {clipped(' '.join(text.decode('utf-8', 'replace').split()))}"
        try:
            return loads(text), ""
        except ValueError as exc:
            return None, f"not JSON: {exc}"

    def _body(self, prompt: str | list[int], max_tokens: int) -> tuple[str, dict[str, Any]]:
        body: dict[str, Any] = {"model": self.endpoint.model, "max_tokens": max_tokens, "temperature": 0.0,
                                "stream": False}
        if protocol_named(self.api).chat:
            body.update(messages=[{"role": "user", "content": prompt}], logprobs=True, top_logprobs=self.top_k)
            path = "/chat/completions"
        else:
            body.update(prompt=prompt, logprobs=self.top_k)
            path = "/completions"
        return path, body

    async def greedy_path(self, prompt: str) -> tuple[list[TokenStep] | None, str]:
        """A's (or B's) greedy answer as a token path with top-k log-probabilities, or (None, why not)."""
        path, body = self._body(prompt, self.max_tokens)
        if self.endpoint.llamacpp:
            body["cache_prompt"] = False
        answer, error = await self._post(self.pool, path, body)
        if answer is None:
            return None, error
        choices = answer.get("choices") if isinstance(answer, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return None, "the answer has no choices"
        try:
            steps = parse_logprobs(choices[0])
        except ValueError as exc:
            return None, f"malformed logprobs from the server: {exc}"
        if steps is None:
            return None, "the server returned no logprobs"
        return steps, ""

    async def tokenize(self, text: str) -> list[int] | None:
        """The prompt's token ids with the special tokens the server adds, or None: llama.cpp's ``/tokenize``
        (``content``, ``add_special``), else vLLM's (``model``, ``prompt``, ``add_special_tokens``)."""
        shapes = ({"content": text, "add_special": True},
                  {"model": self.endpoint.model, "prompt": text, "add_special_tokens": True})
        for body in shapes:
            answer, _ = await self._post(self.root, "/tokenize", body)
            tokens = answer.get("tokens") if isinstance(answer, dict) else None
            if isinstance(tokens, list) and tokens and all(type(t) is int and t >= 0 for t in tokens):
                return list(tokens)
        return None

    async def forced_step(self, prompt_ids: Sequence[int], prefix_ids: Sequence[int]) -> TokenStep | None:
        """The next-token distribution after ``prompt_ids`` + ``prefix_ids`` (one token, greedy), or None."""
        path, body = self._body([*prompt_ids, *prefix_ids], 1)
        answer, _ = await self._post(self.pool, path, body)
        choices = answer.get("choices") if isinstance(answer, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return None
        try:
            steps = parse_logprobs(choices[0])
        except ValueError:  # malformed: this position is not scored
            return None
        return steps[0] if steps else None
