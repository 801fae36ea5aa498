"""AIPerf's published multi-turn dataset formats read as agent sessions (``bench --agents aiperf:FILE``, or a file
whose first line is one of them).

AIPerf's custom datasets (https://docs.nvidia.com/aiperf/tutorials/datasets-inputs/custom-dataset-guide; the
schema is its pydantic models ``SingleTurn``, ``MultiTurn`` and ``MooncakeTrace``) come in two shapes that
carry sessions, both JSONL:

- ``multi_turn``: one session a line, ``{"type": "multi_turn", "session_id": ..., "turns": [...]}``, each turn
  with ``text`` (or ``texts``), ``timestamp`` or ``delay`` (ms), ``role`` and ``output_length``;
- ``mooncake_trace``: one *request* a line, ``{"session_id", "timestamp" | "delay", "input_length" (with
  ``hash_ids``) | "text_input" | "messages" (``message_mode`` ``delta``), "output_length"}``; lines of one
  ``session_id`` are its turns in file order, a line without one a session of one turn.

Each maps onto `tokometer.datasets.agentic`'s sessions of one agent (``main``): a turn's text is its ``input``
(``input_length``: ``input_tokens``), ``output_length`` its ``output_tokens`` (absent: the run's
``--output-tokens``); ``delay`` is the ``tool_ms`` the client waits after the previous answer; the first
turn's ``timestamp`` is the session's ``start_ms`` (from the file's earliest, so an epoch's milliseconds read
too) and a later turn's is its ``at_ms`` (not sent before
then, nor before the previous answer: the history needs it). What tokometer cannot replay as AIPerf does is
refused in one line naming the field: images, audio and video, ``payload`` and ``history``-mode
``messages`` (fixed bodies, not a growing conversation), ``extra`` body fields, ``tools``, a role other than
``user`` or ``tool``. ``hash_ids`` are checked and not used (the request trace, ``bench --trace``, keeps
their blocks).

The file is read by `tokometer.datasets.agentic`'s bounded reader (size, line length, deadline, sessions and
turns); every fault is a `DatasetError` of one line naming the file, the line and the field.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from tokometer.datasets.agentic import (
    MAIN_AGENT,
    MAX_AGENT_SESSIONS,
    MAX_AGENT_TURNS,
    MAX_START_MS,
    MAX_TOOL_MS,
    AgentSession,
    AgentTurn,
)
from tokometer.datasets.files import json_line
from tokometer.util.errors import DatasetError
from tokometer.util.limits import MAX_TOKENS, MAX_TURNS

__all__ = ["AIPERF", "AIPERF_KINDS", "looks_like_aiperf", "parse_aiperf", "read_aiperf_trace"]

AIPERF: Final = "aiperf"
"""The prefix that names the format: ``--agents aiperf:FILE``."""
AIPERF_KINDS: Final = ("multi_turn", "mooncake_trace")
_ID_CHARS: Final = 200
_MAX_HASH_IDS: Final = 100_000
_MAX_STAMP_MS: Final = float(2**53)
"""The largest ``timestamp`` read (milliseconds from any clock's epoch are far below it)."""
_TURN_KEYS: Final = frozenset({"type", "text", "texts", "timestamp", "delay", "role", "session_id",
                               "output_length"})
_REQUEST_KEYS: Final = frozenset({"type", "input_length", "text_input", "messages", "message_mode", "output_length",
                                  "hash_ids", "timestamp", "delay", "session_id"})
_REFUSED: Final = {
    **dict.fromkeys(("image", "images", "image_uuids", "audio", "audios", "video", "videos"),
                    "media are not replayed (tokometer's agent sessions are text)"),
    "payload": "a fixed request body is not a growing conversation",
    "tools": "tool definitions are not sent with agent turns",
    "extra": "extra request-body fields are not replayed",
}
_INPUT_ROLES: Final = frozenset({"user", "tool"})


def looks_like_aiperf(first: Any) -> bool:
    """Whether ``first`` (a trace's first object) is in one of AIPerf's formats: a ``type`` it names, or no
    ``turns`` of tokometer's own (a Mooncake-style request line)."""
    if not isinstance(first, dict):
        return False
    if "type" in first:
        return True
    turns = first.get("turns")
    if isinstance(turns, list):
        return any(isinstance(t, dict) and ("text" in t or "texts" in t) for t in turns)
    return any(k in first for k in ("input_length", "text_input", "messages", "session_id"))


def read_aiperf_trace(path: Path, lines: Iterable[tuple[int, bytes]], output_tokens: int | None) -> list[AgentSession]:
    """The sessions of an AIPerf ``multi_turn`` or ``mooncake_trace`` file (its ``lines``, read within the agent
    trace's bounds), sorted by start; a turn without ``output_length`` asks ``output_tokens``."""
    built = _Sessions(output_tokens)
    for number, raw in lines:
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DatasetError(f"AIPerf trace {path}:{number} is not UTF-8 text (byte {exc.start})") from None
        if line.strip():
            built.add(parse_aiperf(line, f"{path}:{number}"), f"{path}:{number}")
    if not built.sessions:
        raise DatasetError(f"AIPerf trace {path} holds no sessions")
    return built.finish(f"AIPerf trace {path}")


def parse_aiperf(line: str, where: str) -> dict[str, Any]:
    """One line as a JSON object of AIPerf's; ``where`` names it in errors."""
    obj = json_line(line, where)
    if not isinstance(obj, dict):
        raise DatasetError(f"{where}: expected an object (one AIPerf multi_turn session or mooncake_trace "
                           "request a line)")
    return obj


@dataclass
class _Draft:
    """A session being read: its label, start and turns so far."""

    label: str
    start_ms: float | None
    turns: list[AgentTurn] = field(default_factory=list)


class _Sessions:
    """Sessions read so far, in order of their first line; a request line joins its ``session_id``'s."""

    def __init__(self, output_tokens: int | None) -> None:
        self.output_tokens = output_tokens
        self.sessions: list[_Draft] = []
        self.by_id: dict[str, _Draft] = {}
        self.turns = 0

    def add(self, obj: dict[str, Any], where: str) -> None:
        kind = obj.get("type", "multi_turn" if "turns" in obj else "mooncake_trace")
        if kind not in AIPERF_KINDS:
            shown = kind[:40] if isinstance(kind, str) else type(kind).__name__
            raise DatasetError(f"{where}: 'type' {shown!r} is not one of AIPerf's session formats: "
                               f"{', '.join(AIPERF_KINDS)}")
        if kind == "multi_turn":
            self._multi_turn(obj, where)
        else:
            self._request(obj, where)
        if len(self.sessions) > MAX_AGENT_SESSIONS or self.turns > MAX_AGENT_TURNS:
            raise DatasetError(f"{where}: a trace holds at most {MAX_AGENT_SESSIONS:,} sessions and "
                               f"{MAX_AGENT_TURNS:,} turns in all: split it")

    def _multi_turn(self, obj: dict[str, Any], where: str) -> None:
        _known(obj, {"type", "session_id", "turns"}, where)
        label = _label(obj, where, f"session {len(self.sessions) + 1}")
        turns = obj.get("turns")
        if not isinstance(turns, list) or not turns:
            raise DatasetError(f"{where}: 'turns' must be a non-empty list of turn objects")
        if len(turns) > MAX_TURNS:
            raise DatasetError(f"{where}: {len(turns)} turns; a session holds at most {MAX_TURNS}")
        draft = _Draft(label, None)
        for k, item in enumerate(turns):
            here = f"{where}: turn {k + 1}"
            if not isinstance(item, dict):
                raise DatasetError(f"{here}: expected an object with 'text' (or 'texts')")
            _known(item, _TURN_KEYS, here)
            _role(item, here)
            self._append(draft, item, (_text(item, here), None), here)
        self.sessions.append(draft)

    def _request(self, obj: dict[str, Any], where: str) -> None:
        _known(obj, _REQUEST_KEYS, where)
        sid = obj.get("session_id")
        if sid is None:
            draft = _Draft(f"request {len(self.sessions) + 1}", None)
            self.sessions.append(draft)
        else:
            label = _label(obj, where, "")
            if (found := self.by_id.get(label)) is None:
                found = self.by_id[label] = _Draft(label, None)
                self.sessions.append(found)
            draft = found
            if len(draft.turns) >= MAX_TURNS:
                raise DatasetError(f"{where}: session {label[:_ID_CHARS]!r} has more than {MAX_TURNS} turns")
        self._append(draft, obj, _request_input(obj, where), where)

    def _append(self, draft: _Draft, item: dict[str, Any], given: tuple[str | None, int | None], where: str) -> None:
        """Add one turn to ``draft``: its input, length and times."""
        stamp = _ms(item, "timestamp", where, _MAX_STAMP_MS)
        delay = _ms(item, "delay", where, MAX_TOOL_MS)
        if stamp and delay:
            raise DatasetError(f"{where}: give 'timestamp' or 'delay', not both")
        at_ms = None
        if stamp is not None:
            if draft.start_ms is None and not draft.turns:
                draft.start_ms = stamp
            elif stamp < (draft.start_ms or 0.0):
                raise DatasetError(f"{where}: 'timestamp' {stamp:g} is before its session's start "
                                   f"({draft.start_ms or 0.0:g})")
            elif (at_ms := stamp - (draft.start_ms or 0.0)) > MAX_START_MS:
                raise DatasetError(f"{where}: 'timestamp' {stamp:g} is more than {MAX_START_MS:g} ms after its "
                                   "session's start")
        k = len(draft.turns)
        text, tokens = given
        draft.turns.append(AgentTurn(f"t{k}", MAIN_AGENT, (k - 1,) if k else (), delay or 0.0, tokens, text,
                                     _length(item, where, self.output_tokens), at_ms))
        self.turns += 1

    def finish(self, where: str) -> list[AgentSession]:
        """The sessions, sorted by their start, the earliest ``timestamp`` taken as the trace's 0 (so times from
        a clock's epoch read as well; a session without one starts at 0)."""
        first = min((d.start_ms for d in self.sessions if d.start_ms is not None), default=0.0)
        out = [AgentSession(d.label, 0.0 if d.start_ms is None else d.start_ms - first, tuple(d.turns))
               for d in self.sessions]
        if (last := max(s.start_ms for s in out)) > MAX_START_MS:
            raise DatasetError(f"{where}: its sessions start over {last:g} ms, more than {MAX_START_MS:g} (a week): "
                               "split it")
        return sorted(out, key=lambda s: s.start_ms)


def _known(obj: dict[str, Any], keys: frozenset[str] | set[str], where: str) -> None:
    """Refuse a field this reader does not replay (naming why) or does not know."""
    for key in obj:
        if key in _REFUSED:
            raise DatasetError(f"{where}: {key!r}: {_REFUSED[key]}; remove it to replay the rest")
        if key not in keys:
            shown = key[:40]
            raise DatasetError(f"{where}: unknown field {shown!r}: the fields read here are {', '.join(sorted(keys))}")


def _label(obj: dict[str, Any], where: str, default: str) -> str:
    value = obj.get("session_id", default)
    if value is None:
        return default
    if not isinstance(value, str) or not value or len(value) > _ID_CHARS:
        raise DatasetError(f"{where}: 'session_id' must be a non-empty string of at most {_ID_CHARS} characters")
    return value


def _role(item: dict[str, Any], where: str) -> None:
    role = item.get("role")
    if role is not None and (not isinstance(role, str) or role not in _INPUT_ROLES):
        shown = role[:40] if isinstance(role, str) else type(role).__name__
        raise DatasetError(f"{where}: 'role' {shown!r}: a turn is the user's (or a tool's) input; the model's "
                           "answers are its own, streamed live")


def _text(item: dict[str, Any], where: str) -> str:
    """A multi_turn turn's text: ``text``, or its ``texts`` joined by blank lines."""
    if "text" in item and "texts" in item:
        raise DatasetError(f"{where}: give 'text' or 'texts', not both")
    if "texts" in item:
        texts = item["texts"]
        parts: list[Any] = []
        for t in texts if isinstance(texts, list) else [None]:
            contents = t.get("contents") if isinstance(t, dict) else [t]  # a Text object: {name, contents: [...]}
            parts.extend(contents if isinstance(contents, list) else [None])
        if not parts or not all(isinstance(p, str) and p.strip() for p in parts):
            raise DatasetError(f"{where}: 'texts' must be a non-empty list of non-empty strings, or of "
                               "{\"name\", \"contents\": [strings]} objects")
        return "\n\n".join(parts)
    text = item.get("text")
    if not isinstance(text, str) or not text.strip():
        raise DatasetError(f"{where}: 'text' must be non-empty text")
    return text


def _request_input(obj: dict[str, Any], where: str) -> tuple[str | None, int | None]:
    """A mooncake_trace line's input: ``input_length`` tokens, ``text_input``, or ``messages`` (delta mode)."""
    given = [k for k in ("input_length", "text_input", "messages") if k in obj]
    if len(given) != 1:
        raise DatasetError(f"{where}: give one of 'input_length', 'text_input' and 'messages'")
    if obj.get("message_mode", "delta" if "messages" in obj else None) not in ("delta", None) \
            or ("message_mode" in obj and "messages" not in obj):
        raise DatasetError(f"{where}: 'message_mode': only 'delta' messages (each line's new messages) are "
                           "replayed; 'history' lines fix the whole conversation, not a growing one")
    if "hash_ids" in obj:
        _hash_ids(obj["hash_ids"], given[0], where)
    if given[0] == "input_length":
        return None, _tokens(obj, "input_length", where)
    if given[0] == "text_input":
        text = obj["text_input"]
        if not isinstance(text, str) or not text.strip():
            raise DatasetError(f"{where}: 'text_input' must be non-empty text")
        return text, None
    return _delta(obj["messages"], where), None


def _delta(messages: Any, where: str) -> str:
    """Delta messages as one input: the contents of the user's and tools' messages, joined by blank lines."""
    if not isinstance(messages, list) or not messages:
        raise DatasetError(f"{where}: 'messages' must be a non-empty list of {{role, content}} objects")
    parts = []
    for n, m in enumerate(messages, 1):
        if not isinstance(m, dict) or not isinstance(m.get("content"), str) or not m["content"].strip():
            raise DatasetError(f"{where}: message {n}: expected {{\"role\": ..., \"content\": non-empty text}}")
        _role(m, f"{where}: message {n}")
        parts.append(m["content"])
    return "\n\n".join(parts)


def _hash_ids(value: Any, mode: str, where: str) -> None:
    if mode != "input_length":
        raise DatasetError(f"{where}: 'hash_ids' go with 'input_length' only")
    if not isinstance(value, list) or len(value) > _MAX_HASH_IDS \
            or not all(isinstance(h, int) and not isinstance(h, bool) and 0 <= h < 2**63 for h in value):
        raise DatasetError(f"{where}: 'hash_ids' must be a list of at most {_MAX_HASH_IDS:,} whole numbers ≥ 0")


def _tokens(obj: dict[str, Any], key: str, where: str) -> int:
    value = obj.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_TOKENS:
        raise DatasetError(f"{where}: '{key}' must be a whole number of tokens from 1 to {MAX_TOKENS}")
    return value


def _length(item: dict[str, Any], where: str, default: int | None) -> int:
    """The turn's ``output_length``, or the run's ``default`` where it gives none."""
    if item.get("output_length") is not None:
        return _tokens(item, "output_length", where)
    if default is None:
        raise DatasetError(f"{where}: no 'output_length': give one (or the run's --output-tokens)")
    return default


def _ms(item: dict[str, Any], key: str, where: str, most: float) -> float | None:
    value = item.get(key)
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value) \
            or not 0 <= value <= most:
        raise DatasetError(f"{where}: '{key}' must be a number of milliseconds from 0 to {most:g}")
    return float(value)
