"""The start-up record (`tokometer.engines.startup.EngineStartup`): written and read back, and what is not a
start-up time refused when it is read (the identity is read back from stores and files)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from tokometer.engines.startup import STARTUP_KEY, WARM_MEANS, EngineStartup, startup_of
from tokometer.report.headline import startup_line
from tokometer.store.runs import EngineIdentity


def test_written_and_read_back() -> None:
    startup = EngineStartup("llamacpp", 1.25, 0.5)
    data = startup.to_json()
    assert data["warm_means"] == WARM_MEANS["llamacpp"]
    assert "first 1-token answer" in data["measured"]
    assert EngineStartup.from_json(data) == startup
    assert startup_of({STARTUP_KEY: data}) == startup
    cold_only = EngineStartup("vllm", 90.0)
    assert EngineStartup.from_json(cold_only.to_json()) == cold_only
    assert "warm" not in cold_only.describe()


@pytest.mark.parametrize("bad", [None, "1.0", True, -1.0, math.nan, math.inf, 1e12, [1.0], {"s": 1}])
def test_a_value_that_is_not_a_time_is_no_startup(bad: Any) -> None:
    assert EngineStartup.from_json({"engine": "llamacpp", "cold_s": bad}) is None
    expected = EngineStartup("llamacpp", 1.0) if bad is None else None  # no warm start: a start-up still
    assert EngineStartup.from_json({"engine": "llamacpp", "cold_s": 1.0, "warm_s": bad}) == expected


@pytest.mark.parametrize("identity", [None, {}, {STARTUP_KEY: "fast"}, {STARTUP_KEY: [1, 2]}])
def test_an_identity_without_one_has_none(identity: dict[str, Any] | None) -> None:
    assert startup_of(identity) is None
    assert startup_line(identity) is None


def test_the_console_line_reads_a_stored_identity() -> None:
    identity = EngineIdentity.from_json({"engine": "llama.cpp", STARTUP_KEY: EngineStartup("llamacpp", 2.0, 1.0)
                                         .to_json()})
    assert startup_line(identity) == "Engine started in 2.00 s (cold: process start to first answer), 1.00 s warm " \
                                     "(a second start)"


def test_the_reports_say_it_where_they_say_the_engine() -> None:
    from tokometer.report.headline import describe

    run = {"model": "m", "target": "http://x/v1", "api": "openai-chat",
           "engine": {"engine": "llama.cpp", STARTUP_KEY: EngineStartup("llamacpp", 3.0).to_json()}}
    assert describe(run) == ("model m at http://x/v1 (openai-chat); engine llama.cpp, started in 3.00 s (cold: "
                             "process start to first answer)")
    assert "started" not in describe({**run, "engine": {"engine": "llama.cpp"}})
