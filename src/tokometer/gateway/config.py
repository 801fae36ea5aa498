"""`GatewayConfig`: the gateway's TOML/YAML file, validated, with ``TOKOMETER_GATEWAY__...`` overrides.

    [server]
    host = "127.0.0.1"
    port = 8100

    [[upstreams]]                      # engines the gateway talks to
    name = "primary"
    url = "http://127.0.0.1:8000/v1"
    api = "openai-chat"                # any protocol tokometer bench speaks
    model = "llama-3.1-8b"             # the model name the upstream knows
    api_key_env = "PRIMARY_KEY"        # or api_key = "..."
    first_token_timeout_s = 10

    [[routes]]                         # what clients ask for (their "model")
    model = "chat"
    upstreams = ["primary", "backup"]  # in order: the first healthy one serves
    slow_ttft_ms = 2000                # "slow" counts as down: fall back
    max_input_tokens = 4000
    over_limit = "reject"              # or "truncate"

    [cache]
    ttl_s = 300
    redis_url = "redis://127.0.0.1:6379/0"   # shared by replicas; in-process without it

    [[keys]]                           # without keys, no authentication
    name = "team-a"
    sha256 = "..."                     # tokometer gateway --hash-key SECRET prints it
    tokens_per_period = 1000000

Environment variables override any value: ``TOKOMETER_GATEWAY__SERVER__PORT=9000``,
``TOKOMETER_GATEWAY__CACHE__REDIS_URL=...`` (lists by index: ``..__UPSTREAMS__0__URL``).
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from tokometer.backends import BACKENDS
from tokometer.backends.tls import TlsOptions
from tokometer.errors import ConfigError

__all__ = [
    "BudgetConfig",
    "CacheConfig",
    "GatewayConfig",
    "KeyConfig",
    "LogConfig",
    "RouteConfig",
    "ServerConfig",
    "UpstreamConfig",
    "load_config",
]

ENV_PREFIX = "TOKOMETER_GATEWAY__"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ServerConfig(_Strict):
    """Where the gateway listens, and the limits that keep one client from exhausting it."""

    host: str = "127.0.0.1"
    port: int = Field(8100, ge=0, le=65535)
    max_body_bytes: int = Field(4 * 1024 * 1024, ge=1024, description="larger request bodies get 413")
    max_messages: int = Field(2048, ge=1, description="chat requests with more messages get 400")
    max_header_bytes: int = Field(32 * 1024, ge=1024, description="larger request heads get 431")
    max_header_fields: int = Field(100, ge=8, description="request heads with more fields get 431")
    header_timeout_s: float = Field(10.0, gt=0, description="a request head must arrive within this (408)")
    keep_alive_timeout_s: float = Field(15.0, gt=0, description="idle kept-alive connections are closed after this")
    max_connections: int = Field(1024, ge=1, description="open client connections (fewer if file descriptors are "
                                 "short); at the limit the idlest is closed, or the new one gets 503")
    counting_threads: int = Field(1, ge=1, le=64, description="large prompts (256 KiB and more) counted at once, "
                                  "off the event loop; smaller ones have two threads of their own")
    health_details: Literal["public", "authenticated", "none"] = Field(
        "authenticated", description="who sees upstream errors and timings in /health (with no [[keys]], "
        "'authenticated' means everyone)")


class UpstreamConfig(_Strict):
    """One engine behind the gateway."""

    name: str
    url: str
    api: str = "openai-chat"
    model: str = ""
    api_key: str | None = None
    api_key_env: str | None = None
    connect_timeout_s: float = Field(5.0, gt=0)
    first_token_timeout_s: float = Field(30.0, gt=0)
    idle_timeout_s: float = Field(30.0, gt=0)
    total_timeout_s: float = Field(600.0, gt=0)
    retries: int = Field(1, ge=0, le=10)
    retry_backoff_s: float = Field(0.2, ge=0)
    max_concurrency: int | None = Field(None, ge=1)
    breaker_failures: int = Field(5, ge=1, description="consecutive failures that open the circuit")
    breaker_cooldown_s: float = Field(30.0, gt=0)
    price_input_per_m: float | None = Field(None, ge=0, description="USD per million input tokens")
    price_output_per_m: float | None = Field(None, ge=0)
    ca_bundle: str | None = Field(None, description="PEM file of CAs to trust for an https:// upstream")
    verify: bool = Field(True, description="check an https:// upstream's certificate (false: test servers only)")

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value.rstrip("/")

    @field_validator("api")
    @classmethod
    def _api(cls, value: str) -> str:
        if value not in BACKENDS:
            raise ValueError(f"unknown API {value!r}: use one of {', '.join(sorted(BACKENDS))}")
        return value

    def tls(self) -> TlsOptions:
        """How to check this upstream's certificate (only used for https:// URLs)."""
        return TlsOptions(verify=self.verify, ca_bundle=self.ca_bundle)

    def key(self) -> str | None:
        if self.api_key is not None:
            return self.api_key
        if self.api_key_env:
            return os.environ.get(self.api_key_env)
        return None


class RouteConfig(_Strict):
    """A model name clients ask for, and the upstreams that serve it, in order of preference."""

    model: str
    upstreams: list[str] = Field(min_length=1)
    slow_ttft_ms: float | None = Field(None, gt=0, description="recent TTFT p50 above this counts as slow")
    slow_tpot_ms: float | None = Field(None, gt=0, description="recent TPOT p50 above this counts as slow")
    slow_window: int = Field(10, ge=1, description="requests the recent TTFT/TPOT are taken over")
    probe_interval_s: float = Field(2.0, gt=0, description="how often a slow or down upstream is probed")
    tokenizer: str | None = Field(None, description="for budgets: anything 'tokometer count --tokenizer' takes")
    context: int | None = Field(None, ge=1, description="the model's context window, in tokens")
    max_input_tokens: int | None = Field(None, ge=1)
    over_limit: Literal["reject", "truncate"] = "reject"
    continue_on_length: bool = False
    max_segments: int = Field(4, ge=1, le=64)


class CacheConfig(_Strict):
    enabled: bool = True
    ttl_s: float = Field(300.0, gt=0)
    max_entries: int = Field(10_000, ge=1)
    redis_url: str | None = None
    redis_timeout_s: float = Field(0.05, gt=0, description="a slower Redis counts as down for this request")


class KeyConfig(_Strict):
    """An API key: its name, the sha256 of its secret, and its token budget."""

    name: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    tokens_per_period: int | None = Field(None, ge=1)


class BudgetConfig(_Strict):
    period: Literal["minute", "hour", "day", "month"] = "day"


class LogConfig(_Strict):
    path: Path | None = None


class GatewayConfig(_Strict):
    """The whole gateway configuration."""

    server: ServerConfig = ServerConfig()
    upstreams: list[UpstreamConfig] = Field(min_length=1)
    routes: list[RouteConfig] = Field(min_length=1)
    cache: CacheConfig = CacheConfig()
    keys: list[KeyConfig] = Field(default_factory=list)
    budgets: BudgetConfig = BudgetConfig()
    log: LogConfig = LogConfig()

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


def _set_path(data: dict[str, Any], path: list[str], value: str) -> None:
    node: Any = data
    for i, part in enumerate(path):
        last = i == len(path) - 1
        if isinstance(node, list):
            index = int(part)
            if last:
                node[index] = value
            else:
                node = node[index]
            continue
        key = part.lower()
        if last:
            node[key] = value
        else:
            node = node.setdefault(key, {})


def _env_overrides(data: dict[str, Any], environ: dict[str, str]) -> None:
    for name, value in environ.items():
        if name.startswith(ENV_PREFIX):
            path = name[len(ENV_PREFIX):].split("__")
            try:
                _set_path(data, path, value)
            except (IndexError, ValueError, TypeError, AttributeError):
                raise ConfigError(f"{name}: no such setting to override") from None


def _read(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read gateway config {path}: {exc.strerror or exc}") from None
    try:
        if path.suffix.lower() in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(raw)
        else:
            data = tomllib.loads(raw.decode("utf-8"))
    except Exception as exc:  # tomllib/yaml/unicode errors: all mean "not a valid file"
        raise ConfigError(f"{path}: not valid {'YAML' if path.suffix in ('.yaml', '.yml') else 'TOML'}: {exc}") \
            from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a table of settings")
    return data


def load_config(path: Path, environ: dict[str, str] | None = None) -> GatewayConfig:
    """Read, override from the environment, validate. Every problem is one line naming file, key and issue."""
    data = _read(path)
    _env_overrides(data, dict(os.environ if environ is None else environ))
    try:
        return GatewayConfig.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"])
        message = str(error["msg"]).removeprefix("Value error, ")
        raise ConfigError(f"{path}: {where + ': ' if where else ''}{message}") from None
