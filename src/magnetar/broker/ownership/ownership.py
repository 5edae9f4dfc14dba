"""Bundle ownership: one ephemeral lock per bundle, ``/namespace/{tenant}/{ns}/{range}``.

Theory of operation: a broker owns a bundle while it holds a
:class:`~magnetar.metadata.coordination.lock.DistributedLock` on the bundle's
path; the lock's value is Pulsar's NamespaceEphemeralData (``nativeUrl``,
``nativeUrlTls``, ``httpUrl``, ``httpUrlTls``, ``disabled``), which is what
any other broker reads to redirect a lookup to the owner.  At most one
session holds the node, so a bundle has at most one owner; the node dies with
the owner's session (kill -9, a partition longer than the session timeout).

A lock is won on the strength of a bundle computed from a possibly stale copy of the
namespace's boundaries; ``validate`` (the namespace service's fresh read) decides, after the
win and before the bundle counts as owned, whether that range still exists -- otherwise the
lock is given back and the attempt reports False.

Our side keeps, per bundle we hold, the lock object; per bundle being
acquired, one future (concurrent lookups of one bundle share one attempt).
When a lock is LOST (session expired, node deleted) the bundle leaves the
owned set at once and ``on_lost(bundle, reason)`` runs: the namespace service
closes the bundle's topics there -- from that instant this broker must not
serve them; a new owner's managed-ledger recovery fences any write it still
has in flight.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from magnetar.broker.ownership.bundles import NamespaceBundle
from magnetar.metadata.api import BadVersion, MetadataStore, NotFound
from magnetar.metadata.coordination.lock import DistributedLock, LockLost
from magnetar.runtime import TaskSupervisor

log = logging.getLogger(__name__)

OWNERSHIP_ROOT = "/namespace"


@dataclass(frozen=True, slots=True)
class OwnerData:
    """Pulsar's NamespaceEphemeralData: how clients and brokers reach a bundle's owner."""

    native_url: str | None
    native_url_tls: str | None
    http_url: str
    http_url_tls: str | None = None
    disabled: bool = False

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "nativeUrl": self.native_url,
                "nativeUrlTls": self.native_url_tls,
                "httpUrl": self.http_url,
                "httpUrlTls": self.http_url_tls,
                "disabled": self.disabled,
                "advertisedListeners": {},
            }
        ).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> OwnerData | None:
        try:
            doc = json.loads(raw)
        except ValueError:
            return None
        if not isinstance(doc, dict) or not doc.get("httpUrl"):
            return None
        return cls(
            native_url=doc.get("nativeUrl"),
            native_url_tls=doc.get("nativeUrlTls"),
            http_url=doc["httpUrl"],
            http_url_tls=doc.get("httpUrlTls"),
            disabled=bool(doc.get("disabled")),
        )


def ownership_path(bundle: NamespaceBundle) -> str:
    return f"{OWNERSHIP_ROOT}/{bundle.namespace}/{bundle.range.name}"


class BundleOwnership:
    def __init__(
        self,
        store: MetadataStore,
        self_data: Callable[[], OwnerData],
        *,
        supervisor: TaskSupervisor,
        on_lost: Callable[[NamespaceBundle, str], None],
        on_change: Callable[[], None] | None = None,
        validate: Callable[[NamespaceBundle], Awaitable[bool]] | None = None,
    ) -> None:
        self._store = store
        self._validate = validate
        self._self_data = self_data
        self._supervisor = supervisor
        self._on_lost = on_lost
        self._on_change = on_change or (lambda: None)
        self._held: dict[NamespaceBundle, DistributedLock] = {}
        self._acquiring: dict[NamespaceBundle, asyncio.Future[bool]] = {}
        self.counters = {"acquired": 0, "released": 0, "lost": 0, "busy": 0, "stale": 0}

    # -- queries ---------------------------------------------------------------------------------
    def is_owned(self, bundle: NamespaceBundle) -> bool:
        lock = self._held.get(bundle)
        return lock is not None and lock.held

    def owned(self) -> list[NamespaceBundle]:
        return sorted(b for b, lock in self._held.items() if lock.held)

    async def owner_of(self, bundle: NamespaceBundle) -> OwnerData | None:
        """The owner's data (ours when we hold it), or None when nobody owns the bundle."""
        if self.is_owned(bundle):
            return self._self_data()
        got = await self._store.get(ownership_path(bundle))
        return OwnerData.from_json(got.value) if got is not None else None

    async def settled_here(self, bundle: NamespaceBundle) -> bool:
        """After our own lock data was read from the store: wait for our acquisition of
        ``bundle`` if one is running (its lock node exists before it is in the held set);
        True when we own the bundle then."""
        pending = self._acquiring.get(bundle)
        if pending is not None:
            try:
                return await asyncio.shield(pending)
            except Exception:  # the acquisition failed: not ours
                return False
        return self.is_owned(bundle)

    async def reclaim_from_old_session(self, bundle: NamespaceBundle) -> bool:
        """A restart with the same identity: the bundle's lock node carries our own data but
        belongs to an earlier session of ours (a killed process whose session has not expired
        yet).  As Pulsar's lock revalidation does, delete that node (on its version) and take
        the bundle afresh instead of waiting for the expiry.  True when we own it afterwards."""
        if self.is_owned(bundle) or bundle in self._acquiring:
            return await self.settled_here(bundle)
        got = await self._store.get(ownership_path(bundle))
        if got is not None:
            data = OwnerData.from_json(got.value)
            if data is None or data.http_url != self._self_data().http_url:
                return False  # someone else's: never taken
            if got.stat.ephemeral_owner == self._store.session_id:
                return False  # our own live session's node: an acquisition or release of ours
            try:
                await self._store.delete(ownership_path(bundle), expected_version=got.stat.version)
            except (BadVersion, NotFound):
                pass  # changed meanwhile: the acquisition below decides
            log.info("bundle %s: lock of an earlier session of this broker removed", bundle.name)
        return await self.try_acquire(bundle)

    # -- acquire / release -----------------------------------------------------------------------
    async def try_acquire(self, bundle: NamespaceBundle) -> bool:
        """Takes the bundle if nobody holds it; True when we own it afterwards."""
        if self.is_owned(bundle):
            return True
        pending = self._acquiring.get(bundle)
        if pending is not None:
            return await asyncio.shield(pending)
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._acquiring[bundle] = fut
        try:
            ok = await self._acquire(bundle)
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # retrieved: the waiters re-raise it
            raise
        else:
            fut.set_result(ok)
        finally:
            del self._acquiring[bundle]
        return ok

    async def _acquire(self, bundle: NamespaceBundle) -> bool:
        lock = DistributedLock(
            self._store, ownership_path(bundle), self._self_data().to_json(), supervisor=self._supervisor
        )
        if not await lock.try_acquire():
            self.counters["busy"] += 1
            await lock.release()
            return False
        if self._validate is not None:
            try:
                valid = await self._validate(bundle)
            except BaseException:
                await lock.release()
                raise
            if not valid:  # asked on a stale copy of the boundaries: that range is gone
                self.counters["stale"] += 1
                await lock.release()
                log.info(
                    "bundle %s: no longer a bundle of its namespace (split?); lock given back", bundle.name
                )
                return False
        lock.add_lost_listener(lambda event: self._lost(bundle, lock, event))
        self._held[bundle] = lock
        self.counters["acquired"] += 1
        log.info("bundle %s: owned", bundle.name)
        self._on_change()
        return True

    def _lost(self, bundle: NamespaceBundle, lock: DistributedLock, event: LockLost) -> None:
        if self._held.get(bundle) is not lock:
            return
        del self._held[bundle]
        self.counters["lost"] += 1
        log.warning("bundle %s: ownership lost (%s)", bundle.name, event.reason)
        self._on_change()
        self._on_lost(bundle, event.reason)

    async def release(self, bundle: NamespaceBundle) -> None:
        lock = self._held.pop(bundle, None)
        if lock is None:
            return
        await lock.release()
        self.counters["released"] += 1
        log.info("bundle %s: released", bundle.name)
        self._on_change()

    async def release_all(self) -> None:
        for bundle in list(self._held):
            await self.release(bundle)
