"""``brokerMaxConnections`` on a real standalone with the official client.

With the limit at 2, the broker closes a third connection at once (Pulsar's
ConnectionController): a third client cannot create its producer, while the first two
produce; when one of them goes, a new client gets in.  A noisy application cannot take
every connection of a broker its neighbours share beyond the operator's limit.
"""

from __future__ import annotations

import time

import pytest

from magnetar.testing.standalone import StandaloneProcess, broker_unavailable_reason

pulsar = pytest.importorskip("pulsar")
pytestmark = pytest.mark.skipif(broker_unavailable_reason() is not None, reason="the broker is not built yet")


def _client_with_producer(url: str, topic: str):  # noqa: ANN202
    client = pulsar.Client(url, operation_timeout_seconds=3, connection_timeout_ms=2_000)
    try:
        producer = client.create_producer(topic)
        producer.send(b"in")
        return client
    except Exception:
        client.close()
        raise


def test_broker_max_connections_refuses_the_one_too_many(tmp_path) -> None:  # type: ignore[no-untyped-def]
    conf = tmp_path / "standalone.conf"
    conf.write_text("brokerMaxConnections=2\n")
    with StandaloneProcess(tmp_path / "data", config_file=conf) as sa:
        topic = "persistent://public/default/connlimit"
        first = _client_with_producer(sa.broker_url, topic)
        second = _client_with_producer(sa.broker_url, topic)
        with pytest.raises(Exception):  # noqa: B017 - the client's words for a closed connection vary
            _client_with_producer(sa.broker_url, topic)
        first.close()
        deadline = time.monotonic() + 30
        while True:  # the broker sees the first connection go a moment later
            try:
                third = _client_with_producer(sa.broker_url, topic)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        assert "brokerMaxConnections (2) reached" in sa.log_tail(400)
        third.close()
        second.close()
