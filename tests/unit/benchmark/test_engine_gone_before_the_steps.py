"""An embedded engine that dies before the run's steps (while the bench asks its tokenizer, its models or its check
request) fails the run naming the engine's exit (`RunFailed`, exit 1), not what failed because of it: beside the
other lanes a SIGKILL landed there and the run ended with "the server's tokenizer ... failed" and exit 2, as if
the input were bad. The server is a closed port on loopback, where a dead engine's port leaves nothing answering."""

from __future__ import annotations

import asyncio
import socket

import pytest

from tokometer.benchmark.run import run_benchmark
from tokometer.benchmark.spec import BenchSpec
from tokometer.util.errors import EndpointError, RunFailed

DEAD = "the engine exited during the run (exit code -9); its last log lines: srv  update_slots"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_engine_gone_before_the_steps_is_named_and_one_alive_leaves_the_error_as_it_is() -> None:
    spec = BenchSpec(url=f"http://127.0.0.1:{_closed_port()}/v1", requests=1, model="m", tokenizer="none")
    with asyncio.Runner() as runner:
        with pytest.raises(RunFailed, match=r"^the engine exited during the run \(exit code -9\)") as failed:
            runner.run(run_benchmark(spec, engine_check=lambda: DEAD))
        assert failed.value.exit_status == 1 and isinstance(failed.value.__cause__, EndpointError)
        with pytest.raises(EndpointError, match="nothing answers"):
            runner.run(run_benchmark(spec, engine_check=lambda: None))
