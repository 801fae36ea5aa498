"""A server's speculative decoding of one request, where its answer says it (SGLang's ``meta_info``).

SGLang's tokenizer manager (``python/sglang/srt/managers/tokenizer_manager.py``,
``_calculate_spec_decoding_metrics``) writes, per request, into the answer's ``meta_info``:

- ``spec_verify_ct``: the verify steps the request took (a step verifies one draft: vLLM's "draft");
- ``spec_accept_token_num`` (``spec_accepted_drafts`` in later versions): the drafted tokens the target kept;
- ``spec_draft_token_num`` (``spec_proposed_drafts``): the tokens drafted (verify steps x tokens per draft);
- ``spec_accept_rate`` and ``spec_accept_length`` (``completion_tokens / spec_verify_ct``): figures derived
  from the above, not read here: the run derives its own from the counts, the way it derives the window's
  from vLLM's counters (`tokometer.observe.speculative`), so one definition holds for both.

``meta_info`` comes on SGLang's native ``/generate`` answers (each streamed chunk and the final one) and, when the
request asks with ``return_meta_info``, on a non-streamed OpenAI answer's choice; SGLang refuses
``return_meta_info`` on a streamed OpenAI request, so a stock SGLang streaming chat gives the run its
window's figures (its /metrics gauges) and no per-request ones. `read_spec_meta` reads the counts from an event's
own ``meta_info`` or its first choice's, wherever a server (or a gateway in front of one) sends them.

Each count goes through `tokometer.protocols.common.numbers.count` (a non-negative whole number of sane size, or
absent and noted); once the stream is whole the counts are held to each other and to the answer's length
(`tokometer.client.plausible.NUMBER_RULES`: kept tokens at most the drafted ones and at most the output, verify
steps at most the output).
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from tokometer.protocols.common.base import ParsedEvent
from tokometer.protocols.common.numbers import count

__all__ = ["SPEC_FIELDS", "read_spec_meta", "spec_meta_event"]

SPEC_FIELDS: Final = {
    "spec_verify_steps": ("spec_verify_ct",),
    "spec_accepted_tokens": ("spec_accept_token_num", "spec_accepted_drafts"),
    "spec_draft_tokens": ("spec_draft_token_num", "spec_proposed_drafts"),
}
"""`ParsedEvent` field -> SGLang's ``meta_info`` names for it, the first present read."""


def _first(meta: dict[str, Any], names: tuple[str, ...]) -> tuple[str, Any]:
    for name in names:
        if name in meta:
            return name, meta[name]
    return names[0], None


def read_spec_meta(data: dict[str, Any], choice: dict[str, Any] | None, event: ParsedEvent) -> bool:
    """The speculative-decoding counts of ``data``'s ``meta_info`` (else ``choice``'s) onto ``event``; whether
    there was a ``meta_info`` with any of them."""
    meta = data.get("meta_info") or (choice.get("meta_info") if choice else None)
    if not meta or not isinstance(meta, dict):  # every event of every stream passes here: nothing more to do
        return False
    found = False
    for field, names in SPEC_FIELDS.items():
        name, value = _first(meta, names)
        if value is None:
            continue
        found = True
        setattr(event, field, count(event, f"meta_info.{name}", value))
    return found


def spec_meta_event(verify_steps: int, accepted: int, drafted: int) -> bytes:
    """An SSE event with no choices and a ``meta_info`` of the answer's counts, as the simulator sends them."""
    meta = {"spec_verify_ct": verify_steps, "spec_accept_token_num": accepted, "spec_draft_token_num": drafted}
    return b"data: " + orjson.dumps({"object": "chat.completion.chunk", "choices": [], "meta_info": meta}) + b"\n\n"
