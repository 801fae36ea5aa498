"""``tokometer gateway``: the OpenAI-compatible gateway, from a config file."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

import click

from tokometer.cli.options import LOG_LEVELS, PORT
from tokometer.cli.say import say

if TYPE_CHECKING:
    from tokometer.gateway.config import GatewayConfig

__all__ = ["command"]


class _GatewayCommand(click.Command):
    """The help ends with an example config and the reference of every key, made from the config models."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        from tokometer.gateway.config import EXAMPLE_CONFIG, config_reference

        with formatter.section("Example config (TOML; YAML works too)"):
            formatter.write("".join((" " * formatter.current_indent + line).rstrip() + "\n" for line in
                                    EXAMPLE_CONFIG.strip("\n").splitlines()))
        for title, about, rows in config_reference():
            with formatter.section(title):
                formatter.write_text(about)
                formatter.write_dl(rows, col_max=36)
        formatter.write_paragraph()
        formatter.write_text("Any key can be overridden from the environment: TOKOMETER_GATEWAY__SECTION__KEY=value, "
                             "lists by index (TOKOMETER_GATEWAY__UPSTREAMS__0__URL=...).")


def _write_dashboard(target: Path) -> None:
    """``--dashboard FILE``: the shipped Grafana dashboard (``tokometer/gateway/dashboard.json``) written out."""
    from importlib.resources import files

    text = files("tokometer.gateway").joinpath("dashboard.json").read_text(encoding="utf-8")
    if str(target) == "-":
        click.echo(text, nl=False)
        return
    from tokometer.util.atomicfile import write_atomic

    write_atomic(target, text)  # a failure is one line naming the file; a previous file stays intact
    say(f"tokometer gateway: wrote the Grafana dashboard to {target}", err=True)


@click.command("gateway", cls=_GatewayCommand)
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=None,
              help="The gateway's TOML or YAML file (example and reference below).")
@click.option("--host", default=None, help="Address to listen on, overriding [server] host.")
@click.option("--port", type=PORT, default=None, help="Port to listen on, overriding [server] port (0 picks a free "
              "one).")
@click.option("--hash-key", "hash_key", is_flag=False, flag_value="-", default=None,
              help="Read an API key's secret (a hidden prompt on a terminal, else one line of stdin), print the "
              "sha256 to put in [[keys]] and exit. Never on the command line: ps and shell history keep it.")
@click.option("--check", is_flag=True, help="Validate the config, load route tokenizers, check that the request "
              "log can be written and that Redis answers, then exit.")
@click.option("--workers", type=click.IntRange(1, 256), default=None, help="Gateway processes serving the port, "
              "overriding [replicas] workers; they share state through [replicas] redis_url.")
@click.option("--log-level", type=click.Choice(LOG_LEVELS, case_sensitive=False), default="warning",
              show_default=True, help="Log verbosity (uvicorn's levels).")
@click.option("--dashboard", "dashboard", type=click.Path(dir_okay=False, path_type=Path), default=None,
              metavar="FILE", help="Write the Grafana dashboard of the gateway's /metrics (shipped in the package) to "
              "FILE ('-': standard output) and exit; import it in Grafana with a Prometheus data source.")
def command(config_path: Path | None, host: str | None, port: int | None, hash_key: str | None, check: bool,
            workers: int | None, log_level: str, dashboard: Path | None) -> None:
    """Serve /v1/chat/completions and /v1/completions in front of any engines: timeouts, retries,
    circuit breakers, fallback when the primary is down or slow, an answer cache, token budgets,
    API keys, /metrics."""
    from tokometer.util.errors import ConfigError

    if dashboard is not None:
        _write_dashboard(dashboard)
        return
    if hash_key is not None:
        from tokometer.gateway.auth import hash_key as digest

        click.echo(digest(_read_secret(hash_key)))
        return
    if config_path is None:
        raise ConfigError("give --config FILE (a TOML or YAML gateway config; see 'tokometer gateway --help' or "
                          "docs/reference/gateway-config.md)")
    from tokometer.gateway.config import load_config

    config = load_config(config_path)
    _override(config, host, port, workers)
    _check_tls(config)
    from tokometer.gateway.tracing import check_sdk

    check_sdk(config.tracing)
    if check:
        _check(config, config_path)
        return
    _serve(config, log_level)


def _override(config: GatewayConfig, host: str | None, port: int | None, workers: int | None) -> None:
    """The command line's --host, --port and --workers over the config's."""
    if host is not None:
        config.server.host = host
    if port is not None:
        config.server.port = port
    if workers is not None:
        config.replicas.workers = workers


def _check_tls(config: GatewayConfig) -> None:
    """Each HTTPS upstream's TLS settings, checked before serving; their warnings printed."""
    for upstream in config.upstreams:
        if upstream.url.startswith("https://"):
            tls = upstream.tls()
            tls.context()  # a CA bundle that cannot be read is a ConfigError now, not at the first request
            if tls.warning:
                say(f"tokometer gateway: warning: upstream {upstream.name}: {tls.warning}", err=True)


def _check(config: GatewayConfig, config_path: Path) -> None:
    """``--check``: load the route tokenizers, check the environment, say OK."""
    from tokometer.gateway.config import check_environment
    from tokometer.gateway.prompt import PromptLimiter

    for route in config.routes:
        PromptLimiter(route)
    for warning in check_environment(config, config_path):
        say(f"tokometer gateway: warning: {warning}", err=True)
    say(f"{config_path}: {len(config.upstreams)} upstream(s), {len(config.routes)} route(s): OK")


def _serve(config: GatewayConfig, log_level: str) -> None:
    """Listen, then serve in this process, or in ``workers`` processes under a supervisor."""
    from tokometer.gateway.upstream import CLIENT_SEND_BUFFER_BYTES
    from tokometer.sim.server import bind_socket
    from tokometer.util.errors import ConfigError

    try:
        sock = bind_socket(config.server.host, config.server.port, send_buffer=CLIENT_SEND_BUFFER_BYTES)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {config.server.host}:{config.server.port}: {exc.strerror or exc}; "
                          "pick another port") from None
    if config.replicas.workers > 1:
        from tokometer.gateway.supervisor import Supervisor

        if config.replicas.redis_url is None:
            say(f"tokometer gateway: warning: {config.replicas.workers} workers without [replicas] redis_url: "
                "each keeps its own answer cache, token budgets and circuit breakers (a budget then allows "
                f"up to {config.replicas.workers} times its tokens)", err=True)
        Supervisor(config, sock, config.replicas.workers, log_level=log_level).run()
        return
    from tokometer.gateway.server import serve

    with contextlib.suppress(KeyboardInterrupt):
        serve(config, sock, log_level=log_level)


def _read_secret(value: str) -> str:
    """The secret for --hash-key: a hidden prompt on a terminal, else the first line of stdin."""
    import sys

    from tokometer.util.errors import ConfigError

    if value != "-":  # not echoed: it is the secret
        raise ConfigError("--hash-key takes no value (a secret on the command line shows in ps and the shell "
                          "history): run 'tokometer gateway --hash-key' and type it, or pipe it in, e.g. "
                          "'printf %s \"$KEY\" | tokometer gateway --hash-key'")
    if sys.stdin.isatty():
        secret = str(click.prompt("API key secret", hide_input=True, confirmation_prompt=True, err=True))
    else:
        secret = sys.stdin.readline()
    secret = secret.strip()  # the gateway strips a presented key too
    if not secret:
        raise ConfigError("--hash-key: the secret is empty (type it at the prompt, or pipe it in on one line)")
    return secret
