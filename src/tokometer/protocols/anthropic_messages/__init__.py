"""Anthropic's Messages API: ``POST {base}/messages``, streamed as named SSE events.

``client``: the request and the event parser (bench, the gateway's upstreams); ``server``: the simulator's
``/v1/messages``; ``writer``: the events the simulator and the gateway answer with, and the error shape;
``translate``: a Messages request as the gateway's chat request.
"""

from __future__ import annotations

from tokometer.protocols.anthropic_messages.client import AnthropicMessages
from tokometer.protocols.anthropic_messages.request import MESSAGES_REQUEST
from tokometer.protocols.anthropic_messages.server import AnthropicMessagesServer
from tokometer.protocols.anthropic_messages.tools import TOOL_EVENTS
from tokometer.protocols.anthropic_messages.translate import chat_request_from_anthropic
from tokometer.protocols.anthropic_messages.writer import gateway_error_body, gateway_writer
from tokometer.protocols.common.protocol import ModelList, Protocol, ids_of

__all__ = ["MESSAGES"]

MESSAGES = Protocol("Anthropic", AnthropicMessages, AnthropicMessagesServer,
                    base_path="/v1", model_list=ModelList("/models", ids_of), picks_first_model=True, chat=True,
                    to_chat=chat_request_from_anthropic, error_body=gateway_error_body, tool_events=TOOL_EVENTS,
                    writer=gateway_writer, request=MESSAGES_REQUEST)
