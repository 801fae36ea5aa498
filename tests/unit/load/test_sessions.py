"""Sessions and traces without a server: sampled values, session scripts, per-turn metrics, trace prompts."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path

import pytest

from tokometer.benchmark.plan import sweep_steps
from tokometer.benchmark.spec import BenchSpec
from tokometer.datasets.conversations import ShareGPTSessions, SyntheticSessions
from tokometer.datasets.sampled import Sampled
from tokometer.datasets.synthetic import SyntheticSource
from tokometer.datasets.trace import EXAMPLE_TRACE, TraceSource, read_trace, trace_offsets
from tokometer.load.profiles import LoadStep
from tokometer.metrics import summarize
from tokometer.metrics.sessions import per_turn, session_stats
from tokometer.records import RequestRecord, ServerTiming
from tokometer.tokens.base import BaseTokenizer
from tokometer.util.errors import ConfigError, DatasetError

MS = 1_000_000


class CharPairs(BaseTokenizer):
    """A toy tokenizer whose pieces merge across spaces: every two characters are a token."""

    name = "pairs"

    def _encode(self, text: str) -> list[int]:
        return [hash(text[i:i + 2]) & 0xFFFF for i in range(0, len(text), 2)]

    def encode(self, text: str) -> list[int]:
        self._texts = getattr(self, "_texts", {})
        ids = self._encode(text)
        for i, piece in zip(ids, (text[j:j + 2] for j in range(0, len(text), 2)), strict=True):
            self._texts[i] = piece
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(self._texts[i] for i in ids)

    def count(self, text: str) -> int:
        return (len(text) + 1) // 2


class Words(BaseTokenizer):
    """One word is one token (the simulator's tokenizer)."""

    name = "words"

    def encode(self, text: str) -> list[int]:
        self._words = getattr(self, "_words", {})
        out = []
        for word in text.split():
            self._words.setdefault(hash(word) & 0xFFFFFF, word)
            out.append(hash(word) & 0xFFFFFF)
        return out

    def decode(self, ids: Sequence[int]) -> str:
        return " ".join(self._words[i] for i in ids)

    def count(self, text: str) -> int:
        return len(text.split())


def test_sampled_forms() -> None:
    rng = random.Random(1)
    assert Sampled.parse("4", "--turns", whole=True).draw(rng) == 4
    span = {Sampled.parse("2-6", "--turns", whole=True).draw(rng) for _ in range(200)}
    assert span == {2, 3, 4, 5, 6}
    counts = [Sampled.parse("exp:4", "--turns", whole=True).draw(rng) for _ in range(4000)]
    assert min(counts) >= 1 and sum(counts) / len(counts) == pytest.approx(4, rel=0.1)
    assert Sampled.parse("500ms", "--think-time").draw(rng) == pytest.approx(0.5)
    assert 1.0 <= Sampled.parse("1s-3s", "--think-time").draw(rng) <= 3.0
    assert Sampled.parse("exp:2s", "--think-time").mean == 2.0
    for bad in ("x", "3-1", "exp:0", "2.5"):
        with pytest.raises(ConfigError):
            Sampled.parse(bad, "--turns", whole=True)


def test_synthetic_sessions_are_seeded_and_exact() -> None:
    tok = Words()
    make = lambda seed: SyntheticSessions(SyntheticSource(12, tokenizer=tok, seed=seed),  # noqa: E731
                                          Sampled.parse("2-5", "t", whole=True), Sampled.parse("1s", "t"), seed)
    a, b = make(7), make(7)
    a.prepare(10)
    first = a.script_list(0, 10)
    assert first == b.script_list(0, 10)
    assert {len(s.turns) for s in first} <= {2, 3, 4, 5}
    assert all(t.input_tokens == 12 == tok.count(t.user) for s in first for t in s.turns)
    assert all(s.turns[0].think_s == 0 and all(t.think_s == 1.0 for t in s.turns[1:]) for s in first)
    users = [t.user for s in first for t in s.turns]
    assert len(set(users)) == len(users)  # every message of every session differs


def test_sharegpt_sessions_keep_the_human_turns(tmp_path: Path) -> None:
    path = tmp_path / "chats.json"
    path.write_text(json.dumps([
        {"conversations": [{"from": "system", "value": "be brief"}, {"from": "human", "value": "one two"},
                           {"from": "gpt", "value": "a b c"}, {"from": "human", "value": "three"},
                           {"from": "gpt", "value": "d e f g"}, {"from": "human", "value": "four five six"}]},
        {"conversations": [{"from": "gpt", "value": "hello"}]},
    ]))
    source = ShareGPTSessions(path, Words(), Sampled.parse("0", "t"))
    (script,) = source.items
    assert [m.content for m in script.system] == ["be brief"]
    assert [(t.user, t.max_tokens) for t in script.turns] == [("one two", 3), ("three", 4), ("four five six", None)]
    capped = ShareGPTSessions(path, Words(), Sampled.parse("0", "t"), max_turns=2)
    assert len(capped.items[0].turns) == 2


def _record(index: int, session: int, turn: int, ttft_ms: float, prompt: int, cached: int | None,
            ok: bool = True, warmup: bool = False) -> RequestRecord:
    sent = (index + 1) * 1000 * MS
    r = RequestRecord(index=index, warmup=warmup, due_ns=sent, sent_ns=sent, session=session, turn=turn)
    r.first_token_ns = r.last_token_ns = sent + int(ttft_ms * MS)
    r.end_ns = r.first_token_ns + 10 * MS
    r.event_ns, r.event_tokens = [r.first_token_ns], [1.0]
    r.output_tokens, r.output_tokens_source = 1, "usage"
    r.input_tokens, r.input_tokens_source = prompt, "usage"
    r.server = ServerTiming(prompt_tokens=prompt - (cached or 0), cached_tokens=cached)
    if not ok:
        r.error, r.error_detail = "http_5xx", "HTTP 500"
    return r


def test_per_turn_and_session_metrics() -> None:
    records = [
        _record(0, 0, 0, 20, 100, 0), _record(1, 0, 1, 30, 200, 100), _record(2, 0, 2, 40, 300, 200),
        _record(3, 1, 0, 22, 100, 0), _record(4, 1, 1, 32, 200, 150, ok=False),
        _record(5, 2, 0, 99, 100, 0, warmup=True),
    ]
    turns = per_turn(records)
    assert turns is not None and [t["turn"] for t in turns] == [1, 2, 3]
    assert [t["requests"] for t in turns] == [2, 1, 1] and turns[1]["failed"] == 1
    assert turns[0]["ttft_ms"]["p50"] == pytest.approx(21.0)
    assert turns[1]["prompt_cache_hit_rate"] == pytest.approx(0.5)
    assert turns[2]["cached_tokens_mean"] == 200
    stats = session_stats(records)
    assert stats is not None
    assert (stats["sessions"], stats["completed"], stats["failed"]) == (2, 1, 1)
    assert stats["turns"]["mean"] == 2.5
    assert stats["ttft_turn_growth"] == pytest.approx(40 / 21)  # turn 3: reached by half the sessions, counted
    summary = summarize(records)
    assert summary.per_turn == turns and summary.session_stats == stats
    assert summarize(records[:0]).per_turn is None
    assert summarize([_record(0, 0, 0, 20, 100, 0)]).session_stats is not None
    plain = _record(0, 0, 0, 20, 100, 0)
    plain.session = plain.turn = None
    assert summarize([plain]).per_turn is None and summarize([plain]).session_stats is None


def _write_trace(path: Path, rows: list[tuple[float, int, int, list[int]]]) -> Path:
    path.write_text("".join(json.dumps({"timestamp": t, "input_length": n, "output_length": o, "hash_ids": ids})
                            + "\n" for t, n, o, ids in rows))
    return path


@pytest.mark.parametrize("tokenizer", [Words(), CharPairs()], ids=["words", "merging"])
def test_trace_prompts_are_exact_and_share_their_blocks(tmp_path: Path, tokenizer: BaseTokenizer) -> None:
    path = _write_trace(tmp_path / "t.jsonl", [(0, 40, 5, [1, 2, 3]), (10, 37, 6, [1, 2, 9]), (10, 16, 7, [1, 2]),
                                               (25.5, 30, 8, [4]), (30, 20, 9, [])])
    source = TraceSource(path, tokenizer, block_tokens=16, seed=3)
    source.prepare()
    for entry, prompt in zip(source.entries, source.items, strict=True):
        assert tokenizer.count(prompt.text) == entry.input_length == prompt.input_tokens
        assert prompt.max_tokens == entry.output_length
    block = source._blocks[(1, 16)] + " " + source._blocks[(2, 16)]
    assert all(p.text.startswith(block) for p in source.items[:2])
    assert source.items[2].text.startswith(source._blocks[(1, 16)])
    assert source.shared_share == pytest.approx((32 + 16) / (40 + 37 + 16 + 30 + 20))
    assert next(TraceSource(path, tokenizer, block_tokens=16, seed=3).prompts()) == source.items[0]  # seeded
    other = TraceSource(path, tokenizer, block_tokens=16, seed=4)
    other.prepare()
    assert other.items[0].text != source.items[0].text  # a fresh seed, fresh text


def test_trace_reading_and_timing(tmp_path: Path) -> None:
    path = _write_trace(tmp_path / "t.jsonl", [(100, 4, 1, []), (100, 4, 1, []), (350.5, 4, 1, [])])
    entries = read_trace(path)
    assert trace_offsets(entries) == (0, 0, 250_500_000)
    assert trace_offsets(entries, 2.0) == (0, 0, 501_000_000)
    (tmp_path / "back.jsonl").write_text('{"timestamp": 5, "input_length": 1, "output_length": 1}\n'
                                         '{"timestamp": 4, "input_length": 1, "output_length": 1}\n')
    with pytest.raises(DatasetError, match="backwards"):
        read_trace(tmp_path / "back.jsonl")
    (tmp_path / "bad.jsonl").write_text('{"timestamp": 0, "input_length": 0, "output_length": 1}\n')
    with pytest.raises(DatasetError, match="input_length"):
        read_trace(tmp_path / "bad.jsonl")
    example = read_trace("example")
    assert read_trace(EXAMPLE_TRACE) == example and len(example) == 60
    assert any(e.hash_ids[:2] == (0, 1) for e in example)


def test_trace_and_session_steps_and_specs(tmp_path: Path) -> None:
    path = _write_trace(tmp_path / "t.jsonl", [(0, 4, 1, []), (500, 4, 1, []), (1000, 4, 1, [])])
    spec = BenchSpec(url="http://x/v1", trace=path, time_scale=0.5)
    assert spec.requests is None
    (step,) = sweep_steps(spec)
    assert step.mode == "trace" and step.offsets == (0, 250_000_000, 500_000_000) and step.open_loop
    assert step.label() == {"rate": pytest.approx(4.0), "arrival": "trace", "trace": "t.jsonl", "requests": 3}
    sessions = BenchSpec(url="http://x/v1", sessions=5, concurrency=[2], turns="2-4", think_time="exp:1s")
    assert sessions.requests is None
    assert sweep_steps(sessions) == [LoadStep("concurrency", concurrency=2, sessions=True)]
    assert sweep_steps(sessions)[0].label() == {"concurrency": 2, "sessions": True}
    for bad in ({"sessions": 2, "requests": 10}, {"turns": "3"}, {"sessions": 2, "turns": "0"},
                {"trace": path, "concurrency": [2]}, {"time_scale": 2.0}, {"trace": path, "sessions": 2},
                {"trace": path, "warmup": 2}, {"sessions": 2, "think_time": "soon"}):
        with pytest.raises(ValueError):
            BenchSpec(url="http://x/v1", **bad)
