"""Which proxy a request goes through, from the environment, as curl and Python's urllib decide it.

``HTTP_PROXY`` / ``HTTPS_PROXY`` (either case; ``ALL_PROXY`` as a fallback) name an ``http://`` proxy
for targets of that scheme, and ``NO_PROXY`` lists hosts that bypass it (``*`` bypasses every
host). Loopback targets are not bypassed unless ``NO_PROXY`` says so, as in curl and urllib. Plain
``http://`` targets are sent to the proxy in absolute form (``POST http://host/path``); ``https://``
targets are tunnelled with ``CONNECT host:port`` and TLS is then negotiated with the target itself.

Only ``http://`` proxies are supported: an ``https://`` or SOCKS proxy is a `ConfigError` naming the
variable, not a silent direct connection.
"""

from __future__ import annotations

import base64
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from tokometer.util.errors import ConfigError

__all__ = ["Proxy", "proxy_for"]

_bypass: Callable[[str], bool] = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True)
class Proxy:
    """An HTTP proxy: where to connect, and the credentials it wants (if any)."""

    host: str
    port: int
    source: str
    """The environment variable it came from, for error messages."""
    authorization: str | None = None
    """The ``Proxy-Authorization`` header value (Basic, from the URL's user:password)."""

    def describe(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"proxy {host}:{self.port} (from {self.source})"


def _env_proxy(scheme: str) -> tuple[str, str] | None:
    """(variable name, URL) of the proxy the environment sets for ``scheme``."""
    found = urllib.request.getproxies_environment()
    for key in (scheme, "all"):
        if found.get(key):
            return f"{key.upper()}_PROXY", found[key]
    return None


def proxy_for(scheme: str, host: str, port: int) -> Proxy | None:
    """The proxy to use for ``scheme://host:port``, or None for a direct connection."""
    configured = _env_proxy(scheme)
    if configured is None:
        return None
    source, url = configured
    if _bypass(host) or _bypass(f"{host}:{port}"):
        return None
    if "://" not in url:
        url = "http://" + url  # curl's reading of a bare host:port
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise ConfigError(f"{source}={url!r}: only http:// proxies are supported (not {parts.scheme or 'that'}://); "
                          f"unset it, or add {host} to NO_PROXY to connect directly")
    authorization = None
    if parts.username is not None:
        credentials = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        authorization = "Basic " + base64.b64encode(credentials.encode()).decode("ascii")
    try:
        port_number = parts.port or 80
    except ValueError:
        raise ConfigError(f"{source}={url!r} has an invalid port") from None
    return Proxy(parts.hostname, port_number, source, authorization)
