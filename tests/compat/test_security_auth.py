"""Security with the official client against a real ``magnetar standalone`` subprocess.

One secured standalone for the module, configured through a generated config
file: token (HS256), basic (htpasswd with ``$apr1$`` and bcrypt) and TLS
client-certificate providers, an anonymous role, authorization with super-users,
and TLS listeners for the binary protocol and HTTPS using a CA-signed
``localhost`` certificate.  Keys and certificates are generated per run.
"""

from __future__ import annotations

import json
import socket
import ssl
import urllib.error
import urllib.request
import uuid

import bcrypt
import jwt
import pytest

from magnetar.broker.auth.basic import apr1_md5
from magnetar.testing.certs import make_test_pki
from magnetar.testing.cli import run_admin
from magnetar.testing.standalone import StandaloneProcess, broker_unavailable_reason

pulsar = pytest.importorskip("pulsar")

SECRET = b"compat-security-secret-0123456789abcdef"
SUPER = "admin"
TIMEOUT_S = 10


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def token(role: str, **claims) -> str:
    return jwt.encode({"sub": role, **claims}, SECRET, "HS256")


class Secured:
    def __init__(self, proc: StandaloneProcess, pki, tls_port: int, https_port: int) -> None:
        self.proc = proc
        self.pki = pki
        self.tls_url = f"pulsar+ssl://localhost:{tls_port}"
        self.https_url = f"https://localhost:{https_port}"

    @property
    def url(self) -> str:
        return self.proc.broker_url

    def admin(self, method: str, path: str, body=None, role: str = SUPER) -> tuple[int, str]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.proc.web_url + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {token(role)}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=TIMEOUT_S) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    reason = broker_unavailable_reason()
    if reason:
        pytest.skip(reason)
    base = tmp_path_factory.mktemp("security")
    pki = make_test_pki(base / "pki", (SUPER, "bob"))
    (base / "secret.key").write_bytes(SECRET)
    htpasswd = base / "htpasswd"
    carol_hash = bcrypt.hashpw(b"carol-pw", bcrypt.gensalt(rounds=4)).decode()
    htpasswd.write_text(f"alice:{apr1_md5(b'alice-pw', b'a1b2c3d4')}\ncarol:{carol_hash}\n")
    tls_port, https_port = free_port(), free_port()
    conf = base / "standalone.conf"
    conf.write_text(
        "\n".join(
            [
                "authenticationEnabled=true",
                "authenticationProviders=org.apache.pulsar.broker.authentication.AuthenticationProviderToken,"
                "org.apache.pulsar.broker.authentication.AuthenticationProviderBasic,"
                "org.apache.pulsar.broker.authentication.AuthenticationProviderTls",
                f"tokenSecretKey=file://{base / 'secret.key'}",
                f"basicAuthConf={htpasswd}",
                "authorizationEnabled=true",
                f"superUserRoles={SUPER},alice,carol",
                "anonymousUserRole=anon",
                f"tlsCertificateFilePath={pki.server.cert_file}",
                f"tlsKeyFilePath={pki.server.key_file}",
                f"tlsTrustCertsFilePath={pki.ca_cert_file}",
                f"brokerServicePortTls={tls_port}",
                f"webServicePortTls={https_port}",
                "",
            ]
        )
    )
    proc = StandaloneProcess(
        base / "data", config_file=conf, extra_args=["--advertised-address", "localhost"]
    )
    proc.start()
    s = Secured(proc, pki, tls_port, https_port)
    status, body = s.admin(
        "PUT", "/admin/v2/tenants/sec", {"adminRoles": ["sec-admin"], "allowedClusters": ["standalone"]}
    )
    assert status in (200, 204), body
    for ns in ("sec/ns", "sec/anon"):
        status, body = s.admin("PUT", f"/admin/v2/namespaces/{ns}")
        assert status in (200, 204), body
    status, body = s.admin("POST", "/admin/v2/namespaces/sec/anon/permissions/anon", ["produce", "consume"])
    assert status in (200, 204), body
    yield s
    code = proc.terminate()
    assert code == 0, f"standalone exited {code}; log tail:\n{proc.log_tail()}"


def client(url: str, **kw) -> pulsar.Client:
    return pulsar.Client(
        url,
        operation_timeout_seconds=kw.pop("operation_timeout_seconds", TIMEOUT_S),
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
        **kw,
    )


def round_trip(url: str, topic: str, **kw) -> str:
    """Produce and consume one message; the message text, or the error's class name."""
    c = client(url, **kw)
    try:
        consumer = c.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
        producer = c.create_producer(topic)
        text = f"m-{uuid.uuid4().hex[:6]}"
        producer.send(text.encode())
        got = consumer.receive(TIMEOUT_S * 1000).data().decode()
        assert got == text
        return "ok"
    except Exception as exc:  # noqa: BLE001 -- the class name is what the tests compare
        return type(exc).__name__
    finally:
        c.close()


def produce(url: str, topic: str, **kw) -> str:
    c = client(url, **kw)
    try:
        c.create_producer(topic).send(b"x")
        return "ok"
    except Exception as exc:  # noqa: BLE001
        return type(exc).__name__
    finally:
        c.close()


def consume(url: str, topic: str, **kw) -> str:
    c = client(url, **kw)
    try:
        c.subscribe(topic, "sub-" + uuid.uuid4().hex[:6])
        return "ok"
    except Exception as exc:  # noqa: BLE001
        return type(exc).__name__
    finally:
        c.close()


def unique(ns: str = "public/default") -> str:
    return f"persistent://{ns}/t-{uuid.uuid4().hex[:10]}"


# ---------------------------------------------------------------------------------- token
def test_static_token(secured) -> None:
    assert round_trip(secured.url, unique(), authentication=pulsar.AuthenticationToken(token(SUPER))) == "ok"


def test_token_supplier(secured) -> None:
    calls = []

    def supplier() -> str:
        calls.append(1)
        return token(SUPER)

    assert round_trip(secured.url, unique(), authentication=pulsar.AuthenticationToken(supplier)) == "ok"
    assert calls, "the supplier was never asked"


@pytest.mark.parametrize(
    "bad",
    [
        "not-a-jwt",
        jwt.encode({"sub": SUPER}, b"some-other-secret-some-other-secret", "HS256"),
        token(SUPER, exp=1),
        "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhZG1pbiJ9.",
    ],
    ids=["malformed", "wrong-signature", "expired", "alg-none"],
)
def test_bad_tokens_are_refused_and_others_are_still_served(secured, bad) -> None:
    assert (
        produce(secured.url, unique(), authentication=pulsar.AuthenticationToken(bad))
        == "AuthenticationError"
    )
    assert round_trip(secured.url, unique(), authentication=pulsar.AuthenticationToken(token(SUPER))) == "ok"


# ---------------------------------------------------------------------------------- basic
def test_basic_good_passwords_apr1_and_bcrypt(secured) -> None:
    for user, pw in (("alice", "alice-pw"), ("carol", "carol-pw")):
        auth = pulsar.AuthenticationBasic(user, pw)
        assert round_trip(secured.url, unique(), authentication=auth) == "ok", user


def test_basic_bad_password_is_refused_not_timed_out(secured) -> None:
    # A 60 s operation timeout: a refusal that the client retried until its timeout would
    # surface as Timeout, not AuthenticationError.
    auth = pulsar.AuthenticationBasic("alice", "wrong")
    result = produce(secured.url, unique(), authentication=auth, operation_timeout_seconds=60)
    assert result == "AuthenticationError"
    auth = pulsar.AuthenticationBasic("nobody", "x")
    assert produce(secured.url, unique(), authentication=auth) == "AuthenticationError"
    assert (
        round_trip(secured.url, unique(), authentication=pulsar.AuthenticationBasic("alice", "alice-pw"))
        == "ok"
    )


# ---------------------------------------------------------------------------------- TLS
def test_tls_transport_with_hostname_validation(secured) -> None:
    result = round_trip(
        secured.tls_url,
        unique(),
        authentication=pulsar.AuthenticationToken(token(SUPER)),
        tls_trust_certs_file_path=secured.pki.ca_cert_file,
        tls_validate_hostname=True,
    )
    assert result == "ok"


def test_tls_transport_refuses_an_untrusted_server(secured, tmp_path) -> None:
    other = make_test_pki(tmp_path / "other", ())
    result = produce(
        secured.tls_url,
        unique(),
        authentication=pulsar.AuthenticationToken(token(SUPER)),
        tls_trust_certs_file_path=other.ca_cert_file,
        tls_validate_hostname=True,
        operation_timeout_seconds=3,
    )
    assert result != "ok"


def test_tls_client_certificate_authentication(secured) -> None:
    admin = secured.pki.clients[SUPER]
    ok = round_trip(
        secured.tls_url,
        unique(),
        authentication=pulsar.AuthenticationTLS(admin.cert_file, admin.key_file),
        tls_trust_certs_file_path=secured.pki.ca_cert_file,
        tls_validate_hostname=True,
    )
    assert ok == "ok"
    bob = secured.pki.clients["bob"]
    denied = produce(
        secured.tls_url,
        unique("sec/ns"),
        authentication=pulsar.AuthenticationTLS(bob.cert_file, bob.key_file),
        tls_trust_certs_file_path=secured.pki.ca_cert_file,
        tls_validate_hostname=True,
    )
    assert denied == "AuthorizationError"  # authenticated as "bob", who has no grant


def test_https_admin_with_client_certificate(secured) -> None:
    ctx = ssl.create_default_context(cafile=secured.pki.ca_cert_file)
    ctx.load_cert_chain(secured.pki.clients[SUPER].cert_file, secured.pki.clients[SUPER].key_file)
    with urllib.request.urlopen(secured.https_url + "/admin/v2/tenants", context=ctx, timeout=TIMEOUT_S) as r:
        assert "sec" in json.loads(r.read())
    ctx = ssl.create_default_context(cafile=secured.pki.ca_cert_file)
    ctx.load_cert_chain(secured.pki.clients["bob"].cert_file, secured.pki.clients["bob"].key_file)
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(secured.https_url + "/admin/v2/tenants", context=ctx, timeout=TIMEOUT_S)
    assert err.value.code == 403
    assert "bob" in json.loads(err.value.read())["reason"]


# ---------------------------------------------------------------------------------- anonymous
def test_anonymous_fallback_without_credentials(secured) -> None:
    assert round_trip(secured.url, unique("sec/anon")) == "ok"
    assert produce(secured.url, unique("sec/ns")) == "AuthorizationError"  # anon has no grant there


def test_anonymous_fallback_for_a_method_the_broker_does_not_know(tmp_path) -> None:
    # The official client cannot name an arbitrary method on the wire (an unknown plugin fails in
    # the client), so the unknown method is "basic" sent to a broker that only knows "token".
    (tmp_path / "secret.key").write_bytes(SECRET)
    conf = tmp_path / "token-only.conf"
    conf.write_text(
        "authenticationEnabled=true\n"
        "authenticationProviders=org.apache.pulsar.broker.authentication.AuthenticationProviderToken\n"
        f"tokenSecretKey=file://{tmp_path / 'secret.key'}\n"
        "authorizationEnabled=true\nsuperUserRoles=anon-super\nanonymousUserRole=anon-super\n"
    )
    proc = StandaloneProcess(tmp_path / "data", config_file=conf)
    proc.start()
    try:
        basic = pulsar.AuthenticationBasic("someone", "anything")
        assert round_trip(proc.broker_url, unique(), authentication=basic) == "ok"
        # a known method with bad credentials is refused, never downgraded to anonymous
        bad = pulsar.AuthenticationToken("garbage")
        assert produce(proc.broker_url, unique(), authentication=bad) == "AuthenticationError"
    finally:
        assert proc.terminate() == 0, proc.log_tail()


# ---------------------------------------------------------------------------------- authorization
def test_authorization_denied_then_granted_for_produce_and_consume(secured) -> None:
    role = f"user-{uuid.uuid4().hex[:6]}"
    auth = pulsar.AuthenticationToken(token(role))
    topic = unique("sec/ns")
    assert produce(secured.url, topic, authentication=auth) == "AuthorizationError"
    assert consume(secured.url, topic, authentication=auth) == "AuthorizationError"

    # a tenant admin of another tenant may not grant on sec/ns
    status, _ = secured.admin(
        "POST", f"/admin/v2/namespaces/sec/ns/permissions/{role}", ["produce"], role=role
    )
    assert status == 403
    status, body = secured.admin("POST", f"/admin/v2/namespaces/sec/ns/permissions/{role}", ["produce"])
    assert status in (200, 204), body
    assert produce(secured.url, topic, authentication=auth) == "ok"
    assert consume(secured.url, topic, authentication=auth) == "AuthorizationError"

    # the tenant's own admin grants consume
    status, body = secured.admin(
        "POST", f"/admin/v2/namespaces/sec/ns/permissions/{role}", ["produce", "consume"], role="sec-admin"
    )
    assert status in (200, 204), body
    assert consume(secured.url, topic, authentication=auth) == "ok"
    status, body = secured.admin("GET", "/admin/v2/namespaces/sec/ns/permissions")
    assert status == 200 and sorted(json.loads(body)[role]) == ["consume", "produce"]

    status, body = secured.admin("DELETE", f"/admin/v2/namespaces/sec/ns/permissions/{role}")
    assert status in (200, 204), body
    assert produce(secured.url, topic, authentication=auth) == "AuthorizationError"


def test_subscription_permission_limits_who_may_use_a_subscription(secured) -> None:
    owner, other = f"owner-{uuid.uuid4().hex[:6]}", f"other-{uuid.uuid4().hex[:6]}"
    for role in (owner, other):
        status, body = secured.admin("POST", f"/admin/v2/namespaces/sec/ns/permissions/{role}", ["consume"])
        assert status in (200, 204), body
    sub = f"private-{uuid.uuid4().hex[:6]}"
    status, body = secured.admin(
        "POST", f"/admin/v2/namespaces/sec/ns/permissions/subscription/{sub}", [owner]
    )
    assert status in (200, 204), body
    topic = unique("sec/ns")

    def subscribe(role: str) -> str:
        c = client(secured.url, authentication=pulsar.AuthenticationToken(token(role)))
        try:
            c.subscribe(topic, sub)
            return "ok"
        except Exception as exc:  # noqa: BLE001
            return type(exc).__name__
        finally:
            c.close()

    assert subscribe(other) == "AuthorizationError"
    assert subscribe(owner) == "ok"


def test_https_service_url_lookups_with_token(secured) -> None:
    # The client looks topics up over HTTPS (Bearer token, lookup authorization) and then
    # speaks the binary protocol over TLS.
    result = round_trip(
        secured.https_url,
        unique(),
        authentication=pulsar.AuthenticationToken(token(SUPER)),
        tls_trust_certs_file_path=secured.pki.ca_cert_file,
        tls_validate_hostname=True,
    )
    assert result == "ok"
    denied = produce(
        secured.https_url,
        unique("sec/ns"),
        authentication=pulsar.AuthenticationToken(token("stranger")),
        tls_trust_certs_file_path=secured.pki.ca_cert_file,
    )
    # The C++ client reports any HTTP refusal of its lookup (here 403) as ConnectError, at once.
    assert denied == "ConnectError"
    ctx = ssl.create_default_context(cafile=secured.pki.ca_cert_file)
    req = urllib.request.Request(secured.https_url + "/lookup/v2/topic/persistent/sec/ns/x")
    req.add_header("Authorization", f"Bearer {token('stranger')}")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, context=ctx, timeout=TIMEOUT_S)
    assert err.value.code == 403
    assert "stranger" in json.loads(err.value.read())["reason"]


def test_http_service_urls_with_basic_and_token(secured) -> None:
    # HTTP lookups carry the client's credentials in the Authorization header (Basic / Bearer).
    basic = pulsar.AuthenticationBasic("alice", "alice-pw")
    assert (
        round_trip(
            secured.https_url,
            unique(),
            authentication=basic,
            tls_trust_certs_file_path=secured.pki.ca_cert_file,
        )
        == "ok"
    )
    assert (
        round_trip(secured.proc.web_url, unique(), authentication=pulsar.AuthenticationToken(token(SUPER)))
        == "ok"
    )
    bad = pulsar.AuthenticationBasic("alice", "wrong")
    assert produce(secured.proc.web_url, unique(), authentication=bad) != "ok"


def admin_cli(
    secured, *args: str, url: str | None = None, extra: tuple[str, ...] = (), subprocess: bool = False
) -> tuple[int, str]:
    """``magnetar admin``: in-process (magnetar.testing.cli) unless ``subprocess``."""
    out = run_admin(url or secured.proc.web_url, *extra, *args, check=False, subprocess=subprocess)
    return out.returncode, out.stdout + out.stderr


def test_magnetar_admin_cli_with_token_basic_and_tls_credentials(secured) -> None:
    tok = ("--auth-plugin", "org.apache.pulsar.client.impl.auth.AuthenticationToken", "--auth-params")
    code, out = admin_cli(secured, "tenants", "list", extra=(*tok, f"token:{token(SUPER)}"), subprocess=True)
    assert code == 0 and "sec" in out, out
    code, out = admin_cli(secured, "tenants", "list", extra=(*tok, f"token:{token('sec-admin')}"))
    assert code != 0 and "super-user" in out, out  # 403 with the broker's reason
    code, out = admin_cli(secured, "namespaces", "list", "sec", extra=(*tok, f"token:{token('sec-admin')}"))
    assert code == 0 and "sec/ns" in out, out
    code, out = admin_cli(secured, "tenants", "list")
    assert code != 0, out  # no credentials: anonymous role, not a super-user

    basic = ("--auth-plugin", "basic", "--auth-params", '{"userId": "alice", "password": "alice-pw"}')
    code, out = admin_cli(secured, "tenants", "list", extra=basic)
    assert code == 0 and "sec" in out, out

    cert = secured.pki.clients[SUPER]
    tls = (
        "--auth-plugin",
        "tls",
        "--auth-params",
        f"tlsCertFile:{cert.cert_file},tlsKeyFile:{cert.key_file}",
        "--tls-trust-cert-path",
        secured.pki.ca_cert_file,
        "--tls-enable-hostname-verification",
    )
    code, out = admin_cli(secured, "tenants", "list", url=secured.https_url, extra=tls)
    assert code == 0 and "sec" in out, out
