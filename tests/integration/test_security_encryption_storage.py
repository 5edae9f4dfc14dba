"""The broker stores and delivers end-to-end encryption metadata untouched (in-process standalone).

The official client produces an RSA-encrypted message; the test then reads the
stored entry straight from the topic's managed ledger and checks that

* the message metadata carries the client's ``encryption_keys`` (key name and
  encrypted data key) and ``encryption_param`` (the AES-GCM IV);
* the stored CRC32C, computed by the client over metadata + payload, still
  verifies -- so not one metadata or payload byte was changed;
* a consumer that cannot decrypt (CONSUME action) receives exactly the stored
  ciphertext, and a consumer with the key decrypts it.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from magnetar.broker.service.names import parse_topic
from magnetar.managed_ledger.api import Position
from magnetar.protocol.payload import parse_headers_and_payload
from magnetar.testing.standalone import broker_unavailable_reason, running_standalone

pulsar = pytest.importorskip("pulsar")
pytestmark = pytest.mark.skipif(
    broker_unavailable_reason() is not None, reason=str(broker_unavailable_reason())
)

PLAINTEXT = b"stored-but-never-readable-by-the-broker"


def _keys(directory) -> tuple[str, str]:
    key = rsa.generate_private_key(65537, 2048)
    pub, priv = directory / "k.pub.pem", directory / "k.priv.pem"
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


def _produce_and_consume(url: str, topic: str, pub: str, priv: str) -> tuple[bytes, bytes]:
    c = pulsar.Client(
        url, operation_timeout_seconds=10, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    )
    try:
        reader = pulsar.CryptoKeyReader(pub, priv)
        raw = c.subscribe(topic, "raw", crypto_failure_action=pulsar.ConsumerCryptoFailureAction.CONSUME)
        good = c.subscribe(topic, "good", crypto_key_reader=reader)
        producer = c.create_producer(
            topic, encryption_key="app-key", crypto_key_reader=reader, batching_enabled=False
        )
        producer.send(PLAINTEXT)
        return raw.receive(10_000).data(), good.receive(10_000).data()
    finally:
        c.close()


async def test_encryption_metadata_is_stored_and_delivered_untouched(tmp_path) -> None:
    pub, priv = _keys(tmp_path)
    topic = f"persistent://public/default/enc-{uuid.uuid4().hex[:8]}"
    async with running_standalone(tmp_path / "data") as s:
        delivered_raw, decrypted = await asyncio.to_thread(
            _produce_and_consume, s.broker_url, topic, pub, priv
        )
        assert decrypted == PLAINTEXT

        t = await s.broker_service.topics.get_topic(parse_topic(topic), create=False)
        entries = await t.ml.read_entries_from(Position(0, 0), 10)
        assert len(entries) == 1
        parsed = parse_headers_and_payload(entries[0].data, verify=False)

    assert parsed.has_checksum and parsed.checksum_ok  # the client's CRC over the stored bytes
    meta = parsed.metadata
    assert [k.key for k in meta.encryption_keys] == ["app-key"]
    assert len(meta.encryption_keys[0].value) == 256  # the data key, RSA-2048 encrypted
    assert len(meta.encryption_param) == 12  # AES-GCM IV
    assert parsed.payload != PLAINTEXT and PLAINTEXT not in parsed.payload
    assert delivered_raw == parsed.payload  # delivered exactly as stored
