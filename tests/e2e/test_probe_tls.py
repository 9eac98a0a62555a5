"""The prober over TLS, against a real HTTPS server on loopback with a certificate of its own: an https endpoint
is verified against the system's authorities (here, the test's own, through SSL_CERT_FILE, as OpenSSL reads it),
and the client of an http endpoint, which holds no authorities at all, fails closed on TLS: never unverified."""

from __future__ import annotations

import datetime
import http.server
import ipaddress
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

import tui.collectors.probes as probes
from tui.collectors.probes import Prober
from tui.model import ProbeResult


def _self_signed(tmp: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1, signed by its own key: an authority only for whoever is told to trust it."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = tmp / "cert.pem", tmp / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/health" else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def https_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    cert, key = _self_signed(tmp_path)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}", cert
    finally:
        server.shutdown()
        server.server_close()


async def _health_under_this_trust(url: str, monkeypatch: pytest.MonkeyPatch) -> ProbeResult:
    """A health probe of `url` by a new prober whose shared TLS context is made again, under the trust the test set
    (SSL_CERT_FILE, SSL_CERT_DIR), as a fresh process would make it."""
    monkeypatch.setattr(probes, "_SSL", None)
    p = Prober(url, timeout=5)
    try:
        return await p.health()
    finally:
        await p.close()


async def test_an_https_endpoint_is_verified_against_the_trusted_authorities(
        https_server: tuple[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    url, cert = https_server
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    r = await _health_under_this_trust(url, monkeypatch)
    assert r.ok, r


async def test_an_https_endpoint_whose_certificate_no_authority_signed_fails(
        https_server: tuple[str, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    url, _ = https_server
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "none.pem"))  # trusts nothing
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path))
    r = await _health_under_this_trust(url, monkeypatch)
    assert not r.ok and "certificate" in r.detail.lower(), r


async def test_the_client_of_an_http_endpoint_fails_closed_on_tls(
        https_server: tuple[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """It holds no authorities (it never needs them): even with the server's certificate trusted system-wide, a TLS
    connection through it is refused, never made unverified."""
    url, cert = https_server
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    p = Prober(url.replace("https://", "http://"), timeout=5)
    try:
        with pytest.raises(Exception, match=r"(?i)certificate"):
            await p.client.get(f"{url}/health")
    finally:
        await p.close()
