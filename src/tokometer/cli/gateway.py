"""``tokometer gateway``: the OpenAI-compatible gateway, from a config file."""

from __future__ import annotations

import contextlib
from pathlib import Path

import click

__all__ = ["command"]


@click.command("gateway")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=None,
              help="The gateway's TOML or YAML file (see README).")
@click.option("--host", default=None, help="Override [server] host.")
@click.option("--port", type=int, default=None, help="Override [server] port (0 picks a free one).")
@click.option("--hash-key", default=None, metavar="SECRET", help="Print the sha256 to put in [[keys]] and exit.")
@click.option("--check", is_flag=True, help="Validate the config (and load route tokenizers), then exit.")
@click.option("--log-level", default="warning", show_default=True)
def command(config_path: Path | None, host: str | None, port: int | None, hash_key: str | None, check: bool,
            log_level: str) -> None:
    """Serve /v1/chat/completions and /v1/completions in front of any engines: timeouts, retries,
    circuit breakers, fallback when the primary is down or slow, an answer cache, token budgets,
    API keys, /metrics."""
    from tokometer.errors import ConfigError

    if hash_key is not None:
        from tokometer.gateway.auth import hash_key as digest

        click.echo(digest(hash_key))
        return
    if config_path is None:
        raise ConfigError("give --config FILE (a TOML or YAML gateway config; see the README)")
    from tokometer.gateway.config import load_config

    config = load_config(config_path)
    if host is not None:
        config.server.host = host
    if port is not None:
        config.server.port = port
    for upstream in config.upstreams:
        if upstream.url.startswith("https://"):
            tls = upstream.tls()
            tls.context()  # a CA bundle that cannot be read is a ConfigError now, not at the first request
            if tls.warning:
                click.echo(f"tokometer gateway: warning: upstream {upstream.name}: {tls.warning}", err=True)
    if check:
        from tokometer.gateway.prompt import PromptLimiter

        for route in config.routes:
            PromptLimiter(route)
        click.echo(f"{config_path}: {len(config.upstreams)} upstream(s), {len(config.routes)} route(s): OK")
        return
    from tokometer.sim.server import bind_socket

    try:
        sock = bind_socket(config.server.host, config.server.port)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {config.server.host}:{config.server.port}: {exc.strerror or exc}; "
                          "pick another port") from None
    from tokometer.gateway.server import serve

    with contextlib.suppress(KeyboardInterrupt):
        serve(config, sock, log_level=log_level)
