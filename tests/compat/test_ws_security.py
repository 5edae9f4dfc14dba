"""WebSocket API authentication and authorization against a secured real standalone:
tokens in the ``Authorization`` header or the ``token`` query parameter, Pulsar's 401/403."""

from __future__ import annotations

import base64
import json
import socket
import uuid

import httpx
import jwt
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from magnetar.testing.standalone import StandaloneProcess, broker_unavailable_reason

SECRET = b"ws-security-secret-0123456789abcdef"
TIMEOUT_S = 10


def token(role: str) -> str:
    return jwt.encode({"sub": role}, SECRET, "HS256")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    reason = broker_unavailable_reason()
    if reason:
        pytest.skip(reason)
    base = tmp_path_factory.mktemp("wssec")
    (base / "secret.key").write_bytes(SECRET)
    conf = base / "standalone.conf"
    conf.write_text(
        "authenticationEnabled=true\n"
        "authenticationProviders=org.apache.pulsar.broker.authentication.AuthenticationProviderToken\n"
        f"tokenSecretKey=file://{base / 'secret.key'}\n"
        "authorizationEnabled=true\nsuperUserRoles=admin\n"
    )
    proc = StandaloneProcess(base / "data", config_file=conf)
    proc.start()
    admin = {"Authorization": f"Bearer {token('admin')}"}
    for role, actions in (("writer", ["produce"]), ("reader", ["consume"])):
        r = httpx.post(
            f"{proc.web_url}/admin/v2/namespaces/public/default/permissions/{role}",
            json=actions,
            headers=admin,
            timeout=TIMEOUT_S,
        )
        assert r.status_code in (200, 204), r.text
    yield proc
    assert proc.terminate() == 0, proc.log_tail()


def url(proc, kind: str, topic: str, tail: str = "", query: str = "") -> str:
    return (
        proc.web_url.replace("http://", "ws://")
        + f"/ws/v2/{kind}/persistent/public/default/{topic}{tail}{query}"
    )


def status_of(target: str, **kw) -> int:
    with pytest.raises(InvalidStatus) as info:
        connect(target, **kw)
    return info.value.response.status_code


def test_missing_or_bad_credentials_are_401(secured) -> None:
    t = f"sec-{uuid.uuid4().hex[:6]}"
    assert status_of(url(secured, "producer", t)) == 401
    assert status_of(url(secured, "producer", t, query="?token=not-a-jwt")) == 401
    bad = jwt.encode({"sub": "writer"}, b"another-secret-0123456789abcdef0", "HS256")
    assert (
        status_of(url(secured, "producer", t), additional_headers={"Authorization": f"Bearer {bad}"}) == 401
    )


def test_roles_without_the_grant_are_403(secured) -> None:
    t = f"sec-{uuid.uuid4().hex[:6]}"
    assert status_of(url(secured, "producer", t, query=f"?token={token('reader')}")) == 403
    assert status_of(url(secured, "consumer", t, "/s", query=f"?token={token('writer')}")) == 403
    assert status_of(url(secured, "reader", t, query=f"?token={token('nobody')}")) == 403


def test_header_token_produces_and_query_token_consumes(secured) -> None:
    t = f"sec-{uuid.uuid4().hex[:6]}"
    with connect(url(secured, "consumer", t, "/s", query=f"?token={token('reader')}")) as consumer:
        headers = {"Authorization": f"Bearer {token('writer')}"}
        with connect(url(secured, "producer", t), additional_headers=headers) as producer:
            producer.send(json.dumps({"payload": base64.b64encode(b"secret").decode()}))
            assert json.loads(producer.recv(timeout=TIMEOUT_S))["result"] == "ok"
        got = json.loads(consumer.recv(timeout=TIMEOUT_S))
        assert base64.b64decode(got["payload"]) == b"secret"


def test_authentication_outcomes_are_counted_in_metrics(secured) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    status_of(url(secured, "producer", "m", query="?token=garbage"))
    ok = httpx.get(
        f"{secured.web_url}/admin/v2/clusters", headers={"Authorization": f"Bearer {token('admin')}"}
    )
    assert ok.status_code == 200
    text = httpx.get(f"{secured.web_url}/metrics", timeout=TIMEOUT_S).text
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }
    failures = {k: v for k, v in samples.items() if k[0] == "pulsar_authentication_failures_total"}
    successes = {k: v for k, v in samples.items() if k[0] == "pulsar_authentication_success_total"}
    assert failures and all(v > 0 for v in failures.values()), failures
    assert any(dict(k[1])["provider_name"] == "AuthenticationProviderToken" for k in failures), failures
    assert any(dict(k[1])["auth_method"] == "token" and v > 0 for k, v in successes.items()), successes


def test_multi_topic_consumer_checks_consume_per_topic(secured) -> None:
    base = secured.web_url.replace("http://", "ws://") + "/ws/v3/consumer/s?topics="
    t = f"sec-{uuid.uuid4().hex[:6]}"
    with connect(f"{base}{t},{t}-2&token={token('reader')}"):
        pass
    assert status_of(f"{base}{t}&token={token('writer')}") == 403
    assert status_of(f"{base}{t}") == 401
