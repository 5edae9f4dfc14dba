"""Geo-replication between two standalones that require authentication (issue 18).

Both clusters accept only tokens; each broker's replicators present the broker's client
identity (``brokerClientAuthenticationPlugin`` / ``...Parameters``, a super-user token) to
the other cluster.  A replicator without credentials would be refused at CONNECT.
"""

from __future__ import annotations

import json
import urllib.request
import uuid
from pathlib import Path

import jwt
import pytest

from magnetar.testing.standalone import StandaloneProcess
from magnetar.testing.zookeeper import zookeeper_server_fixture  # noqa: F401 -- fixture

pulsar = pytest.importorskip("pulsar")

SECRET = b"geo-auth-secret-0123456789abcdef0123"
SUPER = "geo-admin"


def token(role: str) -> str:
    return jwt.encode({"sub": role}, SECRET, "HS256")


def http(proc: StandaloneProcess, method: str, path: str, body: object = None) -> None:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(proc.web_url + path, data=data, method=method)
    req.add_header("Authorization", f"Bearer {token(SUPER)}")
    req.add_header("Content-Type", "application/json")
    urllib.request.urlopen(req, timeout=30).read()


def start(tmp: Path, name: str, zk: str) -> StandaloneProcess:
    (tmp / "secret.key").write_bytes(SECRET)
    conf = tmp / f"{name}.conf"
    conf.write_text(
        "\n".join(
            [
                f"clusterName={name}",
                f"configurationMetadataStoreUrl={zk}",
                "functionsWorkerEnabled=false",
                "authenticationEnabled=true",
                "authenticationProviders=org.apache.pulsar.broker.authentication.AuthenticationProviderToken",
                f"tokenSecretKey=file://{tmp / 'secret.key'}",
                "authorizationEnabled=true",
                f"superUserRoles={SUPER}",
                "brokerClientAuthenticationPlugin=org.apache.pulsar.client.impl.auth.AuthenticationToken",
                f"brokerClientAuthenticationParameters=token:{token(SUPER)}",
                "",
            ]
        )
    )
    proc = StandaloneProcess(tmp / f"data-{name}", config_file=conf, extra_args=["--no-functions-worker"])
    proc.start(timeout_s=90)
    return proc


def test_replicators_authenticate_to_the_remote_cluster(tmp_path: Path, zookeeper_server) -> None:  # noqa: ANN001, F811
    zk = f"zk:{zookeeper_server.hosts}/geo-auth-{uuid.uuid4().hex[:8]}"
    a = start(tmp_path, "A", zk)
    b = start(tmp_path, "B", zk)
    try:
        http(a, "PUT", "/admin/v2/tenants/sec", {"adminRoles": [], "allowedClusters": ["A", "B"]})
        http(a, "PUT", "/admin/v2/namespaces/sec/geo", {"replication_clusters": ["A", "B"]})
        auth = pulsar.AuthenticationToken(token(SUPER))
        c_a = pulsar.Client(a.broker_url, authentication=auth)
        c_b = pulsar.Client(b.broker_url, authentication=auth)
        try:
            topic = f"persistent://sec/geo/t-{uuid.uuid4().hex[:8]}"
            consumer = c_b.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
            producer = c_a.create_producer(topic)
            for i in range(10):
                producer.send(f"{i}".encode())
            got = sorted(consumer.receive(timeout_millis=30_000).data() for _ in range(10))
            assert got == sorted(f"{i}".encode() for i in range(10))
        finally:
            c_a.close()
            c_b.close()
    finally:
        a.terminate()
        b.terminate()
