"""`Session`: what the checks of one ``doctor`` run share: the target, the probe, one request at a time.

Requests go through the project's own client (`tokometer.client.streamclient.StreamClient`, the one
``bench`` stamps with) and GETs through `tokometer.client.probe.Probe`; nothing here speaks
HTTP itself. Prompts of a known length are made with the server's tokenizer where it has one
(`tokometer.datasets.synthetic.make_exact_text`), else as words (then the length in tokens is
only known to be at least the word count).
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from tokometer.benchmark.preflight import server_root
from tokometer.benchmark.spec import BenchSpec
from tokometer.client.probe import Probe
from tokometer.client.streamclient import StreamClient, Target, Timeouts
from tokometer.datasets.synthetic import make_exact_text
from tokometer.datasets.words import WORDS
from tokometer.doctor.finding import Finding, Skipped
from tokometer.doctor.spec import DoctorSpec
from tokometer.prompt import Prompt
from tokometer.protocols.common.base import GenerationParams
from tokometer.protocols.registry import create_client
from tokometer.records import RequestRecord
from tokometer.tokens.base import BaseTokenizer
from tokometer.util.errors import DatasetError, TokenizerError
from tokometer.util.waitnotice import WAIT_NOTICE_AFTER_S, say_while_waiting

__all__ = ["Exchange", "Session"]


@dataclass(slots=True)
class Exchange:
    """One request sent by a check: the record the client filled, and whether include_usage was refused."""

    record: RequestRecord
    usage_rejected: bool = False
    prompt_tokens: int | None = None
    """Tokens of the prompt's content as sent (exact with a tokenizer; else None)."""
    prompt_words: int = 0


@dataclass
class Session:
    """State shared by the checks of one run; checks add to ``findings`` and ``skipped``."""

    spec: DoctorSpec
    findings: list[Finding] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    model: str = ""
    served: list[str] | None = None
    """Model names the server lists (None: it lists none, or could not be asked)."""
    reachable: bool = True
    can_generate: bool = True
    """False once the check request failed (refused key, wrong path): later checks that send requests skip."""
    server_date_skew_s: float | None = None
    """The server's ``Date`` header minus this machine's clock, in seconds (where a response had one)."""
    www_authenticate: str = ""
    context: tuple[int, str] | None = None
    """(context window in tokens, where it was read or how it was found)."""
    refused_at: int | None = None
    """The shortest prompt (tokens) a context probe saw refused, when the window was found by probing."""
    props: dict[str, Any] | None = None
    """llama.cpp's /props, where the server has it."""
    speed: dict[str, Any] = field(default_factory=dict)
    """What the speed check measured, for the server and host checks (the loaded step's server block)."""
    _tokenizer: BaseTokenizer | None = None
    _tokenizer_tried: bool = False
    _rng: random.Random = field(default_factory=random.Random)

    def __post_init__(self) -> None:
        headers = create_client(self.api).auth_headers(self.spec.api_key) if self.spec.api_key else {}
        self.probe = Probe(headers, timeout_s=self.connect_timeout_s)
        self.model = self.spec.model

    @property
    def api(self) -> str:
        return self.spec.protocol

    @property
    def url(self) -> str:
        return self.spec.url.rstrip("/")

    @property
    def root(self) -> str:
        return server_root(self.spec.url)

    @property
    def host(self) -> str:
        return urlsplit(self.spec.url).hostname or ""

    @property
    def connect_timeout_s(self) -> float:
        return min(10.0, self.spec.timeout_s / 6)

    def add(self, finding: Finding) -> None:
        self.findings.append(finding)

    def skip(self, check: str, reason: str) -> None:
        self.skipped.append(Skipped(check, reason))

    def bench_spec(self, **values: Any) -> BenchSpec:
        """A `BenchSpec` for this target (for the benchmark's own functions: preflight, run_benchmark)."""
        return BenchSpec(url=self.spec.url, api=self.api, model=self.model, api_key=self.spec.api_key,
                         connect_timeout_s=self.connect_timeout_s, request_timeout_s=self.spec.timeout_s, **values)

    async def tokenizer(self) -> BaseTokenizer | None:
        """The model's tokenizer: the server's /tokenize (``auto``), or what ``--tokenizer`` names; None if none."""
        if self._tokenizer_tried:
            return self._tokenizer
        self._tokenizer_tried = True
        choice = self.spec.tokenizer
        try:
            if choice in ("auto", "server"):
                from tokometer.tokens import probe_server_tokenizer

                self._tokenizer = await asyncio.to_thread(probe_server_tokenizer, self.spec.url, self.model,
                                                          self.spec.api_key)
            elif choice != "none":
                from tokometer.tokens.loader import load_tokenizer

                self._tokenizer = await asyncio.to_thread(load_tokenizer, choice)
        except TokenizerError as exc:
            self.skip("context", f"tokenizer {choice!r}: {exc}")
        return self._tokenizer

    async def prompt(self, n_tokens: int, *, seed: int | None = None) -> tuple[Prompt, int | None, int]:
        """A fresh prompt of ``n_tokens`` tokens: (prompt, exact token count or None, words)."""
        rng = random.Random(seed) if seed is not None else self._rng
        tokenizer = await self.tokenizer()
        if tokenizer is not None:
            try:
                text = await asyncio.to_thread(make_exact_text, tokenizer, n_tokens, rng)
                return Prompt.from_text(text, input_tokens=n_tokens), n_tokens, len(text.split())
            except (DatasetError, TokenizerError):
                pass
        text = " ".join(rng.choice(WORDS) for _ in range(n_tokens))
        return Prompt.from_text(text), None, n_tokens

    async def send(self, prompt: Prompt, max_tokens: int, *, ignore_eos: bool = False,
                   include_usage: bool = True) -> Exchange:
        """Send ``prompt`` once, streamed, through the benchmark's client; the record is never an exception."""
        target = Target(self.spec.url, self.spec.api_key)
        backend = create_client(self.api)
        params = GenerationParams(model=self.model, max_tokens=max_tokens, ignore_eos=ignore_eos, temperature=0.0,
                                  seed=0, include_usage=include_usage)
        timeouts = Timeouts(connect=self.connect_timeout_s, idle=self.spec.timeout_s, total=self.spec.timeout_s)
        record = RequestRecord(index=0, step=-1)
        waiting = (f"tokometer doctor: waiting for {self.spec.url} to answer a request: no answer in "
                   f"{WAIT_NOTICE_AFTER_S:g} s (it fails after --timeout {self.spec.timeout_s:g})")
        with say_while_waiting(lambda: waiting):
            async with StreamClient(target, backend, params, timeouts) as client:
                await client.send(prompt, record)
        return Exchange(record, backend.include_usage_rejected, prompt.input_tokens, len(prompt.text.split()))
