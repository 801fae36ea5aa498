"""Generated speculative-decoding counts in an answer's ``meta_info`` (SGLang's names), through the OpenAI parsers
and the stream assembly: whatever the server says, what the record keeps holds to the rules
(`tokometer.client.plausible.NUMBER_RULES`): each count a whole number from 0 to the cap, kept tokens at most the
drafted ones and the output, verify steps at most the output; the step's block, where there is one, has a rate
in 0..1 and a length from 1 to 1 + the tokens drafted per step; a well-formed count that broke a rule is named
on the record. Values are drawn as in `tests.fuzz.test_server_number_rules` (missing, null, negative, small,
huge, float, string, boolean), the meta_info on the event or on its first choice.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.test_server_number_rules import MISSING, WORDS, _put, _valid, values
from tokometer.client.assemble import StreamAssembly
from tokometer.metrics.summary import summarize
from tokometer.protocols.common.framing import iter_payloads
from tokometer.protocols.common.numbers import MAX_COUNT
from tokometer.protocols.registry import create_client
from tokometer.records import RequestRecord

NAMES = {"steps": "spec_verify_ct", "kept": "spec_accept_token_num", "drafted": "spec_draft_token_num"}


def _stream(api: str, meta: dict[str, Any], on_choice: bool) -> list[bytes]:
    chat = api == "openai-chat"
    events: list[dict[str, Any]] = [{"choices": [{"index": 0, **({"delta": {"content": w}} if chat else {"text": w})}]}
                                    for w in WORDS]
    finish: dict[str, Any] = {"index": 0, **({"delta": {}} if chat else {"text": ""}), "finish_reason": "stop"}
    last: dict[str, Any] = {"choices": [finish]}
    if on_choice:
        finish["meta_info"] = meta
    else:
        last["meta_info"] = meta
    usage = {"prompt_tokens": 3, "completion_tokens": len(WORDS), "total_tokens": 3 + len(WORDS)}
    bodies = [*events, last, {"choices": [], "usage": usage}]
    return [b"data: " + json.dumps(b).encode() + b"\n\n" for b in bodies] + [b"data: [DONE]\n\n"]


@given(st.sampled_from(["openai-chat", "openai-completions"]), st.fixed_dictionaries({k: values for k in NAMES}),
       st.booleans())
def test_the_rules_hold_whatever_the_meta_info(api: str, drawn: dict[str, Any], on_choice: bool) -> None:
    meta: dict[str, Any] = {}
    for key, name in NAMES.items():
        _put(meta, name, drawn[key])
    chunks = _stream(api, meta, on_choice)
    client = create_client(api)
    record = RequestRecord(index=0, sent_ns=1_000, first_byte_ns=2_000, status=200, end_ns=50_000_000,
                           request_bytes=400, requested_output_tokens=64)
    assembly = StreamAssembly(record, client, len(chunks))
    for stamp, payload in iter_payloads(chunks, [3_000_000 + 1_000_000 * i for i in range(len(chunks))],
                                        client.framing):
        assembly.feed(stamp, payload)
    assembly.finish(None)
    assert record.error is None, record.error_detail
    server = record.server
    steps, kept, drafted = ((server.spec_verify_steps, server.spec_accepted_tokens, server.spec_draft_tokens)
                            if server is not None else (None, None, None))
    for value in (steps, kept, drafted):
        assert value is None or 0 <= value <= MAX_COUNT
    output = record.output_tokens or 0
    assert steps is None or steps <= output
    assert kept is None or (kept <= output and (drafted is None or kept <= drafted))
    block = summarize([record]).speculative
    if block is not None:
        rate, length = block["acceptance_rate"], block["acceptance_length"]
        assert rate is None or 0.0 <= rate <= 1.0
        assert length is None or length >= 1.0
    told = {k: drawn[k] if drawn[k] is not MISSING and _valid(drawn[k]) else None for k in NAMES}
    if told["kept"] is not None and told["drafted"] is not None and told["kept"] > told["drafted"] \
            and told["kept"] <= output:
        assert "spec_accepted_tokens=" in (record.rejected_numbers or "")
    if any(drawn[k] is not MISSING and drawn[k] is not None and not _valid(drawn[k]) for k in NAMES):
        assert "meta_info.spec_" in (record.rejected_numbers or "")
