"""Test PKI: a throwaway CA, a ``localhost`` server certificate, client certificates.

Theory of operation: TLS tests (ours and the official-client compat tests)
need certificates that a client with hostname verification accepts for
``localhost``, and client certificates whose CN becomes the role.  Nothing
here is committed: :func:`make_test_pki` generates fresh keys with
``cryptography`` into a directory (a pytest ``tmp_path``) and returns the file
paths in Pulsar's terms (``tlsCertificateFilePath`` & co).

* CA: self-signed, ``BasicConstraints(ca=True)``, key usage cert/CRL signing.
* Server: signed by the CA, CN ``localhost``, SAN ``DNS:localhost``,
  ``IP:127.0.0.1`` (and ``IP:::1``), extended key usage serverAuth.
* Clients: signed by the CA, CN = the role, extended key usage clientAuth.

Keys are EC P-256 by default (fast to generate); ``key_type="rsa"`` gives
RSA-2048 for tools that want RSA.  Private keys are written unencrypted
PKCS#8 PEM with mode 0600.  Validity starts a day in the past so a skewed
clock does not fail a test.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_DAYS = 30


@dataclass(frozen=True, slots=True)
class CertFiles:
    cert_file: str
    key_file: str
    common_name: str


@dataclass(frozen=True, slots=True)
class TestPki:
    __test__ = False  # not a pytest test class

    directory: str
    ca_cert_file: str
    ca_key_file: str
    server: CertFiles
    clients: dict[str, CertFiles] = field(default_factory=dict)


def _new_key(key_type: str) -> ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey:
    if key_type == "ec":
        return ec.generate_private_key(ec.SECP256R1())
    if key_type == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    raise ValueError(f"key_type must be 'ec' or 'rsa', got {key_type!r}")


def _name(cn: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Magnetar test"),
            x509.NameAttribute(NameOID.COMMON_NAME, cn),
        ]
    )


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> None:
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pem)


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


class TestCa:
    """A CA that signs certificates into ``directory``."""

    __test__ = False

    def __init__(
        self, directory: str | Path, *, key_type: str = "ec", name: str = "Magnetar Test CA"
    ) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.key_type = key_type
        self.key = _new_key(key_type)
        now = datetime.datetime.now(datetime.UTC)
        self.not_before = now - datetime.timedelta(days=1)
        self.not_after = now + datetime.timedelta(days=VALID_DAYS)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(_name(name))
            .issuer_name(_name(name))
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(self.not_before)
            .not_valid_after(self.not_after)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()), critical=False)
            .sign(self.key, hashes.SHA256())
        )
        self.cert_file = self.directory / "ca.cert.pem"
        self.key_file = self.directory / "ca.key.pem"
        _write_cert(self.cert_file, self.cert)
        _write_key(self.key_file, self.key)

    def issue(
        self,
        common_name: str,
        *,
        file_stem: str | None = None,
        dns_names: tuple[str, ...] = (),
        ip_addresses: tuple[str, ...] = (),
        server: bool = False,
        client: bool = False,
    ) -> CertFiles:
        key = _new_key(self.key_type)
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(self.not_before)
            .not_valid_after(self.not_after)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False
            )
        )
        sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
        sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        usages = []
        if server:
            usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
        if client:
            usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
        if usages:
            builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        stem = file_stem or _safe_stem(common_name)
        cert_file = self.directory / f"{stem}.cert.pem"
        key_file = self.directory / f"{stem}.key.pem"
        _write_cert(cert_file, cert)
        _write_key(key_file, key)
        return CertFiles(str(cert_file), str(key_file), common_name)

    def issue_server(self, host: str = "localhost") -> CertFiles:
        return self.issue(
            host, file_stem="server", dns_names=(host,), ip_addresses=("127.0.0.1", "::1"), server=True
        )

    def issue_client(self, common_name: str) -> CertFiles:
        return self.issue(common_name, file_stem=f"client-{_safe_stem(common_name)}", client=True)


def make_test_pki(
    directory: str | Path, client_roles: tuple[str, ...] = ("admin",), *, key_type: str = "ec"
) -> TestPki:
    """A CA, a ``localhost`` server certificate and one client certificate per role."""
    ca = TestCa(directory, key_type=key_type)
    server = ca.issue_server()
    clients = {role: ca.issue_client(role) for role in client_roles}
    return TestPki(str(ca.directory), str(ca.cert_file), str(ca.key_file), server, clients)


def _safe_stem(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "cert"
