"""OpenAI's Responses API: ``POST {base}/responses`` with ``input``, streamed as typed SSE events.

``client``: the request and the event parser (bench, the gateway's upstreams); ``server``: the simulator's
``/v1/responses``; ``writer``: the events the simulator and the gateway answer with; ``translate``: a
Responses request as the gateway's chat request.
"""

from __future__ import annotations

from tokometer.protocols.common.protocol import Protocol
from tokometer.protocols.openai import MODELS, OPENAI_CONTEXT
from tokometer.protocols.openai_responses.client import OpenAIResponses
from tokometer.protocols.openai_responses.request import RESPONSES_REQUEST
from tokometer.protocols.openai_responses.server import OpenAIResponsesServer
from tokometer.protocols.openai_responses.tools import TOOL_EVENTS
from tokometer.protocols.openai_responses.translate import chat_request_from_responses
from tokometer.protocols.openai_responses.writer import gateway_writer

__all__ = ["RESPONSES"]

RESPONSES = Protocol("OpenAI", OpenAIResponses, OpenAIResponsesServer, family="openai",
                     base_path="/v1", model_list=MODELS, picks_first_model=True, context=OPENAI_CONTEXT,
                     asks_stream_usage=True, chat=True, to_chat=chat_request_from_responses,
                     tool_events=TOOL_EVENTS, writer=gateway_writer, request=RESPONSES_REQUEST)
