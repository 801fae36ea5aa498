"""Speculative decoding per request, from what each answer said (SGLang's ``meta_info``), summed over a step.

The answers' counts (`tokometer.records.ServerTiming`: verify steps, drafted tokens kept, tokens drafted; read
and checked at the protocol boundary, `tokometer.protocols.common.spec_meta`) are summed over the step's
completed requests that gave them, and the step's acceptance rate and mean acceptance length follow by the one
definition the server window uses (`tokometer.observe.speculative.spec_window`: a verify step is one draft,
the length counts the target's own token). Per request, each answer's own acceptance length
(1 + kept / verify steps) is a distribution: how evenly drafting paid off across requests.

SGLang's own ``spec_accept_length`` is ``completion_tokens / spec_verify_ct``: it counts the prefill's first
token too, so on short answers it reads a little above this figure.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from tokometer.metrics.distribution import Distribution
from tokometer.observe.speculative import spec_window
from tokometer.records import RequestRecord, ServerTiming

__all__ = ["SOURCE", "spec_per_request"]

SOURCE = "responses"
"""The block's ``source``: the answers' own figures (beside the window's ``counters`` and ``gauges``)."""


def _reported(r: RequestRecord) -> ServerTiming | None:
    s = r.server
    ok = s is not None and s.spec_verify_steps and s.spec_accepted_tokens is not None and s.spec_draft_tokens
    return s if ok else None


def spec_per_request(ok: Sequence[RequestRecord]) -> dict[str, Any] | None:
    """The step's speculative decoding from its answers' own counts; None when no answer gave them."""
    servers = [s for s in map(_reported, ok) if s is not None]
    if not servers:
        return None
    steps = sum(s.spec_verify_steps or 0 for s in servers)
    accepted = sum(s.spec_accepted_tokens or 0 for s in servers)
    drafted = sum(s.spec_draft_tokens or 0 for s in servers)
    window = spec_window({"spec_drafts": steps, "spec_accepted_tokens": accepted, "spec_draft_tokens": drafted}, {})
    assert window is not None  # drafted > 0: the counters' path always gives a window
    lengths = Distribution.of(1.0 + (s.spec_accepted_tokens or 0) / (s.spec_verify_steps or 1) for s in servers)
    return {**dataclasses.replace(window, source=SOURCE).to_json(), "requests": len(servers),
            "acceptance_length_per_request": lengths.to_json()}
