"""A streaming client for the gateway tests: reads SSE events as they arrive and stamps each one."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SimServer, start_gateway


@dataclass
class Streamed:
    """What a client read from one streamed answer."""

    status: int
    headers: dict[str, str]
    events: list[tuple[float, Any]] = field(default_factory=list)
    """(seconds since the request was sent, the event's JSON or the string "[DONE]")."""

    @property
    def chunks(self) -> list[dict[str, Any]]:
        return [e for _, e in self.events if isinstance(e, dict) and "error" not in e]

    @property
    def text(self) -> str:
        return "".join(c["choices"][0]["delta"].get("content") or "" for c in self.chunks if c.get("choices"))

    @property
    def content_times(self) -> list[float]:
        return [t for t, e in self.events if isinstance(e, dict) and e.get("choices")
                and e["choices"][0]["delta"].get("content")]

    @property
    def ttft_s(self) -> float:
        return self.content_times[0]

    @property
    def finish_reasons(self) -> list[str]:
        return [c["choices"][0]["finish_reason"] for c in self.chunks if c.get("choices")
                and c["choices"][0].get("finish_reason")]

    @property
    def usages(self) -> list[dict[str, int]]:
        return [c["usage"] for c in self.chunks if c.get("usage")]

    @property
    def errors(self) -> list[str]:
        return [e["error"]["message"] for _, e in self.events if isinstance(e, dict) and "error" in e]

    @property
    def dones(self) -> int:
        return sum(1 for _, e in self.events if e == "[DONE]")


def stream_chat(base_url: str, body: dict[str, Any], on_content: Callable[[int], None] | None = None,
                timeout: float = 30, headers: dict[str, str] | None = None) -> Streamed:
    """POST a streamed chat to ``base_url`` (…/v1) and read it event by event; ``on_content(n)`` after the n-th
    content event."""
    request = urllib.request.Request(base_url + "/chat/completions", json.dumps({**body, "stream": True}).encode(),
                                     {"Content-Type": "application/json", **(headers or {})})
    sent = time.perf_counter()
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as error:
        with error:
            return Streamed(error.code, {k.lower(): v for k, v in error.headers.items()},
                            [(time.perf_counter() - sent, json.loads(error.read()))])
    with response:
        out = Streamed(response.status, {k.lower(): v for k, v in response.headers.items()})
        contents = 0
        for line in response:
            if not line.startswith(b"data: "):
                continue
            payload = line[6:].strip()
            event = "[DONE]" if payload == b"[DONE]" else json.loads(payload)
            out.events.append((time.perf_counter() - sent, event))
            if isinstance(event, dict) and event.get("choices") and event["choices"][0]["delta"].get("content"):
                contents += 1
                if on_content is not None:
                    on_content(contents)
    return out


def upstream(name: str, sim: SimServer, model: str, extra: str = "") -> str:
    return f'[[upstreams]]\nname = "{name}"\nurl = "{sim.openai_url}"\nmodel = "{model}"\n{extra}\n'


def metrics(root: str) -> dict[str, float]:
    with urllib.request.urlopen(root + "/metrics", timeout=10) as response:
        text = response.read().decode()
    return {line.rpartition(" ")[0]: float(line.rpartition(" ")[2]) for line in text.splitlines()
            if line and not line.startswith("#")}


def patch_sim(sim: SimServer, changes: dict[str, Any]) -> None:
    sim.call("/sim/config", "PATCH", changes)


@pytest.fixture
def gateway_factory(tmp_path: Path) -> Iterator[Callable[[str], SimServer]]:
    started: list[SimServer] = []

    def make(text: str) -> SimServer:
        path = tmp_path / f"gateway{len(started)}.toml"
        path.write_text(text)
        server = start_gateway(path)
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()
