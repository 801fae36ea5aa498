"""`GatewayConfig`: the gateway's TOML/YAML file, validated, with ``TOKOMETER_GATEWAY__...`` overrides.

`EXAMPLE_CONFIG` is a complete example; `config_reference` lists every section and key with its
default and description, read from the models below (``tokometer gateway --help`` shows both).
Environment variables override any value: ``TOKOMETER_GATEWAY__SERVER__PORT=9000``,
``TOKOMETER_GATEWAY__CACHE__REDIS_URL=...`` (lists by index: ``..__UPSTREAMS__0__URL``).

Every problem is one line naming the file (or the environment variable), the key and the issue; an
unknown key is named with the closest known one (``[[upstream]]``: did you mean 'upstreams'?).
`check_environment` (``--check``) also tries what only the machine can tell: the request log's path
and the Redis server.
"""

from __future__ import annotations

import difflib
import os
import re
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import ErrorDetails, PydanticUndefined

from tokometer.client.tls import TlsOptions
from tokometer.inbound.request_limits import DEFAULT_LIMITS
from tokometer.protocols.registry import PROTOCOLS
from tokometer.util.errors import ConfigError
from tokometer.util.httpurl import CONTROL_CHARACTERS, http_url_problem
from tokometer.util.limits import (
    MAX_BUDGET_TOKENS,
    MAX_BYTES,
    MAX_COUNT,
    MAX_PRICE,
    MAX_RESPONSE_BYTES,
    Concurrency,
    Count,
    Delay,
    Millis,
    Seconds,
    Tokens,
)
from tokometer.util.readlimit import read_toml, read_yaml
from tokometer.util.secrets import value_problem

__all__ = [
    "EXAMPLE_CONFIG",
    "MAX_CONFIG_BYTES",
    "BudgetConfig",
    "CacheConfig",
    "GatewayConfig",
    "KeyConfig",
    "LogConfig",
    "ReplicasConfig",
    "RouteConfig",
    "ServerConfig",
    "TracingConfig",
    "UpstreamConfig",
    "check_environment",
    "config_reference",
    "load_config",
    "submodel",
]

ENV_PREFIX = "TOKOMETER_GATEWAY__"
MAX_CONFIG_BYTES: Final = 16 << 20
"""The config file, read whole: 16 MiB, ten thousand times the example, room for some 100,000 ``[[keys]]``
(150 bytes each); more is no config, and is refused before it is parsed (``/dev/zero`` too)."""

EXAMPLE_CONFIG = """
[server]
host = "127.0.0.1"
port = 8100

[[upstreams]]                        # the engines behind the gateway
name = "primary"
url = "http://127.0.0.1:8000/v1"
model = "meta-llama/Llama-3.1-8B-Instruct"   # the name the upstream knows
api_key_env = "PRIMARY_KEY"          # or api_key = "..."
first_token_timeout_s = 10

[[upstreams]]
name = "backup"
url = "http://127.0.0.1:11434"
api = "ollama"                       # any protocol 'tokometer bench --api' speaks
model = "llama3.2:1b"

[[routes]]                           # what clients ask for (their "model")
model = "chat"
upstreams = ["primary", "backup"]    # in order: the first healthy one serves
slow_ttft_ms = 2000                  # "slow" counts as down: fall back
hedge_after = "p95"                  # first token later than that: race the backup

[cache]
ttl_s = 300

[replicas]                           # several gateways as one (--workers N, other hosts)
redis_url = "redis://127.0.0.1:6379/0"   # cache, budgets, breakers shared; in process without it

[[keys]]                             # without keys, no authentication
name = "team-a"
sha256 = "<what 'tokometer gateway --hash-key' prints>"
tokens_per_period = 1000000

[log]
path = "requests.jsonl"
"""
"""A complete config (with a real digest in place of the ``sha256`` placeholder it loads: a test checks it)."""


class _Strict(BaseModel):
    """Unknown keys refused; every number finite and within its declared bound (`tokometer.util.limits`)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class ServerConfig(_Strict):
    """Where the gateway listens, and the limits that keep one client from exhausting it."""

    host: str = Field("127.0.0.1", description="address to listen on (0.0.0.0 or :: for every interface)")
    port: int = Field(8100, ge=0, le=65535, description="port to listen on; 0 picks a free one")
    max_body_bytes: int = Field(DEFAULT_LIMITS.max_body_bytes, ge=1024, le=MAX_BYTES,
                                description="larger request bodies get 413")
    body_timeout_s: Seconds = Field(DEFAULT_LIMITS.body_timeout_s,
                                  description="a request body must arrive whole within this of its head (408)")
    body_idle_timeout_s: Seconds = Field(DEFAULT_LIMITS.body_idle_timeout_s,
                                       description="nor may it pause longer than this between two reads, from the "
                                       "'100 Continue' on (408)")
    max_messages: Count = Field(DEFAULT_LIMITS.max_messages, description="chat requests with more messages get 400")
    max_header_bytes: int = Field(DEFAULT_LIMITS.max_header_bytes, ge=1024, le=MAX_BYTES,
                                  description="larger request heads get 431")
    max_header_fields: int = Field(DEFAULT_LIMITS.max_header_fields, ge=8, le=MAX_COUNT,
                                   description="request heads with more fields get 431")
    header_timeout_s: Seconds = Field(DEFAULT_LIMITS.header_timeout_s,
                                    description="a request head must arrive within this (408)")
    keep_alive_timeout_s: Seconds = Field(15.0, description="idle kept-alive connections are closed after this")
    client_stall_s: Seconds = Field(DEFAULT_LIMITS.client_stall_s,
                                  description="a client that takes nothing of its answer for this long is closed "
                                  "and its upstream request cancelled")
    max_connections: Concurrency = Field(1024, description="open client connections (fewer if file descriptors are "
                                 "short); at the limit one that is not progressing is closed (idle, then a "
                                 "stalled request, then a stalled answer), the new one waits up to 2 s while "
                                 "requests in their first second keep up, else it gets 503")
    counting_threads: int = Field(1, ge=1, le=64, description="large prompts (256 KiB and more) counted at once, "
                                  "off the event loop; smaller ones have two threads of their own")
    health_details: Literal["public", "authenticated", "none"] = Field(
        "authenticated", description="who sees upstream errors and timings in /health (with no [[keys]], "
        "'authenticated' means everyone)")


NOT_RELAYED_APIS = frozenset(name for name, protocol in PROTOCOLS.items() if not protocol.streams)
"""Protocols `bench` speaks that the gateway does not relay: they answer with vectors or scores, not a stream."""

_MAX_NAME = 256
"""Characters a name (an upstream's, a key's, a route's model) may have."""


def _plain_name(value: str) -> str:
    """A name that goes into metrics labels, logs, headers and request lines: 1 to 256 characters, no
    control characters (a NUL or a newline in a name would cut or forge a line wherever it is written)."""
    if not value or len(value) > _MAX_NAME:
        raise ValueError(f"must have 1 to {_MAX_NAME} characters")
    if (bad := CONTROL_CHARACTERS.search(value)) is not None:
        raise ValueError(f"holds a control character (U+{ord(bad.group()):04X} at position {bad.start()}): "
                         "names are plain text")
    return value


class UpstreamConfig(_Strict):
    """One engine behind the gateway."""

    name: str = Field(description="what routes call it")
    url: str = Field(description="base URL, http:// or https:// (an OpenAI-compatible server's ends in /v1)")
    api: str = Field("openai-chat", description="protocol it speaks: "
                     f"{', '.join(sorted(set(PROTOCOLS) - NOT_RELAYED_APIS))}")
    model: str = Field("", description="model name sent upstream (default: the one the client asked for)")
    api_key: str | None = Field(None, description="bearer token for the upstream (better: api_key_env)")
    api_key_env: str | None = Field(None, description="environment variable holding the upstream's key")
    connect_timeout_s: Seconds = Field(5.0, description="limit for opening a connection")
    first_token_timeout_s: Seconds = Field(30.0, description="limit for the first token from the request's send, "
                                         "the response head's wait included (then retry or fall back)")
    idle_timeout_s: Seconds = Field(30.0, description="limit for silence inside a stream")
    total_timeout_s: Seconds = Field(600.0, description="limit for a whole request")
    max_response_bytes: int = Field(0, ge=0, le=MAX_RESPONSE_BYTES, description="read budget of one answer, everything "
                                    "counted (head, framing, comments, events); 0: 16 MiB + 8 KiB per max_tokens")
    retries: int = Field(1, ge=0, le=10, description="retries on this upstream, only before anything reached the "
                         "client")
    retry_backoff_s: Delay = Field(0.2, description="wait before the first retry (doubled for each next one)")
    max_concurrency: Concurrency | None = Field(None, description="requests in flight to it at most; more wait "
                                        "(default: no limit)")
    breaker_failures: Count = Field(5, description="consecutive failures that open the circuit")
    breaker_cooldown_s: Seconds = Field(30.0, description="an open circuit waits this long, then lets one "
                                      "trial through")
    price_input_per_m: float | None = Field(None, ge=0, le=MAX_PRICE,
                                            description="USD per million input tokens")
    price_output_per_m: float | None = Field(None, ge=0, le=MAX_PRICE,
                                             description="USD per million output tokens")
    ca_bundle: str | None = Field(None, description="PEM file of CAs to trust for an https:// upstream")
    verify: bool = Field(True, description="check an https:// upstream's certificate (false: test servers only)")
    metrics_url: str | None = Field(None, description="its engine's Prometheus /metrics, read by a route's "
                                    "least-load routing (default: /metrics at the url's origin; 'off': never read)")

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        if problem := http_url_problem(value):
            raise ValueError(problem)
        return value.rstrip("/")

    @field_validator("metrics_url")
    @classmethod
    def _metrics_url(cls, value: str | None) -> str | None:
        if value is None or value == "off":
            return value
        return cls._url(value)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return _plain_name(value)

    @field_validator("model")
    @classmethod
    def _model(cls, value: str) -> str:
        return _plain_name(value) if value else value

    @field_validator("api")
    @classmethod
    def _api(cls, value: str) -> str:
        usable = sorted(set(PROTOCOLS) - NOT_RELAYED_APIS)
        if value in NOT_RELAYED_APIS:
            raise ValueError(f"the gateway does not relay {value!r} (embeddings and rerank answers are vectors and "
                             f"scores, not a stream): use one of {', '.join(usable)}")
        if value not in PROTOCOLS:
            raise ValueError(f"unknown API {value!r}: use one of {', '.join(usable)}")
        return value

    @field_validator("api_key")
    @classmethod
    def _ascii_key(cls, value: str | None) -> str | None:
        if value is not None and _key_problem(value):
            raise ValueError(_key_problem(value))
        return value

    def tls(self) -> TlsOptions:
        """How to check this upstream's certificate (only used for https:// URLs)."""
        return TlsOptions(verify=self.verify, ca_bundle=self.ca_bundle)

    def key(self) -> str | None:
        if self.api_key is not None:
            return self.api_key
        if self.api_key_env:
            value = os.environ.get(self.api_key_env)
            if value is not None and (problem := _key_problem(value)):
                raise ConfigError(f"upstream {self.name!r}: ${self.api_key_env}: {problem}")
            return value
        return None


def _key_problem(value: str) -> str | None:
    """Why an upstream key cannot go in an Authorization header as it is, or None."""
    problem = value_problem(value)
    return None if problem is None else f"the API key: {problem}"


class RouteConfig(_Strict):
    """A model name clients ask for, and the upstreams that serve it, in order of preference."""

    model: str = Field(description="the model name clients ask for")
    upstreams: list[str] = Field(min_length=1, description="upstream names in order of preference: the first "
                                 "healthy one that is not slow serves")
    slow_ttft_ms: Millis | None = Field(None, gt=0, description="recent TTFT p50 above this counts as slow")
    slow_tpot_ms: Millis | None = Field(None, gt=0, description="recent TPOT p50 above this counts as slow")
    slow_window: Count = Field(10, description="requests the recent TTFT/TPOT are taken over")
    probe_interval_s: Seconds = Field(2.0, description="how often a slow or down upstream is probed")
    tokenizer: str | None = Field(None, description="for budgets: anything 'tokometer count --tokenizer' takes")
    context: Tokens | None = Field(None, description="the model's context window, in tokens")
    max_input_tokens: Tokens | None = Field(None, description="longer prompts are refused or truncated "
                                         "(over_limit)")
    over_limit: Literal["reject", "truncate"] = Field("reject", description="'reject' (HTTP 400) or 'truncate' "
                                                      "(the middle of the longest message)")
    continue_on_length: bool = Field(False, description="an answer the upstream cuts short of the client's "
                                     "max_tokens is continued, in segments streamed as one answer")
    max_segments: int = Field(4, ge=1, le=64, description="segments one continued answer may take")
    hedge_after: str | None = Field(None, description="no first token from the primary by then: send the same "
                                    "request to the next upstream, the first to answer wins: a percentile of the "
                                    "primary's recent TTFTs ('p95', needs 5 of them) or a time ('300ms', '1.5s')")
    hedge_min_ms: Millis = Field(50.0, description="a percentile hedge_after is never shorter than this")
    hedge_budget: float = Field(0.1, gt=0, le=1, description="races at once at most this share of the requests in "
                                "flight to the route's upstreams (at least one)")
    resume_midstream: bool | None = Field(None, description="an upstream that fails mid-answer: the next one "
                                          "continues the answer in the same stream (default: on with 2+ upstreams)")
    max_resumes: int = Field(2, ge=1, le=16, description="resumes one answer may take before the stream ends with "
                             "an error event")
    routing: Literal["ordered", "round-robin", "least-outstanding", "least-load", "prefix-affinity"] = Field(
        "ordered", description="which upstream a request tries first: 'ordered' (the list's order, the next on "
        "failure), 'round-robin', 'least-outstanding' (fewest requests in flight from this gateway), 'least-load' "
        "(fewest requests the engine holds, read from its /metrics: waiting + running, KV-cache use next) or "
        "'prefix-affinity' (a prompt prefix sticks to one upstream while it is not overloaded); the others "
        "follow, in order, as fallbacks")
    scrape_interval_s: float = Field(0.5, ge=0.05, le=60, description="least-load: how often each upstream's "
                                     "/metrics is read")
    affinity_prefix_chars: int = Field(512, ge=16, le=65536, description="prefix-affinity: how much of the "
                                       "prompt's start (characters) picks its upstream")
    affinity_slack: int = Field(4, ge=0, le=10_000, description="prefix-affinity: its upstream keeps a prefix "
                                "while it has at most this many more requests in flight than the least busy one")
    requests_per_minute: int | None = Field(None, ge=1, le=MAX_BUDGET_TOKENS, description="requests the route "
                                            "takes in any 60 s, from every key together (429 past it; default: no "
                                            "limit)")
    tokens_per_minute: int | None = Field(None, ge=1, le=MAX_BUDGET_TOKENS, description="prompt + answer tokens "
                                          "the route serves in any 60 s (a request is refused once they are used "
                                          "up; default: no limit)")

    @field_validator("model")
    @classmethod
    def _model(cls, value: str) -> str:
        return _plain_name(value)

    @field_validator("upstreams")
    @classmethod
    def _upstream_names(cls, value: list[str]) -> list[str]:
        return [_plain_name(name) for name in value]

    @field_validator("hedge_after")
    @classmethod
    def _hedge_after(cls, value: str | None) -> str | None:
        if value is not None:
            from tokometer.gateway.hedge import HedgeAfter

            HedgeAfter.parse(value)
        return value


class CacheConfig(_Strict):
    """The answer cache: deterministic requests (temperature 0 or a seed) get the stored answer."""

    enabled: bool = Field(True, description="false: no cache")
    ttl_s: Seconds = Field(300.0, description="how long an answer is kept")
    max_entries: Count = Field(10_000, description="answers kept in process (least recently used go first)")
    redis_url: str | None = Field(None, description="the older name of [replicas] redis_url (either works)")
    redis_timeout_s: Seconds = Field(0.05, description="the older name of [replicas] redis_timeout_s")

    @field_validator("redis_url")
    @classmethod
    def _redis_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from redis.connection import parse_url

        try:
            parse_url(value)  # type: ignore[no-untyped-call]
        except ValueError as exc:
            raise ValueError(f"not a usable Redis URL ({exc}); write e.g. redis://127.0.0.1:6379/0") from None
        path = urlsplit(value).path if value.startswith(("redis://", "rediss://")) else ""
        if path.strip("/") and not path.strip("/").isdigit():
            raise ValueError(f"the database in a Redis URL is a number (redis://HOST:PORT/0), not {path!r}")
        return value


class KeyConfig(_Strict):
    """An API key: its name, the sha256 of its secret, and its token budget."""

    name: str = Field(description="shown in metrics, logs and budget errors (never the secret)")
    sha256: str = Field(description="sha256 of the key's secret, 64 hex digits: 'tokometer gateway --hash-key' "
                        "prints it")
    tokens_per_period: int | None = Field(None, ge=1, le=MAX_BUDGET_TOKENS,
                                          description="token budget per [budgets] period (default: none)")
    requests_per_minute: int | None = Field(None, ge=1, le=MAX_BUDGET_TOKENS, description="requests the key may "
                                            "send in any 60 s (429 past it; default: no limit)")
    tokens_per_minute: int | None = Field(None, ge=1, le=MAX_BUDGET_TOKENS, description="prompt + answer tokens "
                                          "the key may use in any 60 s (default: no limit)")

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return _plain_name(value)

    @field_validator("sha256")
    @classmethod
    def _digest(cls, value: str) -> str:
        digest = value.strip().lower()
        if not re.fullmatch(r"[0-9a-f]{64}", digest):  # the value is not echoed: it may be the secret itself
            raise ValueError("not a sha256 digest (64 hex digits). Put the digest here, never the secret: run "
                             "'tokometer gateway --hash-key', type the secret, and paste what it prints")
        return digest


class BudgetConfig(_Strict):
    """Per-key token budgets ([[keys]] tokens_per_period)."""

    period: Literal["minute", "hour", "day", "month"] = Field("day", description="calendar period a budget "
                                                              "covers: minute, hour, day or month (UTC)")


class LogConfig(_Strict):
    """The request log."""

    path: Path | None = Field(None, description="JSONL file, one line per request (missing directories are "
                              "created); default: no log")


class TracingConfig(_Strict):
    """OpenTelemetry traces of every request, exported over OTLP (`tokometer.gateway.tracing`; the otel extra)."""

    endpoint: str | None = Field(None, description="the OTLP receiver (an OpenTelemetry Collector): "
                                 "http://HOST:4318 for http/protobuf (/v1/traces is added to a URL without a path), "
                                 "http://HOST:4317 for grpc; default: no tracing")
    protocol: Literal["http/protobuf", "grpc"] = Field("http/protobuf", description="OTLP's transport")
    service_name: str = Field("tokometer-gateway", description="the traces' service.name")
    sample_ratio: float = Field(1.0, ge=0, le=1, description="share of requests traced; a request whose "
                                "traceparent says sampled (or not) is traced (or not) as it says")
    headers: dict[str, str] = Field(default_factory=dict, description="sent with every export (a tracing "
                                    "service's API key, say)")
    timeout_s: Seconds = Field(10.0, description="limit for one export (spans leave in batches, off the "
                               "request path)")

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, value: str | None) -> str | None:
        if value is not None and (urlsplit(value).scheme not in ("http", "https") or not urlsplit(value).hostname):
            raise ValueError(f"{value!r} is not an http:// or https:// URL (e.g. http://127.0.0.1:4318)")
        return value


class ReplicasConfig(_Strict):
    """Several gateway processes as one: worker processes on this host, and the Redis every replica shares."""

    workers: int = Field(1, ge=1, le=256, description="gateway processes serving this host's port (--workers); "
                         "more hosts: point their replicas at the same redis_url")
    redis_url: str | None = Field(None, description="redis://HOST:PORT/DB (or rediss://, unix://) shared by every "
                                  "replica: answer cache, token budgets, circuit breakers, slow windows "
                                  "(cache.redis_url is its older name); in process without it")
    redis_timeout_s: Seconds = Field(0.05, description="a slower Redis counts as down (each replica then goes "
                                   "on with its own state)")
    share_health: bool = Field(True, description="share circuit breakers and slow windows through redis_url")
    share_outstanding: bool = Field(True, description="share each replica's requests in flight per upstream "
                                    "through redis_url, for least-outstanding and prefix-affinity routes")
    sync_s: float = Field(0.25, ge=0.01, le=60, description="how often a replica exchanges breaker state and latency "
                          "samples with Redis (off the request path); a breaker that opens is pushed at once")

    @field_validator("redis_url")
    @classmethod
    def _redis_url(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                CacheConfig(redis_url=value)
            except ValidationError as exc:
                raise ValueError(str(exc.errors()[0]["msg"]).removeprefix("Value error, ")) from None
        return value


class GatewayConfig(_Strict):
    """The whole gateway configuration."""

    server: ServerConfig = ServerConfig()
    upstreams: list[UpstreamConfig] = Field(min_length=1, description="one or more")
    routes: list[RouteConfig] = Field(min_length=1, description="one or more")
    cache: CacheConfig = CacheConfig()
    keys: list[KeyConfig] = Field(default_factory=list, description="none: no authentication")
    budgets: BudgetConfig = BudgetConfig()
    log: LogConfig = LogConfig()
    tracing: TracingConfig = TracingConfig()
    replicas: ReplicasConfig = ReplicasConfig()

    @model_validator(mode="after")
    def _one_redis(self) -> GatewayConfig:
        """``replicas.redis_url`` and its older name ``cache.redis_url`` (with their timeouts) are one setting."""
        cache, replicas = self.cache, self.replicas
        if cache.redis_url and replicas.redis_url and cache.redis_url != replicas.redis_url:
            raise ValueError("cache.redis_url and replicas.redis_url differ: set replicas.redis_url only (one Redis "
                             "holds the cache, budgets and breakers; cache.redis_url is its older name)")
        cache.redis_url = replicas.redis_url = cache.redis_url or replicas.redis_url
        if "redis_timeout_s" in cache.model_fields_set and "redis_timeout_s" not in replicas.model_fields_set:
            replicas.redis_timeout_s = cache.redis_timeout_s
        cache.redis_timeout_s = replicas.redis_timeout_s
        return self

    @model_validator(mode="after")
    def _references(self) -> GatewayConfig:
        names = [u.name for u in self.upstreams]
        if len(set(names)) != len(names):
            raise ValueError(f"upstreams: names must be unique (got {names})")
        models = [r.model for r in self.routes]
        if len(set(models)) != len(models):
            raise ValueError(f"routes: models must be unique (got {models})")
        for i, route in enumerate(self.routes):
            for name in route.upstreams:
                if name not in names:
                    raise ValueError(f"routes[{i}].upstreams: no upstream named {name!r} (have {', '.join(names)})")
        key_names = [k.name for k in self.keys]
        if len(set(key_names)) != len(key_names):
            raise ValueError("keys: names must be unique")
        return self

    def upstream(self, name: str) -> UpstreamConfig:
        return next(u for u in self.upstreams if u.name == name)

    def route(self, model: str) -> RouteConfig | None:
        return next((r for r in self.routes if r.model == model), None)


def _set_path(data: dict[str, Any], path: list[str], value: str) -> tuple[str | int, ...]:
    """Set ``value`` at ``path`` (keys folded to lower case, list indices); the location it went to."""
    node: Any = data
    loc: list[str | int] = []
    for i, part in enumerate(path):
        last = i == len(path) - 1
        if isinstance(node, list):
            index = int(part)
            loc.append(index)
            if last:
                node[index] = value
            else:
                node = node[index]
            continue
        key = part.lower()
        loc.append(key)
        if last:
            node[key] = value
        else:
            node = node.setdefault(key, {})
    return tuple(loc)


def _env_overrides(data: dict[str, Any], environ: dict[str, str]) -> dict[tuple[str | int, ...], str]:
    """Apply every ``TOKOMETER_GATEWAY__...`` variable; which location each one set (to blame it, not the file)."""
    applied: dict[tuple[str | int, ...], str] = {}
    for name, value in sorted(environ.items()):
        if name.startswith(ENV_PREFIX):
            path = name[len(ENV_PREFIX):].split("__")
            try:
                applied[_set_path(data, path, value)] = name
            except (IndexError, ValueError, TypeError, AttributeError):
                raise ConfigError(f"{name}: no such setting to override") from None
    return applied


def _read(path: Path) -> dict[str, Any]:
    """The config file's settings, TOML or (``.yaml``, ``.yml``) YAML, read by `tokometer.util.readlimit`: at most
    `MAX_CONFIG_BYTES` (``/dev/zero`` is one error, a FIFO nobody writes to an empty file, a pipe whose writer does
    not close it an error at its deadline), UTF-8, nesting past the parser's depth one error, YAML without aliases."""
    beyond = "a gateway config is a few tables of settings"
    if path.suffix.lower() in (".yaml", ".yml"):
        data = read_yaml(path, MAX_CONFIG_BYTES, beyond, str(path))
    else:
        data = read_toml(path, MAX_CONFIG_BYTES, beyond, str(path))
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a table of settings")
    return data


def submodel(annotation: Any) -> type[BaseModel] | None:
    """The config model inside a field's type (``ServerConfig``, ``list[UpstreamConfig]``, ...), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = submodel(arg)
        if found is not None:
            return found
    return None


def _model_at(loc: tuple[str | int, ...]) -> type[BaseModel] | None:
    model: type[BaseModel] | None = GatewayConfig
    for part in loc:
        if isinstance(part, int) or model is None:
            continue  # a list index: the same model
        field = model.model_fields.get(str(part))
        model = submodel(field.annotation) if field is not None else None
    return model


def _describe(error: ErrorDetails) -> tuple[tuple[str | int, ...], str]:
    """Where an error is (the key's parent for an unknown key) and what it says, in words."""
    loc = tuple(error["loc"])
    if error["type"] != "extra_forbidden":
        return loc, str(error["msg"]).removeprefix("Value error, ")
    key = str(loc[-1])
    model = _model_at(loc[:-1])
    known = list(model.model_fields) if model is not None else []
    close = difflib.get_close_matches(key, known, n=1)
    hint = f"did you mean {close[0]!r}?" if close else f"known keys: {', '.join(known)}"
    return loc[:-1], f"unknown key {key!r} ({hint})"


def load_config(path: Path, environ: dict[str, str] | None = None) -> GatewayConfig:
    """Read, override from the environment, validate. Every problem is one line naming file (or variable), key
    and issue."""
    data = _read(path)
    overrides = _env_overrides(data, dict(os.environ if environ is None else environ))
    try:
        return GatewayConfig.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        # an unknown key first: a misspelt one also makes the real one "required", which would hide the typo
        error = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
        where, message = _describe(error)
        shown = ".".join(str(p) for p in where)
        variable = next((name for loc, name in overrides.items() if tuple(error["loc"])[:len(loc)] == loc), None)
        if variable is not None:
            raise ConfigError(f"{variable} (overriding {'.'.join(str(p) for p in error['loc'])} of {path}): "
                              f"{message}") from None
        raise ConfigError(f"{path}: {shown + ': ' if shown else ''}{message}") from None


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, Path)):
        return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'
    return str(value)


def config_reference() -> Iterator[tuple[str, str, list[tuple[str, str]]]]:
    """Every section of the config: its heading (``[server]``, ``[[upstreams]]``), what it is, and a row per key
    (``key = default``, description), all read from the models."""
    for name, field in GatewayConfig.model_fields.items():
        model = submodel(field.annotation)
        if model is None:
            continue
        listed = typing.get_origin(field.annotation) is list
        about = (model.__doc__ or "").strip().split("\n")[0]
        if field.description:
            about = f"{about.rstrip('.')} ({field.description})."
        rows = []
        for key, spec in model.model_fields.items():
            if spec.is_required():
                left = f"{key} (required)"
            elif spec.default is None or spec.default is PydanticUndefined:
                left = key
            else:
                left = f"{key} = {_toml(spec.default)}"
            rows.append((left, spec.description or ""))
        yield (f"[[{name}]]" if listed else f"[{name}]"), about, rows


def _redis_warning(url: str, path: Path) -> str | None:
    """Ask the Redis at ``url`` for a PING (1 s at most): None if it answers, a warning if nothing does; refused
    credentials are an error (they will not start working by themselves)."""
    import redis

    from tokometer.gateway.redislink import redacted_url

    shown = redacted_url(url)
    client = redis.Redis.from_url(url, socket_timeout=1.0, socket_connect_timeout=1.0)
    try:
        client.ping()
    except redis.exceptions.AuthenticationError as exc:
        raise ConfigError(f"{path}: cache.redis_url: the Redis at {shown} refused the credentials ({exc}): fix the "
                          "user and password in the URL") from None
    except (redis.exceptions.RedisError, OSError) as exc:
        return (f"cache.redis_url: no Redis answers at {shown} ({' '.join(str(exc).split()) or type(exc).__name__}); "
                "the gateway starts anyway, without the answer cache and with token budgets counted in its own "
                "memory, until Redis answers")
    finally:
        client.close()
    return None


def check_environment(config: GatewayConfig, path: Path) -> list[str]:
    """What only this machine can tell (``gateway --check``): a request log that cannot be written is an error;
    a Redis that does not answer now is a warning (the gateway runs on without it). Returns the warnings."""
    from tokometer.util.paths import writable_file_problem

    if config.log.path is not None:
        problem = writable_file_problem(config.log.path, "requests.jsonl")
        if problem:
            raise ConfigError(f"{path}: log.path: {problem}")
    warnings = []
    if config.cache.redis_url:
        warning = _redis_warning(config.cache.redis_url, path)
        if warning:
            warnings.append(warning)
    return warnings
