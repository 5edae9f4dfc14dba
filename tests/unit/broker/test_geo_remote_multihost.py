"""The replicator's remote producer over a multi-host service URL (a cluster registered with
every broker): each host is tried in turn until one answers (issue 18)."""

from __future__ import annotations

import pytest

from magnetar.broker.replication.remote import RemoteProducer, RemoteProducerError
from magnetar.runtime import RealClock


def producer(url: str) -> RemoteProducer:
    return RemoteProducer(RealClock(), url, "persistent://t/ns/x", "pulsar.repl.A")


async def test_the_next_host_is_tried_when_one_is_down(monkeypatch: pytest.MonkeyPatch) -> None:
    tried: list[str] = []

    async def connect(url: str) -> None:
        tried.append(url)
        if url.endswith(":1"):
            raise RemoteProducerError(f"cannot connect to {url}: refused")

    p = producer("pulsar://127.0.0.1:1,127.0.0.1:2")
    monkeypatch.setattr(p, "_connect", connect)
    assert await p._connect_any(p.service_url) == "pulsar://127.0.0.1:2"
    assert tried == ["pulsar://127.0.0.1:1", "pulsar://127.0.0.1:2"]


async def test_every_host_down_is_the_last_error() -> None:
    p = producer("pulsar://127.0.0.1:1,127.0.0.1:9")  # nothing listens on either
    with pytest.raises(RemoteProducerError, match="127.0.0.1:9"):
        await p._connect_any(p.service_url)
