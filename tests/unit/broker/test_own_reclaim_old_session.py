"""A broker restarted with the same identity takes its bundles over from its earlier,
not yet expired session (Pulsar's lock revalidation), and never takes another broker's."""

from __future__ import annotations

from magnetar.broker.ownership.bundles import BundleRange, NamespaceBundle
from magnetar.broker.ownership.ownership import BundleOwnership, OwnerData, ownership_path
from magnetar.metadata.memory import MemoryMetadataServer
from magnetar.runtime import TaskSupervisor

BUNDLE = NamespaceBundle("public/default", BundleRange(0, 0x40000000))
ME = OwnerData("pulsar://127.0.0.1:6650", None, "http://127.0.0.1:8080")
OTHER = OwnerData("pulsar://127.0.0.1:6651", None, "http://127.0.0.1:8081")


def ownership(store, data: OwnerData, lost: list) -> BundleOwnership:  # noqa: ANN001
    return BundleOwnership(
        store, lambda: data, supervisor=TaskSupervisor("test"), on_lost=lambda b, r: lost.append(b)
    )


async def test_restarted_broker_reclaims_its_bundle_from_its_old_session() -> None:
    server = MemoryMetadataServer()
    old_store, new_store = server.session(), server.session()
    old_lost: list = []
    old = ownership(old_store, ME, old_lost)
    assert await old.try_acquire(BUNDLE)
    new = ownership(new_store, ME, [])
    assert not await new.try_acquire(BUNDLE)  # the old session's node is there
    assert await new.reclaim_from_old_session(BUNDLE)
    assert new.is_owned(BUNDLE)
    got = await new_store.get(ownership_path(BUNDLE))
    assert got is not None and got.stat.ephemeral_owner == new_store.session_id


async def test_another_brokers_bundle_is_never_reclaimed() -> None:
    server = MemoryMetadataServer()
    theirs, mine = server.session(), server.session()
    other = ownership(theirs, OTHER, [])
    assert await other.try_acquire(BUNDLE)
    me = ownership(mine, ME, [])
    assert not await me.reclaim_from_old_session(BUNDLE)
    got = await mine.get(ownership_path(BUNDLE))
    assert got is not None and OwnerData.from_json(got.value) == OTHER
