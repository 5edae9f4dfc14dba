"""TLS helpers: server/client ``ssl.SSLContext`` from Pulsar's TLS keys, and peer CNs.

Theory of operation: the binary-protocol TLS listener (``brokerServicePortTls``,
usually 6651) and the HTTPS listener (``webServicePortTls``, usually 8443)
both take an ``ssl.SSLContext`` built here from the PEM files Pulsar names:
``tlsCertificateFilePath`` + ``tlsKeyFilePath`` (our certificate chain and
key), ``tlsTrustCertsFilePath`` (the CA bundle client certificates must chain
to).  With a trust bundle the server asks for a client certificate
(CERT_OPTIONAL); with ``tlsRequireTrustedClientCertOnConnect`` it insists
(CERT_REQUIRED) and the handshake fails without one.

``tlsAllowInsecureConnection`` (accept *untrusted* client certificates) has no
equivalent in Python's ``ssl``: a certificate that does not verify fails the
handshake.  Clients without a certificate are still accepted unless a
certificate is required, which is the part of that switch people rely on.

The TLS authentication provider takes the role from the client certificate's
subject CN (:func:`peer_common_name`), which accepts what asyncio offers: the
``peercert`` dict (``transport.get_extra_info("peercert")``), the DER bytes
(``ssl_object.getpeercert(binary_form=True)``) or a ``cryptography``
certificate.  Loading files is blocking I/O: build contexts at startup.
"""

from __future__ import annotations

import ssl
from typing import TYPE_CHECKING, Any

from magnetar.broker.auth.config import AuthConfig
from magnetar.broker.auth.errors import AuthConfigError

if TYPE_CHECKING:
    from cryptography import x509

    PeerCert = dict[str, Any] | bytes | x509.Certificate
else:  # cryptography (~10 MiB resident) is imported only when a certificate must be parsed
    PeerCert = dict[str, Any] | bytes | Any

_VERSIONS = {
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}


def server_ssl_context(
    cert_file: str,
    key_file: str,
    trust_certs_file: str | None = None,
    *,
    require_client_cert: bool = False,
    protocols: tuple[str, ...] = (),
    ciphers: tuple[str, ...] = (),
) -> ssl.SSLContext:
    """A server context; asks for a client cert when a trust bundle is given."""
    if require_client_cert and not trust_certs_file:
        raise AuthConfigError("requiring client certificates needs a trust bundle (tlsTrustCertsFilePath)")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _load_chain(ctx, cert_file, key_file)
    if trust_certs_file:
        _load_trust(ctx, trust_certs_file)
        ctx.verify_mode = ssl.CERT_REQUIRED if require_client_cert else ssl.CERT_OPTIONAL
    else:
        ctx.verify_mode = ssl.CERT_NONE
    _apply_protocols(ctx, protocols, ciphers)
    return ctx


def server_ssl_context_from_config(cfg: AuthConfig) -> ssl.SSLContext:
    if not (cfg.tls_certificate_file_path and cfg.tls_key_file_path):
        raise AuthConfigError("TLS needs tlsCertificateFilePath and tlsKeyFilePath")
    return server_ssl_context(
        cfg.tls_certificate_file_path,
        cfg.tls_key_file_path,
        cfg.tls_trust_certs_file_path,
        require_client_cert=cfg.tls_require_trusted_client_cert_on_connect,
        protocols=cfg.tls_protocols,
        ciphers=cfg.tls_ciphers,
    )


def client_ssl_context(
    trust_certs_file: str | None = None,
    *,
    cert_file: str | None = None,
    key_file: str | None = None,
    hostname_verification: bool = True,
    allow_insecure: bool = False,
) -> ssl.SSLContext:
    """A client context (the broker's internal client, tests): trust a CA, optionally present a cert."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if allow_insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    else:
        if trust_certs_file:
            _load_trust(ctx, trust_certs_file)
        else:
            ctx.load_default_certs()
        ctx.check_hostname = hostname_verification
    if cert_file:
        if not key_file:
            raise AuthConfigError("a client certificate needs its key file")
        _load_chain(ctx, cert_file, key_file)
    return ctx


def peer_common_name(peer: PeerCert | None) -> str | None:
    """The first CN of the subject, or None when there is no certificate or no CN."""
    if peer is None:
        return None
    if isinstance(peer, dict):
        for rdn in peer.get("subject", ()):
            for name, value in rdn:
                if name == "commonName":
                    return str(value)
        return None
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    cert = peer
    if isinstance(peer, bytes | bytearray | memoryview):
        if not peer:
            return None
        try:
            cert = x509.load_der_x509_certificate(bytes(peer))
        except ValueError:
            return None
    assert isinstance(cert, x509.Certificate)
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if not names:
        return None
    value = names[0].value
    return value.decode() if isinstance(value, bytes) else value


def peer_certificate(ssl_object: ssl.SSLObject | ssl.SSLSocket | None) -> bytes | None:
    """DER bytes of the peer's certificate (works whether or not it was verified)."""
    if ssl_object is None:
        return None
    der = ssl_object.getpeercert(binary_form=True)
    return der or None


def _load_chain(ctx: ssl.SSLContext, cert_file: str, key_file: str) -> None:
    try:
        ctx.load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as exc:
        raise AuthConfigError(f"cannot load certificate {cert_file} / key {key_file}: {exc}") from None


def _load_trust(ctx: ssl.SSLContext, trust_file: str) -> None:
    try:
        ctx.load_verify_locations(cafile=trust_file)
    except (OSError, ssl.SSLError) as exc:
        raise AuthConfigError(f"cannot load trusted certificates {trust_file}: {exc}") from None


def _apply_protocols(ctx: ssl.SSLContext, protocols: tuple[str, ...], ciphers: tuple[str, ...]) -> None:
    if protocols:
        try:
            versions = sorted(_VERSIONS[p] for p in protocols)
        except KeyError as exc:
            raise AuthConfigError(f"unsupported TLS protocol {exc.args[0]!r} (TLSv1.2, TLSv1.3)") from None
        ctx.minimum_version = versions[0]
        ctx.maximum_version = versions[-1]
    if ciphers:
        try:
            ctx.set_ciphers(":".join(ciphers))
        except ssl.SSLError:
            raise AuthConfigError(f"no usable cipher in tlsCiphers={','.join(ciphers)}") from None
