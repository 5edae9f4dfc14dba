"""Durable cursor persistence: a cursor ledger plus a pointer in the metadata store.

Theory of operation (Pulsar's scheme): each durable cursor owns a *cursor
ledger*.  Every persist appends one entry -- the whole state as a
:mod:`snapshot <magnetar.managed_ledger.snapshot>` -- so the last entry is the
truth.  The cursor node ``/managed-ledgers/<name>/<cursor>``
(:class:`~magnetar.managed_ledger.metadata.CursorInfo`) points at the ledger
and holds the mark-delete as of the last pointer update.

* First persist, or the ledger is full (``cursor_max_entries_per_ledger``), or
  an add failed (fenced included: auto-recovery fences open ledgers it repairs): *switch*: create a new ledger, write the snapshot into it,
  CAS the pointer to it, then delete the old ledger.  A crash between those
  steps leaves the pointer at the old ledger: the cursor restarts from an older
  snapshot and some messages are redelivered -- never lost.
* If no ledger can be created, the state goes into the node itself, with at
  most ``MAX_RANGES_IN_METADATA`` ranges (Pulsar's
  managedLedgerMaxUnackedRangesToPersistInMetadataStore) and no ack sets.
* Recovery opens the cursor ledger with ``recovery=True`` (fencing a previous
  owner) and decodes its last entry, falling back to older entries if the last
  is unreadable, and to the node if the ledger is gone.  The recovered ledger
  is closed; the next persist switches to a new one.

A CAS failure on the node means another owner: ManagedLedgerFencedError.
"""

from __future__ import annotations

from magnetar.bookkeeper.api import BKError, NoSuchLedgerError, WriteHandle
from magnetar.managed_ledger.api import (
    ManagedLedgerConfig,
    ManagedLedgerFencedError,
    ManagedLedgerStorageError,
    Position,
)
from magnetar.managed_ledger.context import MLContext
from magnetar.managed_ledger.metadata import CursorInfo, cursor_path
from magnetar.managed_ledger.snapshot import CursorSnapshot, SnapshotError, decode, encode
from magnetar.metadata.api import BadVersion, MetadataError, NotFound

MAX_RANGES_IN_METADATA = 1000
_RECOVERY_SCAN_MAX = 16


class CursorStore:
    def __init__(self, ctx: MLContext, ml_name: str, cursor: str, info: CursorInfo, version: int) -> None:
        self._ctx = ctx
        self.path = cursor_path(ml_name, cursor)
        self.info = info
        self.version = version
        self._handle: WriteHandle | None = None
        self.ledger_entries = 0
        self.last_entry_id = -1
        self.snapshot_bytes_last = 0
        self.persists = 0

    @property
    def cursor_ledger_id(self) -> int:
        return self._handle.ledger_id if self._handle is not None else self.info.cursors_ledger_id

    # -- node ------------------------------------------------------------------------------------

    async def _put_info(self, info: CursorInfo) -> None:
        info.last_active_ms = self._ctx.clock.time_ms()
        try:
            stat = await self._ctx.store.put(self.path, info.encode(), self.version)
        except (BadVersion, NotFound) as e:
            raise ManagedLedgerFencedError(f"cursor node {self.path} changed by another owner") from e
        except MetadataError as e:
            raise ManagedLedgerStorageError(f"cannot write {self.path}: {e!r}") from e
        self.version = stat.version
        self.info = info

    async def create(self) -> None:
        self.version = -1
        await self._put_info(self.info)

    async def delete(self, config: ManagedLedgerConfig) -> None:
        lid = self.cursor_ledger_id
        await self._close_handle()
        try:
            await self._ctx.store.delete(self.path, self.version if self.version >= 0 else None)
        except NotFound:
            pass
        except BadVersion as e:
            raise ManagedLedgerFencedError(f"cursor node {self.path} changed by another owner") from e
        except MetadataError as e:
            raise ManagedLedgerStorageError(f"cannot delete {self.path}: {e!r}") from e
        if lid >= 0:
            await self._delete_ledger(lid)

    # -- recovery ----------------------------------------------------------------------------

    async def claim(self) -> None:
        """Rewrite the node with the version recovery read, so a previous owner's next
        pointer update fails its CAS (it is fenced) instead of ours."""
        await self._put_info(self.info)

    async def recover(self, password: bytes) -> CursorSnapshot:
        info = self.info
        fallback = CursorSnapshot(
            (info.mark_delete.ledger_id, info.mark_delete.entry_id),
            [((a.ledger_id, a.entry_id), (b.ledger_id, b.entry_id)) for a, b in info.individual_deleted],
            [],
            dict(info.properties),
        )
        lid = info.cursors_ledger_id
        if lid < 0:
            return fallback
        try:
            rh = await self._ctx.bookkeeper.open_ledger(lid, password=password, recovery=True)
        except NoSuchLedgerError:
            return fallback
        except BKError as e:
            raise ManagedLedgerStorageError(
                f"cannot recover cursor ledger {lid} of {self.path}: {e!r}"
            ) from e
        try:
            last = rh.last_add_confirmed
            for eid in range(last, max(-1, last - _RECOVERY_SCAN_MAX), -1):
                try:
                    (entry,) = await rh.read(eid, eid)
                    snap = decode(entry.data)
                except (BKError, SnapshotError, ValueError):
                    continue
                self.last_entry_id = eid
                self.snapshot_bytes_last = len(entry.data)
                return snap
        finally:
            try:
                await rh.close()
            except BKError:
                pass
        return fallback

    # -- persist -------------------------------------------------------------------------------

    async def persist(self, snap: CursorSnapshot, config: ManagedLedgerConfig) -> None:
        data = encode(snap)
        self.snapshot_bytes_last = len(data)
        self.persists += 1
        h = self._handle
        if h is not None and self.ledger_entries < config.cursor_max_entries_per_ledger:
            try:
                self.last_entry_id = await h.add_entry(data)
                self.ledger_entries += 1
                return
            except BKError:
                # Fenced too: auto-recovery fences an open ledger that lost a bookie, so a
                # fence is no proof of a new owner.  Switch to a new ledger below; a new owner
                # has rewritten the cursor node (claim), so the switch's CAS fences us then.
                pass
        try:
            await self._switch_ledger(data, snap, config)
        except ManagedLedgerFencedError:
            raise
        except (BKError, ManagedLedgerStorageError):
            await self._persist_in_metadata(snap)

    async def _switch_ledger(self, data: bytes, snap: CursorSnapshot, config: ManagedLedgerConfig) -> None:
        bk = self._ctx.bookkeeper
        new = await bk.create_ledger(
            config.ensemble_size,
            config.write_quorum,
            config.ack_quorum,
            password=config.password,
            custom_metadata={"application": b"pulsar", "component": b"managed-ledger-cursor"},
        )
        try:
            entry_id = await new.add_entry(data)
        except BKError:
            await _close_quiet(new)
            await self._delete_ledger(new.ledger_id)
            raise
        old = self.cursor_ledger_id
        info = CursorInfo(
            cursors_ledger_id=new.ledger_id,
            mark_delete=Position(*snap.mark_delete),
            properties=dict(snap.properties),
        )
        try:
            await self._put_info(info)
        except ManagedLedgerFencedError:
            await _close_quiet(new)
            await self._delete_ledger(new.ledger_id)
            raise
        await self._close_handle()
        self._handle = new
        self.ledger_entries = 1
        self.last_entry_id = entry_id
        if old >= 0 and old != new.ledger_id:
            await self._delete_ledger(old)

    async def _persist_in_metadata(self, snap: CursorSnapshot) -> None:
        old = self.cursor_ledger_id
        info = CursorInfo(
            cursors_ledger_id=-1,
            mark_delete=Position(*snap.mark_delete),
            individual_deleted=[
                (Position(*a), Position(*b)) for a, b in snap.ranges[:MAX_RANGES_IN_METADATA]
            ],
            properties=dict(snap.properties),
        )
        await self._put_info(info)
        await self._close_handle()
        if old >= 0:
            await self._delete_ledger(old)

    async def _close_handle(self) -> None:
        h, self._handle = self._handle, None
        if h is not None:
            await _close_quiet(h)

    async def _delete_ledger(self, ledger_id: int) -> None:
        try:
            await self._ctx.bookkeeper.delete_ledger(ledger_id)
        except BKError:
            pass

    async def close(self) -> None:
        await self._close_handle()


async def _close_quiet(h: WriteHandle) -> None:
    try:
        await h.close()
    except BKError:
        pass
