"""The simulator's reasoning mode: the first ``reasoning_tokens`` tokens of every answer are reasoning.

How they are sent (``reasoning_format``), as real servers do:

- ``reasoning_content``: in the chat delta's ``reasoning_content`` field (DeepSeek's API, SGLang,
  llama.cpp ``--reasoning-format deepseek``, vLLM before 0.11), Ollama's ``thinking``;
- ``reasoning``: in the chat delta's ``reasoning`` field (vLLM from 0.11), Ollama's ``thinking``;
- ``think``: inline in the answer text between ``<think>`` and ``</think>`` (llama.cpp
  ``--reasoning-format none``, a server without a reasoning parser).

Protocols with no field for reasoning (legacy completions, llama.cpp ``/completion``, TGI) always send
it inline. The server counts reasoning tokens in OpenAI usage (``completion_tokens_details``) only
when it parsed them into a field; inline, it does not know.

The truth a test holds a benchmark against: reasoning tokens = min(reasoning_tokens, answer length);
the first answer token is token ``reasoning_tokens``, sent in event ``reasoning_tokens //
tokens_per_event``, due at ``ttft + reasoning_tokens // tokens_per_event * tokens_per_event * itl``.
"""

from __future__ import annotations

from tokometer.datasets.words import WORDS
from tokometer.protocols.common.reasoning import inline
from tokometer.protocols.common.server import ProtocolServer, RequestInfo
from tokometer.sim.config import SimConfig

__all__ = ["event_text"]


def event_text(config: SimConfig, proto: ProtocolServer, info: RequestInfo, ids: list[int],
               done_before: int) -> tuple[str, str]:
    """``(answer text, reasoning text)`` of the event carrying tokens ``ids`` of an answer that has sent
    ``done_before`` tokens; with a reasoning mode, also tells ``info`` how the protocol writes it."""
    words = [" " + WORDS[i] for i in ids]
    n = config.reasoning_tokens
    if n <= done_before:
        return "".join(words), ""
    in_field = proto.carries_reasoning and config.reasoning_format != "think"
    if not in_field:
        return inline(words, done_before, n), ""
    info.reasoning_field = config.reasoning_format
    info.reasoning_tokens = n
    split = min(n - done_before, len(words))
    return "".join(words[split:]), "".join(words[:split])
