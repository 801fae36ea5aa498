"""`TlsOptions`' CA bundle: read within a bound, and every bad one a single error naming it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tokometer.client.tls import TlsOptions
from tokometer.util.errors import ConfigError


@pytest.mark.timeout(60)  # a read that waits for a FIFO's writer fails here instead of hanging
def test_a_ca_bundle_is_read_within_a_bound(tmp_path: Path) -> None:
    """OpenSSL read the bundle itself: a FIFO nobody writes to waited for a writer forever. It is read here, at
    most 16 MiB, and handed over as text: a FIFO reads as empty (no certificates), ``/dev/zero`` is refused naming
    the bound, a file not in UTF-8 names the byte, a missing one says so; each error starts "CA bundle"."""
    fifo = tmp_path / "ca.pem"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match=r"^CA bundle .*ca\.pem: cannot be read as PEM certificates \(Empty"):
        TlsOptions(ca_bundle=str(fifo)).context()
    with pytest.raises(ConfigError, match=r"^CA bundle: /dev/zero is larger than 16 MiB: give a PEM file"):
        TlsOptions(ca_bundle="/dev/zero").context()
    latin = tmp_path / "latin.pem"
    latin.write_bytes(b"-----BEGIN CERTIFICATE-----\ncaf\xe9\n")
    with pytest.raises(ConfigError, match=r"^CA bundle: .*latin\.pem: not UTF-8 text \(byte 31\)$"):
        TlsOptions(ca_bundle=str(latin)).context()
    with pytest.raises(ConfigError, match=r"^CA bundle: cannot read .*missing\.pem: No such file"):
        TlsOptions(ca_bundle=str(tmp_path / "missing.pem")).context()


def test_a_private_ca_s_bundle_is_trusted(tmp_path: Path) -> None:
    import ssl

    import trustme

    ca = trustme.CA()
    bundle = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    context = TlsOptions(ca_bundle=str(bundle)).context()
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert ssl.PEM_cert_to_DER_cert(ca.cert_pem.bytes().decode("ascii")) in context.get_ca_certs(binary_form=True)


def test_a_real_bundle_trusts_what_openssl_reading_it_trusts() -> None:
    """certifi's bundle (Mozilla's CAs; certifi comes with httpx, which the SDKs the tests drive need)."""
    import ssl

    import certifi

    direct = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    direct.load_verify_locations(cafile=certifi.where())
    assert len(direct.get_ca_certs()) > 100
    ours = TlsOptions(ca_bundle=certifi.where()).context()
    assert {c["serialNumber"] for c in direct.get_ca_certs()} <= {c["serialNumber"] for c in ours.get_ca_certs()}


def test_gateway_with_a_fifo_for_its_ca_bundle_is_one_line_and_status_2(tmp_path: Path) -> None:
    """Through the command line: ``gateway --check`` with an upstream's ``ca_bundle`` a FIFO waited forever;
    now exit 2 and one ``tokometer: error:`` line, no traceback."""
    from tests.conftest import run_cli

    fifo = tmp_path / "ca.pem"
    os.mkfifo(fifo)
    config = tmp_path / "gw.toml"
    config.write_text(f'[[upstreams]]\nname = "tls"\nurl = "https://127.0.0.1:9/v1"\nca_bundle = "{fifo}"\n'
                      '[[routes]]\nmodel = "m"\nupstreams = ["tls"]\n', encoding="utf-8")
    done = run_cli("gateway", "--config", str(config), "--check", timeout=60)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tokometer: error: ") and "CA bundle" in lines[0], done.stderr
