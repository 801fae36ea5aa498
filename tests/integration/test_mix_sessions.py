"""A tenant mix of chat sessions (``bench --mix FILE --sessions N``) against the simulator serving LoRA adapters,
which logs every request (its adapter and body: the truth). Each session is one tenant's from its first turn to
its last: every turn asks for that tenant's adapter and carries the conversation so far (the tenant's own
messages and the model's real answers); a synthetic tenant's sessions have its own number of turns, a ShareGPT
tenant's its conversations'. The per-tenant blocks count each tenant's turns; with ``--workers`` every session
goes to the tenant one process gives it."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SimServer, run_cli
from tests.helpers import bench
from tokometer.records import RequestRecord

MODELS = {"chat": "adapter-a", "faq": None}


def _mix(tmp_path: Path) -> dict[str, Any]:
    chats = [{"conversations": [{"from": "human", "value": f"faq {i} question {k}"} if j == 0 else
                                {"from": "gpt", "value": "recorded answer"} for k in range(2) for j in range(2)]}
             for i in range(8)]
    (tmp_path / "faq.json").write_text(json.dumps(chats))
    return {"tenants": [
        {"name": "chat", "share": 0.6, "model": "adapter-a", "input_tokens": 12, "output_tokens": 3, "turns": "3",
         "think_time": "10ms"},
        {"name": "faq", "share": 0.4, "dataset": str(tmp_path / "faq.json"), "dataset_kind": "sharegpt",
         "output_tokens": 2}]}


def _sessions(records: list[RequestRecord]) -> dict[int, list[RequestRecord]]:
    out: dict[int, list[RequestRecord]] = defaultdict(list)
    for r in sorted(records, key=lambda r: (r.session or 0, r.turn or 0)):
        out[r.session or 0].append(r)
    return out


def test_each_session_is_one_tenants_conversation(sim_factory: Callable[..., SimServer], tmp_path: Path) -> None:
    sim = sim_factory("--ttft-ms", "3", "--itl-ms", "1", "--lora", "adapter-a", "--trace-bodies")
    result = bench(sim.openai_url, mix=_mix(tmp_path), sessions=8, concurrency=[2], seed=6, tokenizer="none")
    (step,) = result.steps
    records = step.records
    assert all(r.ok for r in records)
    sessions = _sessions(records)
    assert len(sessions) == 8
    for turns in sessions.values():
        tenant = turns[0].tenant
        assert {r.tenant for r in turns} == {tenant} and tenant in MODELS
        assert len(turns) == (3 if tenant == "chat" else 2)
    assert {r.tenant for r in records} == set(MODELS)
    conversations: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for t in sim.trace():  # the log alone: each session known by its first message
        body = json.loads(t["body"])
        conversations[body["messages"][0]["content"]].append({**body, "adapter": t["adapter"]})
    assert len(conversations) == 8
    for first, logged in conversations.items():
        tenant = "faq" if first.startswith("faq ") else "chat"
        assert {t["adapter"] for t in logged} == {MODELS[tenant]}
        assert {t["max_tokens"] for t in logged} == {3 if tenant == "chat" else 2}
        assert sorted(len(t["messages"]) for t in logged) == [1, 3, 5][:3 if tenant == "chat" else 2]
        if tenant == "faq":
            i = first.split()[1]
            longest = max(logged, key=lambda t: len(t["messages"]))["messages"]
            assert [m["content"] for m in longest[::2]] == [f"faq {i} question {k}" for k in range(2)]
            assert "recorded" not in longest[1]["content"]  # the model's own answer, not the file's
    served = Counter(t["adapter"] for logged in conversations.values() for t in logged)
    assert served == Counter(MODELS[r.tenant or ""] for r in records)
    block = step.summary.tenants
    assert block is not None
    assert {t["name"]: t["requests"] for t in block["tenants"]} == dict(Counter(r.tenant for r in records))


def test_workers_give_each_session_to_the_same_tenant(sim_factory: Callable[..., SimServer],
                                                      tmp_path: Path) -> None:
    sim = sim_factory("--ttft-ms", "3", "--itl-ms", "1", "--lora", "adapter-a")
    mix = _mix(tmp_path)
    alone = bench(sim.openai_url, mix=mix, sessions=8, concurrency=[2], seed=6, tokenizer="none")
    shared = bench(sim.openai_url, mix=mix, sessions=8, concurrency=[2], seed=6, tokenizer="none", workers=2)
    one = {s: turns[0].tenant for s, turns in _sessions(alone.steps[0].records).items()}
    two = {s: turns[0].tenant for s, turns in _sessions(shared.steps[0].records).items()}
    assert two == one and len(two) == 8
    assert Counter(r.tenant for r in shared.steps[0].records) == Counter(r.tenant for r in alone.steps[0].records)


@pytest.mark.parametrize(("table", "extra", "said"), [
    ('name = "a"\nshare = 1\nturns = "3"\n', [], "tenant 'a' of --mix gives turns or think_time"),
    ('name = "a"\nshare = 1\nprompt = "hi"\n', ["--sessions", "2"], "needs conversations"),
    ('name = "a"\nshare = 1\nturns = "two"\n', ["--sessions", "2"], "turns: 'two' is not a whole number"),
])
def test_what_sessions_in_a_mix_cannot_take_is_one_line(tmp_path: Path, table: str, extra: list[str],
                                                        said: str) -> None:
    path = tmp_path / "mix.toml"
    path.write_text("[[tenant]]\n" + table)
    done = run_cli("bench", "--url", "http://127.0.0.1:9/v1", "--mix", str(path), "--no-store", *extra)
    assert done.returncode == 2 and said in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
