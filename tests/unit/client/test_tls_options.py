"""``--ca-bundle`` (and an upstream's ``ca_bundle``) read through the bounded reader: a PEM file of CAs is
trusted; ``/dev/zero`` had read until memory ran out and a FIFO with no writer blocked in open() forever. Each
is now one ConfigError naming the bundle."""

from __future__ import annotations

import os
import ssl
from pathlib import Path

import pytest
import trustme

from tokometer.client.tls import TlsOptions
from tokometer.util.errors import ConfigError


def test_a_pem_bundle_is_trusted(tmp_path: Path) -> None:
    ca = trustme.CA()
    bundle = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    context = TlsOptions(ca_bundle=str(bundle)).context()
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert ssl.PEM_cert_to_DER_cert(ca.cert_pem.bytes().decode("ascii")) in context.get_ca_certs(binary_form=True)


def test_what_is_not_a_bundle_is_one_error(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.pem"
    os.mkfifo(fifo)
    latin = tmp_path / "latin.pem"
    latin.write_bytes(b"caf\xe9")
    for path, why in [("/dev/zero", r"CA bundle: /dev/zero is larger than 16 MiB"),
                      (str(fifo), r"fifo\.pem: cannot be read as PEM certificates \(Empty certificate data\)"),
                      (str(latin), r"latin\.pem: cannot be read as PEM certificates \('ascii' codec"),
                      (str(tmp_path / "none.pem"), r"CA bundle: cannot read .*none\.pem: No such file")]:
        with pytest.raises(ConfigError, match=why):
            TlsOptions(ca_bundle=path).context()
