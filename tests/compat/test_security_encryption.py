"""End-to-end encryption with the official client through a ``magnetar standalone`` subprocess.

Encryption is the clients' business: the producer encrypts the payload with a
data key and ships that key, encrypted with the RSA public key, in the
message metadata (``encryption_keys``, ``encryption_param``); the broker stores
and delivers it untouched.  Key files are generated here with ``cryptography``.

Consumers without the key follow their ``crypto_failure_action``:
FAIL -> the message is not delivered (and stays in the backlog), DISCARD -> it
is acknowledged and dropped, CONSUME -> the still-encrypted payload is
delivered.  The stored bytes are checked in
``tests/integration/test_security_encryption.py`` (in-process).

ECDSA: the C++-based official client (3.13) only encrypts data keys with RSA;
with an EC key it refuses locally with CryptoError, before anything reaches
the broker (the Java client has ECIES).  The test pins that.
"""

from __future__ import annotations

import json
import time
import urllib.request
import uuid

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

pulsar = pytest.importorskip("pulsar")

TIMEOUT_MS = 10_000
PLAINTEXT = b"the secret payload"


def key_files(directory, kind: str) -> tuple[str, str]:
    key = rsa.generate_private_key(65537, 2048) if kind == "rsa" else ec.generate_private_key(ec.SECP256R1())
    pub = directory / f"{kind}-{uuid.uuid4().hex[:6]}.pub.pem"
    priv = pub.with_name(pub.name.replace(".pub.", ".priv."))
    pub.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    priv.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return str(pub), str(priv)


@pytest.fixture
def pclient(standalone):
    c = pulsar.Client(
        standalone.broker_url,
        operation_timeout_seconds=10,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
    )
    yield c
    c.close()


def backlog(web_url: str, topic: str, sub: str) -> int:
    path = topic.replace("persistent://", "persistent/")
    with urllib.request.urlopen(f"{web_url}/admin/v2/{path}/stats", timeout=10) as r:
        return json.loads(r.read())["subscriptions"][sub]["msgBacklog"]


def test_rsa_encrypted_round_trip_and_crypto_failure_actions(standalone, pclient, topic, tmp_path) -> None:
    pub, priv = key_files(tmp_path, "rsa")
    reader = pulsar.CryptoKeyReader(pub, priv)
    other_pub, other_priv = key_files(tmp_path, "rsa")
    wrong = pulsar.CryptoKeyReader(other_pub, other_priv)
    action = pulsar.ConsumerCryptoFailureAction
    good = pclient.subscribe(topic, "good", crypto_key_reader=reader)
    raw = pclient.subscribe(topic, "raw", crypto_failure_action=action.CONSUME)
    fail = pclient.subscribe(topic, "fail", crypto_failure_action=action.FAIL)
    discard = pclient.subscribe(
        topic, "discard", crypto_key_reader=wrong, crypto_failure_action=action.DISCARD
    )

    producer = pclient.create_producer(topic, encryption_key="app-key", crypto_key_reader=reader)
    producer.send(PLAINTEXT, properties={"k": "v"})

    msg = good.receive(TIMEOUT_MS)
    assert msg.data() == PLAINTEXT
    assert msg.properties() == {"k": "v"}
    good.acknowledge(msg)

    encrypted = raw.receive(TIMEOUT_MS)
    assert encrypted.data() != PLAINTEXT
    assert PLAINTEXT not in encrypted.data()
    assert len(encrypted.data()) >= len(PLAINTEXT)  # AES-GCM: ciphertext + 16-byte tag

    with pytest.raises(pulsar.Timeout):
        fail.receive(1500)
    with pytest.raises(pulsar.Timeout):
        discard.receive(1500)

    deadline = time.monotonic() + 10
    while backlog(standalone.web_url, topic, "discard") != 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert backlog(standalone.web_url, topic, "discard") == 0  # DISCARD acknowledged it
    assert backlog(standalone.web_url, topic, "fail") == 1  # FAIL left it in the backlog


def test_many_encrypted_messages_keep_order(pclient, topic, tmp_path) -> None:
    pub, priv = key_files(tmp_path, "rsa")
    reader = pulsar.CryptoKeyReader(pub, priv)
    consumer = pclient.subscribe(topic, "s", crypto_key_reader=reader)
    producer = pclient.create_producer(
        topic, encryption_key="k", crypto_key_reader=reader, batching_enabled=True, batching_max_messages=10
    )
    for i in range(30):
        producer.send_async(f"m{i}".encode(), None)
    producer.flush()
    got = [consumer.receive(TIMEOUT_MS).data().decode() for _ in range(30)]
    assert got == [f"m{i}" for i in range(30)]


def test_ecdsa_keys_are_refused_by_the_official_cpp_client(pclient, topic, tmp_path) -> None:
    pub, priv = key_files(tmp_path, "ec")
    producer = pclient.create_producer(
        topic, encryption_key="ec-key", crypto_key_reader=pulsar.CryptoKeyReader(pub, priv)
    )
    with pytest.raises(pulsar.CryptoError):
        producer.send(PLAINTEXT)
