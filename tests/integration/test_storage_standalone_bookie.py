"""The standalone's bookie is the whole bookie: cookie and disk checks included.

In-process standalones under a temporary data dir: the embedded bookie writes
its cookie (metadata and every directory) on first start and checks it on the
next; with ``diskUsageThreshold`` below the disk's real usage the disk checker
turns it read-only at once and it registers under the read-only path, where
the ledger client does not place new ledgers.  With a disk whose reported
usage the test controls, the standalone goes read-only when the disk fills
(the official client cannot produce to a new topic) and writable again when
space returns (it can).
"""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from magnetar.app.config import load_standalone_config
from magnetar.app.storage import open_standalone_storage
from magnetar.bookie.api import AVAILABLE_PATH, READONLY_PATH
from magnetar.bookie.disk import DiskUsage, RealDisk
from magnetar.runtime import RealClock, Rng
from magnetar.testing.standalone import running_standalone

pulsar = pytest.importorskip("pulsar")


async def test_cookie_is_written_and_checked_on_restart(tmp_path) -> None:  # type: ignore[no-untyped-def]
    data = tmp_path / "data"
    async with running_standalone(data) as sa:
        bookie = sa._storage.parts["bookie_app"]  # type: ignore[attr-defined]
        assert bookie.gc is not None and bookie.disk_checker is not None
        cookie = await sa._storage.metadata_store.get(bookie.registration.cookie_path)  # type: ignore[attr-defined]
        assert cookie is not None
    for sub in ("journal", "ledgers"):
        assert (data / "bookie" / sub / "current" / "cookie").is_file()
    async with running_standalone(data) as sa:  # same cookie on both sides: starts
        assert sa._storage.parts["bookie"].read_only is False  # type: ignore[attr-defined]


async def test_full_disk_makes_the_standalone_bookie_read_only(tmp_path) -> None:  # type: ignore[no-untyped-def]
    props = {"diskUsageThreshold": "0.000001", "diskUsageLwmThreshold": "0.0000001"}
    async with running_standalone(tmp_path / "data", props) as sa:
        storage = sa._storage  # type: ignore[attr-defined]
        assert storage.parts["bookie"].read_only is True
        readonly = await storage.metadata_store.children(READONLY_PATH)
        assert storage.parts["bookie"].bookie_id in readonly
        writable = [c for c in await storage.metadata_store.children(AVAILABLE_PATH) if c != "readonly"]
        assert storage.parts["bookie"].bookie_id not in writable


class _DialDisk(RealDisk):
    """The real file system, but the usage it reports is the test's to set."""

    used = 0.5

    def usage(self, path: str) -> DiskUsage:
        return DiskUsage(total_bytes=1_000_000, free_bytes=int(1_000_000 * (1 - self.used)))


def _produce(url: str, topic: str) -> str:
    client = pulsar.Client(url, operation_timeout_seconds=3)
    try:
        producer = client.create_producer(topic, send_timeout_millis=3000)
        producer.send(b"x")
        return "ok"
    except Exception as exc:  # the official client's own error types
        return type(exc).__name__
    finally:
        client.close()


async def _listed(web_url: str) -> list[dict]:
    async with httpx.AsyncClient(base_url=web_url) as http:
        return (await http.get("/admin/v2/bookies/all")).json()["bookies"]


async def _wait(predicate, timeout_s: float) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def test_read_only_when_full_and_writable_when_space_returns(tmp_path) -> None:  # type: ignore[no-untyped-def]
    disk = _DialDisk()
    props = {"diskCheckInterval": "100", "diskUsageThreshold": "0.95", "diskUsageLwmThreshold": "0.90"}
    config = load_standalone_config(None, data_dir=tmp_path / "data", overrides=props)
    stack = await open_standalone_storage(config, clock=RealClock(), rng=Rng(1), disk=disk)
    async with running_standalone(tmp_path / "data", props, storage=stack) as sa:
        storage = stack.parts["bookie"]
        assert await asyncio.to_thread(_produce, sa.broker_url, "persistent://public/default/before") == "ok"
        assert await _listed(sa.web_url) == [
            {"bookieId": storage.bookie_id, "readOnly": False, "totalSpace": 1_000_000, "freeSpace": 500_000}
        ]
        disk.used = 0.97
        await _wait(lambda: storage.read_only, 5)
        assert storage.bookie_id in await stack.metadata_store.children(READONLY_PATH)
        # The admin API (and the console's bookies view) shows the state and the space that caused it.
        assert await _listed(sa.web_url) == [
            {"bookieId": storage.bookie_id, "readOnly": True, "totalSpace": 1_000_000, "freeSpace": 30_000}
        ]
        refused = await asyncio.to_thread(_produce, sa.broker_url, "persistent://public/default/full")
        assert refused != "ok"
        disk.used = 0.93  # between the thresholds: still read-only (no flapping)
        await asyncio.sleep(0.5)
        assert storage.read_only
        disk.used = 0.5
        await _wait(lambda: not storage.read_only, 5)
        assert await asyncio.to_thread(_produce, sa.broker_url, "persistent://public/default/after") == "ok"
    await stack.aclose()
