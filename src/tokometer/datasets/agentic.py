"""Agent traces: what an agent's sessions send, turn by turn, and what each turn waits for.

An agent trace is JSONL, one session a line, in order of ``start_ms`` (docs/reference/agent-trace.md)::

    {"session": "fix-17", "start_ms": 0, "prefix": {"id": "coder-v1", "tokens": 2000},
     "turns": [{"id": "plan", "input_tokens": 300, "output_tokens": 64},
               {"id": "read", "tool_ms": 250, "input_tokens": 800, "output_tokens": 48},
               {"id": "s1", "agent": "search-1", "after": ["read"], "input_tokens": 200, "output_tokens": 80},
               {"id": "s2", "agent": "search-2", "after": ["read"], "input_tokens": 200, "output_tokens": 80},
               {"id": "done", "after": ["s1", "s2"], "tool_ms": 100, "input_tokens": 50, "output_tokens": 128}]}

- a **turn** is one request of one **agent** (``agent``, default ``main``: the orchestrator); each agent keeps
  its own conversation, so a turn sends the agent's whole history (the prefix, every earlier input and the
  model's real answers) and then its new input;
- ``after`` names the earlier turns this one waits for; an agent's previous turn is always waited for (its
  answer is in the history). Turns of *other* agents in ``after`` are joins: their answers (the model's real
  ones) are appended to this turn's input, as a tool result is. Several turns waiting on one turn are a
  fan-out: they run concurrently. A reference must name an *earlier* turn of the session, so a trace cannot
  hold a cycle;
- ``tool_ms``: the tool's latency: the client waits this long after the last turn waited for has ended
  before sending (the time is the client's, not the server's);
- ``input_tokens`` (synthetic text of that length) or ``input`` (the text itself), and ``output_tokens``
  (the answer's ``max_tokens``);
- ``prefix``: a system prompt of ``tokens`` tokens that opens every agent's conversation; sessions that
  name the same ``id`` send the same text (a shared tool schema a server can keep warm), other ids differ.

Reading is bounded: at most `MAX_TRACE_BYTES` (the request traces' bound) within `READ_DEADLINE_S`, a line at
most `MAX_AGENT_LINE_BYTES`, at most `MAX_TURNS` turns a session; every fault is a `DatasetError` of one line
naming the file, the line and the field.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from tokometer.datasets.files import json_line
from tokometer.datasets.trace import MAX_TRACE_BYTES
from tokometer.util.errors import DatasetError
from tokometer.util.limits import MAX_TOKENS, MAX_TURNS
from tokometer.util.readlimit import iter_at_most, split_lines

__all__ = ["EXAMPLE_AGENT_TRACE", "MAIN_AGENT", "MAX_AGENT_LINE_BYTES", "MAX_AGENT_SESSIONS", "MAX_AGENT_TURNS",
           "MAX_START_MS", "MAX_TOOL_MS", "READ_DEADLINE_S",
           "AgentSession", "AgentTurn", "Prefix", "agent_lines", "parse_session", "read_agent_trace",
           "session_offsets", "sessions_from_lines"]

EXAMPLE_AGENT_TRACE: Final = Path(__file__).with_name("data") / "example_agent_trace.jsonl"
"""The small agent trace shipped with tokometer (``bench --agents example``)."""
MAIN_AGENT: Final = "main"
"""The agent a turn belongs to when it names none: the orchestrator."""
MAX_AGENT_LINE_BYTES: Final = 4 << 20
"""The longest line (one session: its turns and any literal inputs)."""
MAX_TOOL_MS: Final = 3_600_000.0
"""The longest tool latency a turn may wait (an hour)."""
MAX_START_MS: Final = 7 * 86_400_000.0
"""The latest a session may start (a week after the trace's first)."""
MAX_AGENT_SESSIONS: Final = 100_000
"""Sessions one trace (or one synthetic run) may hold."""
MAX_AGENT_TURNS: Final = 1_000_000
"""Turns of all its sessions together (each a record, and a text made before the run)."""
READ_DEADLINE_S: Final = 120.0
"""How long reading a trace may take, however slowly its bytes come (a pipe that trickles)."""
_ID_CHARS: Final = 200


@dataclass(frozen=True, slots=True)
class Prefix:
    """The system prompt that opens every conversation of a session: same ``id``, same text."""

    id: str
    tokens: int


@dataclass(frozen=True, slots=True)
class AgentTurn:
    """One request of one agent."""

    id: str
    agent: str
    after: tuple[int, ...]
    """Indices (in the session) of the turns this one waits for: always earlier; the agent's previous turn first."""
    tool_ms: float
    input_tokens: int | None
    input_text: str | None
    output_tokens: int
    at_ms: float | None = None
    """Not sent before this many ms after the session's start (a trace's fixed send time); None: as soon as
    what it waits for has ended, plus ``tool_ms``."""


@dataclass(frozen=True, slots=True)
class AgentSession:
    """One agent task: its turns in order (every turn after those it waits for)."""

    label: str
    start_ms: float
    turns: tuple[AgentTurn, ...]
    prefix: Prefix | None = None

    @property
    def agents(self) -> tuple[str, ...]:
        """The session's agents in order of their first turn (the orchestrator first when it has a turn)."""
        return tuple(dict.fromkeys(t.agent for t in self.turns))


def read_agent_trace(path: str | Path) -> list[AgentSession]:
    """The sessions of an agent trace file, in file order; ``example`` names the shipped example."""
    p = EXAMPLE_AGENT_TRACE if str(path) == "example" else Path(path)
    return sessions_from_lines(p, agent_lines(p))


def sessions_from_lines(p: Path, lines: Iterable[tuple[int, bytes]]) -> list[AgentSession]:
    """The sessions of the agent trace ``p`` from its numbered ``lines`` (`agent_lines`), in file order."""
    out: list[AgentSession] = []
    turns = 0
    for number, raw in lines:
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DatasetError(f"agent trace {p}:{number} is not UTF-8 text (byte {exc.start})") from None
        if not line.strip():
            continue
        session = parse_session(line, f"{p}:{number}", f"session {len(out) + 1}")
        if out and session.start_ms < out[-1].start_ms:
            raise DatasetError(f"{p}:{number}: 'start_ms' must not go backwards ({session.start_ms:g} after "
                               f"{out[-1].start_ms:g}): sort the sessions by start")
        turns += len(session.turns)
        if len(out) >= MAX_AGENT_SESSIONS or turns > MAX_AGENT_TURNS:
            raise DatasetError(f"{p}:{number}: a trace holds at most {MAX_AGENT_SESSIONS:,} sessions and "
                               f"{MAX_AGENT_TURNS:,} turns in all: split it")
        out.append(session)
    if not out:
        raise DatasetError(f"agent trace {p} holds no sessions")
    return out


def session_offsets(sessions: list[AgentSession], time_scale: float = 1.0) -> tuple[int, ...]:
    """Each session's start in ns from the first session's, stretched by ``time_scale``."""
    first = sessions[0].start_ms if sessions else 0.0
    return tuple(round((s.start_ms - first) * time_scale * 1e6) for s in sessions)


def agent_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """The trace's numbered lines within its byte, line and time bounds (any agent trace format's)."""
    def too_long(number: int) -> DatasetError:
        return DatasetError(f"{path}:{number}: a line longer than {MAX_AGENT_LINE_BYTES >> 20} MiB")

    yield from split_lines(iter_at_most(path, MAX_TRACE_BYTES, "not read", DatasetError, what="agent trace",
                                        deadline_s=READ_DEADLINE_S), MAX_AGENT_LINE_BYTES, too_long)


def parse_session(line: str, where: str, default_label: str) -> AgentSession:
    """One session line, validated; ``where`` names it in errors."""
    obj = json_line(line, where)
    if not isinstance(obj, dict):
        raise DatasetError(f"{where}: expected an object with 'turns' (one agent session a line)")
    label = obj.get("session", default_label)
    if not isinstance(label, str | int) or isinstance(label, bool) or len(str(label)) > _ID_CHARS:
        raise DatasetError(f"{where}: 'session' must be a name or a number (at most {_ID_CHARS} characters)")
    start = _number(obj, "start_ms", where, 0.0, MAX_START_MS)
    turns = obj.get("turns")
    if not isinstance(turns, list) or not turns:
        raise DatasetError(f"{where}: 'turns' must be a non-empty list of turn objects")
    if len(turns) > MAX_TURNS:
        raise DatasetError(f"{where}: {len(turns)} turns; a session holds at most {MAX_TURNS}")
    return AgentSession(str(label), start, _turns(turns, where), _prefix(obj.get("prefix"), where))


def _number(obj: dict[str, Any], key: str, where: str, default: float, most: float) -> float:
    value = obj.get(key, default)
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value) \
            or not 0 <= value <= most:
        raise DatasetError(f"{where}: '{key}' must be a number of milliseconds from 0 to {most:g}")
    return float(value)


def _whole(obj: dict[str, Any], key: str, where: str) -> int:
    value = obj.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_TOKENS:
        raise DatasetError(f"{where}: '{key}' must be a whole number of tokens from 1 to {MAX_TOKENS}")
    return value


def _name(obj: dict[str, Any], key: str, where: str, default: str) -> str:
    value = obj.get(key, default)
    if not isinstance(value, str) or not value or len(value) > _ID_CHARS:
        raise DatasetError(f"{where}: '{key}' must be a non-empty string of at most {_ID_CHARS} characters")
    return value


def _prefix(value: object, where: str) -> Prefix | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise DatasetError(f"{where}: 'prefix' must be an object with 'id' and 'tokens'")
    return Prefix(_name(value, "id", f"{where}: prefix", ""), _whole(value, "tokens", f"{where}: prefix"))


def _turns(items: list[Any], where: str) -> tuple[AgentTurn, ...]:
    """The turns, each checked; ``after`` resolved to indices of earlier turns."""
    index: dict[str, int] = {}
    last_of: dict[str, int] = {}
    out: list[AgentTurn] = []
    for k, item in enumerate(items):
        here = f"{where}: turn {k + 1}"
        if not isinstance(item, dict):
            raise DatasetError(f"{here}: expected an object with 'input_tokens' (or 'input') and 'output_tokens'")
        turn_id = _name(item, "id", here, f"t{k}")
        if turn_id in index:
            raise DatasetError(f"{here}: id {turn_id!r} is already the id of turn {index[turn_id] + 1}")
        agent = _name(item, "agent", here, MAIN_AGENT)
        after = _after(item.get("after", []), index, here)
        if agent in last_of and last_of[agent] not in after:
            after = (last_of[agent], *after)
        text, tokens = _input(item, here)
        at_ms = _number(item, "at_ms", here, 0.0, MAX_START_MS) if "at_ms" in item else None
        out.append(AgentTurn(turn_id, agent, after, _number(item, "tool_ms", here, 0.0, MAX_TOOL_MS), tokens, text,
                             _whole(item, "output_tokens", here), at_ms))
        index[turn_id] = last_of[agent] = k
    return tuple(out)


def _after(value: object, index: dict[str, int], where: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DatasetError(f"{where}: 'after' must be a list of the ids of earlier turns")
    out: list[int] = []
    for ref in value:
        if ref not in index:
            raise DatasetError(f"{where}: 'after' names {ref[:_ID_CHARS]!r}, which is not an earlier turn of the "
                               "session (a turn waits only for turns before it: a later one would be a cycle)")
        if index[ref] not in out:
            out.append(index[ref])
    return tuple(out)


def _input(item: dict[str, Any], where: str) -> tuple[str | None, int | None]:
    if "input" in item:
        text = item["input"]
        if not isinstance(text, str) or not text.strip() or "input_tokens" in item:
            raise DatasetError(f"{where}: 'input' must be non-empty text, given without 'input_tokens'")
        return text, None
    return None, _whole(item, "input_tokens", where)
