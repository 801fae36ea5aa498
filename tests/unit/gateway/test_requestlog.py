"""The request log: JSON lines written by a background thread, and the cost of a request."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest

from tokometer.gateway.config import UpstreamConfig
from tokometer.gateway.requestlog import HANDOVER_S, RequestLog, RequestLogEntry, _utc_now, cost_usd
from tokometer.util.errors import ConfigError


def test_lines_are_written_in_order_and_flushed_on_close(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "requests.jsonl"
    log = RequestLog(path)
    for i in range(500):
        log.write(RequestLogEntry(key="team-a", route="chat", upstream="primary", model_served="m", status=200,
                                  prompt_tokens=i, completion_tokens=2, cost_usd=0.001, ttft_ms=12.5,
                                  decode_tok_s=80.0, e2e_ms=40.0, retries=1))
    log.write(RequestLogEntry(key=None, route="chat", status=429, error="budget"))
    log.close()
    log.close()
    log.write(RequestLogEntry(key=None, route="late", status=200))  # after close: ignored
    lines = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    assert len(lines) == 501
    assert [line["prompt_tokens"] for line in lines[:500]] == list(range(500))
    first, last = lines[0], lines[-1]
    assert list(first) == ["time", "key", "route", "upstream", "model_served", "status", "prompt_tokens",
                           "completion_tokens", "cost_usd", "ttft_ms", "tpot_ms", "decode_tok_s", "e2e_ms", "cache_hit",
                           "fallback", "retries", "error", "upstream_ttft_ms", "overhead_ms", "hedge", "resumes",
                           "served_by", "api"]
    assert first["time"].endswith("Z") and first["retries"] == 1 and first["cache_hit"] is False
    assert last == {**last, "key": None, "status": 429, "error": "budget", "upstream": None, "e2e_ms": 0.0}
    RequestLog(path).close()  # reopening appends
    assert len(path.read_bytes().splitlines()) == 501


def test_lines_written_on_an_event_loop_reach_the_file_in_one_hand_over(tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    log = RequestLog(path)

    async def requests() -> list[int]:
        counts = []
        for i in range(300):
            log.write(RequestLogEntry(key=None, route="chat", status=200, prompt_tokens=i))
        counts.append(len(path.read_bytes().splitlines()))  # gathered on the loop, not handed over yet
        await asyncio.sleep(HANDOVER_S * 5)
        for _ in range(100):  # the thread writes them out soon after the hand-over
            if len(path.read_bytes().splitlines()) == 300:
                break
            await asyncio.sleep(0.01)
        counts.append(len(path.read_bytes().splitlines()))
        log.write(RequestLogEntry(key=None, route="chat", status=200, prompt_tokens=300))
        return counts

    assert asyncio.run(requests()) == [0, 300]
    asyncio.run(asyncio.sleep(0))  # a later loop: the line gathered on the first (now closed) is still pending
    log.close()  # close hands over what is pending
    lines = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    assert [line["prompt_tokens"] for line in lines] == list(range(301))


def test_time_is_utc_to_the_millisecond() -> None:
    before = datetime.now(UTC)
    stamp = _utc_now()
    after = datetime.now(UTC)
    parsed = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    assert stamp.endswith("Z") and len(stamp) == len("2026-12-01T15:25:42.862Z")
    assert before.replace(microsecond=before.microsecond // 1000 * 1000) <= parsed <= after
    time.sleep(0.002)
    assert _utc_now() > stamp


def test_no_path_is_a_no_op() -> None:
    log = RequestLog(None)
    log.write(RequestLogEntry(key=None, route="chat", status=200))
    log.close()


def test_unwritable_path_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match=r"log\.path: cannot open"):
        RequestLog(tmp_path / "file" / "requests.jsonl")


def test_cost_from_upstream_prices() -> None:
    def upstream(**prices: float) -> UpstreamConfig:
        return UpstreamConfig(name="u", url="http://127.0.0.1:1/v1", **prices)

    priced = upstream(price_input_per_m=0.5, price_output_per_m=1.5)
    assert cost_usd(priced, 1_000_000, 2_000_000) == pytest.approx(3.5)
    assert cost_usd(priced, 1000, None) is None
    assert cost_usd(upstream(), 1000, 1000) is None
    assert cost_usd(upstream(price_output_per_m=2.0), None, 500_000) == pytest.approx(1.0)
