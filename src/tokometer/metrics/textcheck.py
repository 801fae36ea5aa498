"""Does the text a request received add up to the output tokens the server counted?

A relay that loses text leaves the server's usage untouched: through a gateway that dropped six of eight
text events, usage still said 8 tokens and every speed looked right. So each completed request whose
output count is the server's (``usage`` or ``native``) is checked against what arrived
(docs/reference/metrics.md, "Does the text add up"):

- received: the model's own tokenizer on the text received (answer, and reasoning sent in a field of its
  own), where one is at hand locally; otherwise the text's UTF-8 bytes, an upper bound on the tokens any
  byte-level tokenizer can make of it (every token is at least one byte of text);
- counted: the server's output tokens, less reasoning it counted but did not send (OpenAI's o-series);
- short: counted − received > max(`SLACK`, `TOLERANCE` × counted). The slack covers tokens that have no
  text (the end-of-sequence token, a stop string left out of the answer), the tolerance a tokenizer that
  joins the text a little differently than it was generated.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from tokometer.records import RequestRecord

__all__ = ["SLACK", "TOLERANCE", "ShortText", "TextCheck", "check_text", "counted_tokens", "is_short",
           "received_tokens"]

TOLERANCE = 0.10
"""Share of the server's count the received text may fall short by."""
SLACK = 2
"""Tokens the received text may fall short by however short the answer."""

_SHOWN = 5
"""Short requests named in the warning (all of them are in the JSON)."""

Received = Literal["tokenizer", "bytes"]


@dataclass(frozen=True, slots=True)
class ShortText:
    """A request whose text fell short of the server's count."""

    index: int
    counted: int
    received: int
    source: Received

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "counted": self.counted, "received": self.received, "source": self.source}


@dataclass(frozen=True, slots=True)
class TextCheck:
    """The check over one step's completed requests."""

    checked: dict[str, int]
    """Requests checked, by how their text was counted (``tokenizer``, ``bytes``)."""
    short: tuple[ShortText, ...]

    def to_json(self) -> dict[str, Any]:
        return {"checked": self.checked, "short": [s.to_json() for s in self.short],
                "tolerance": {"share": TOLERANCE, "tokens": SLACK}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TextCheck:
        """The check `to_json` wrote (its ``tolerance`` is this version's constants, not read back)."""
        short = tuple(ShortText(index=int(s["index"]), counted=int(s["counted"]), received=int(s["received"]),
                                source="bytes" if s.get("source") == "bytes" else "tokenizer")
                      for s in data.get("short") or ())
        return cls(checked={str(k): int(v) for k, v in (data.get("checked") or {}).items()}, short=short)

    def warning(self) -> str | None:
        """The step's warning when any request was short (None: the text added up everywhere)."""
        if not self.short:
            return None
        checked = sum(self.checked.values())
        shown = "; ".join(f"request {s.index}: {s.counted} counted, the text holds "
                          + (f"{s.received}" if s.source == "tokenizer" else f"at most {s.received}")
                          for s in self.short[:_SHOWN])
        more = f"; {len(self.short) - _SHOWN} more" if len(self.short) > _SHOWN else ""
        return (f"{len(self.short)} of {checked} answers received less text than the server counted output "
                f"tokens ({shown}{more}): something between the server and tokometer lost text (a gateway or "
                "proxy?), or the model generated tokens without text (special tokens past --ignore-eos); the "
                "output token counts are the server's, not what arrived")


def is_short(counted: int, received: int) -> bool:
    """The rule: text that accounts for ``received`` tokens falls short of a server's count of ``counted``."""
    return counted - received > max(SLACK, TOLERANCE * counted)


def counted_tokens(record: RequestRecord) -> int | None:
    """The output tokens the server counted and sent text for (None: the count is not the server's)."""
    if record.output_tokens_source not in ("usage", "native") or record.output_tokens is None:
        return None
    hidden = 0
    if record.reasoning_tokens and record.reasoning_tokens_source == "usage" and not record.reasoning_text \
            and not record.first_answer_ns:
        # counted, never sent; an answer cut inside an inline <think> looks alike: its count only shrinks
        hidden = record.reasoning_tokens
    return record.output_tokens - hidden


def received_tokens(record: RequestRecord, count: Callable[[str], int] | None) -> tuple[int, Received]:
    """What the received text accounts for, and how it was counted."""
    texts = [text for text in (record.output_text, record.reasoning_text, record.tool_call_text) if text]
    if count is not None:
        return sum(count(text) for text in texts), "tokenizer"
    return sum(len(text.encode("utf-8", "surrogatepass")) for text in texts), "bytes"


def check_text(records: Sequence[RequestRecord], count: Callable[[str], int] | None) -> TextCheck | None:
    """Check every completed, counted, non-warm-up request of a step (None: none could be checked)."""
    checked: Counter[str] = Counter()
    short: list[ShortText] = []
    for record in records:
        if record.warmup or not record.ok:
            continue
        counted = counted_tokens(record)
        if not counted:
            continue
        received, source = received_tokens(record, count)
        checked[source] += 1
        if is_short(counted, received):
            short.append(ShortText(record.index, counted, received, source))
    return TextCheck(dict(checked), tuple(short)) if checked else None
