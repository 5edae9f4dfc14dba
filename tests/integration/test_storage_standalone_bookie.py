"""The standalone's bookie is the whole bookie: cookie and disk checks included.

In-process standalones under a temporary data dir: the embedded bookie writes
its cookie (metadata and every directory) on first start and checks it on the
next; with ``diskUsageThreshold`` below the disk's real usage the disk checker
turns it read-only at once and it registers under the read-only path, where
the ledger client does not place new ledgers.
"""

from __future__ import annotations

from magnetar.bookie.api import AVAILABLE_PATH, READONLY_PATH
from magnetar.testing.standalone import running_standalone


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
