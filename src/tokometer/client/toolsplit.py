"""A finished answer's tool calls onto its record: when the first one came, how many, how many tokens.

Tool-call deltas (`tokometer.protocols.common.toolcalls`) are output, parsed with the rest of the stream
(`tokometer.client.assemble`): they are content events, so TTFT, TPOT and ITL count them like answer
text. This module sets what is theirs alone:

- ``first_tool_call_ns``: the first event whose tool-call delta carried a name or an argument fragment;
- ``tool_calls``: the distinct call indexes seen;
- ``tool_call_tokens``: all of the output tokens (same source) when the answer streamed nothing but tool
  calls; else the model's tokenizer on the names and argument fragments (``tokenizer``); else each event's
  share of its tokens by characters (``estimate``).
"""

from __future__ import annotations

from collections.abc import Callable

from tokometer.protocols.common.base import ParsedEvent
from tokometer.records import RequestRecord

__all__ = ["tool_calls"]


def tool_calls(record: RequestRecord, content: list[tuple[int, ParsedEvent]],
               count_tokens: Callable[[str], int] | None) -> None:
    """Set the record's tool-call fields from its content events (nothing when none carried a tool call)."""
    stamps = [stamp for stamp, event in content if event.tool_calls is not None and event.tool_calls.text]
    if not stamps:
        return
    record.first_tool_call_ns = stamps[0]
    indexes = {i for _, event in content if event.tool_calls is not None for i in event.tool_calls.indexes}
    record.tool_calls = len(indexes) or None
    only_tools = not record.output_text.strip() and not record.reasoning_text
    if only_tools and record.output_tokens is not None and record.output_tokens_source is not None:
        record.tool_call_tokens, record.tool_call_tokens_source = record.output_tokens, record.output_tokens_source
        return
    if count_tokens is not None:
        record.tool_call_tokens, record.tool_call_tokens_source = count_tokens(record.tool_call_text), "tokenizer"
        return
    share = 0.0
    for (_, event), tokens in zip(content, record.event_tokens, strict=False):
        tool = len(event.tool_calls.text) if event.tool_calls is not None else 0
        total = tool + len(event.text) + len(event.reasoning)
        if total:
            share += tokens * tool / total
    record.tool_call_tokens, record.tool_call_tokens_source = round(share), "estimate"
