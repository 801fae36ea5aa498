"""The protocols the simulator speaks, by path: the server sides of `tokometer.protocols`'s protocols.

OpenAI chat and completions (SSE, as vLLM sends them), OpenAI Responses ``/v1/responses`` and
Anthropic Messages ``/v1/messages`` (named SSE events, as the two APIs document them), Ollama
``/api/chat`` (NDJSON), TGI ``/generate_stream`` (SSE, one token per event) and llama.cpp
``/completion``. The simulator's tokenizer is `count_words`: one whitespace-separated word is one token.
"""

from __future__ import annotations

from tokometer.protocols.anthropic_messages.server import AnthropicMessagesServer
from tokometer.protocols.common.server import RequestInfo, ServerProtocol, StreamTiming
from tokometer.protocols.llamacpp.server import LlamaCppServer
from tokometer.protocols.ollama.server import OllamaChatServer
from tokometer.protocols.openai.server import OpenAIChatServer, OpenAICompletionsServer
from tokometer.protocols.openai_responses.server import OpenAIResponsesServer
from tokometer.protocols.tgi.server import TgiServer

__all__ = ["PROTOCOLS", "Protocol", "RequestInfo", "StreamTiming", "count_words"]

Protocol = ServerProtocol


def count_words(text: str) -> int:
    """The simulator's tokenizer: one whitespace-separated word is one token."""
    return len(text.split())


PROTOCOLS: dict[str, ServerProtocol] = {
    p.path: p for p in (OpenAIChatServer(), OpenAICompletionsServer(), OpenAIResponsesServer(),
                        AnthropicMessagesServer(), OllamaChatServer(), TgiServer(), LlamaCppServer())
}
