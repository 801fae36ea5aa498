"""TLS settings for ``https://`` targets: whom to trust, and whether to check at all.

By default the system's trust store is used (``ssl.create_default_context()``, which also honours
``SSL_CERT_FILE``/``SSL_CERT_DIR``). ``ca_bundle`` adds a PEM file of CAs to trust (a private CA, a
self-signed test server), read at most `MAX_CA_BUNDLE_BYTES` (`tokometer.util.readlimit`: a FIFO nobody
writes to reads as empty, where OpenSSL's own read waited for a writer forever). ``verify=False`` turns
certificate and host-name checks off: for test servers only, and whoever sets it is warned, since the
connection is then open to interception.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tokometer.util.errors import ConfigError
from tokometer.util.readlimit import read_text

__all__ = ["MAX_CA_BUNDLE_BYTES", "TlsOptions"]

MAX_CA_BUNDLE_BYTES: Final = 16 << 20
"""A CA bundle, read whole: 16 MiB, some 70 times the system's full trust store (~220 KB, 150 CAs)."""


@dataclass(frozen=True, slots=True)
class TlsOptions:
    """How to check an ``https://`` server's certificate."""

    verify: bool = True
    ca_bundle: str | None = None

    def context(self) -> ssl.SSLContext:
        """The client-side SSL context these options describe."""
        context = ssl.create_default_context()
        if self.ca_bundle:
            path = Path(self.ca_bundle).expanduser()
            try:
                pem = read_text(path, MAX_CA_BUNDLE_BYTES, "give a PEM file of CA certificates", str(path))
            except ConfigError as exc:
                raise ConfigError(f"CA bundle: {exc}") from None
            try:
                context.load_verify_locations(cadata=pem)
            except (ValueError, ssl.SSLError) as exc:  # ValueError: empty
                raise ConfigError(f"CA bundle {path}: cannot be read as PEM certificates ({exc}): "
                                  "give a PEM file of CA certificates") from None
        if not self.verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context

    @property
    def warning(self) -> str | None:
        """What to tell the user about these options, if anything."""
        if self.verify:
            return None
        return "TLS certificate checks are off (verify = false): use this only for test servers"
