"""When and how a managed ledger's ledgers move to tiered storage, and when BookKeeper lets go.

Theory of operation
-------------------
Offloading one ledger (:func:`offload_one`) is three steps, each durable
before the next:

1. record a fresh uid in the ledger's offload context (``complete: false``),
   with a CAS of the ledger list -- so a crash in step 2 leaves a trace: the
   next attempt finds the stale uid and deletes its partial objects first;
2. copy the ledger through the offloader, which writes and *verifies* the
   objects (:mod:`.offload_blob`);
3. mark the context ``complete`` (and the ledger ``isOffloaded``): from now
   on reads of that ledger go to the tier.

Nothing is deleted from the bookies in these steps.  :func:`delete_bk_copies`
deletes the BookKeeper copy of a complete offload once
``managedLedgerOffloadDeletionLagMs`` has passed since it completed (a
negative lag: never), after opening the offloaded copy again (the index
checks out, the data object has its length, the entry count matches the
list); then the context says ``bookkeeperDeleted``.

Who runs it: :func:`schedule` (after every rollover, and from the factory's
periodic check) starts an automatic run when the bytes still on the bookies
exceed ``offloadThresholdInBytes`` -- keeping the newest ledgers whose sizes
add up to at most the threshold, offloading the older ones -- or when closed
ledgers are older than ``offloadThresholdInSeconds``.  The ledger being written
is never offloaded.  :func:`trigger` is the admin's ``PUT .../offload``.  One
run at a time per managed ledger; its progress is the managed ledger's
:class:`OffloadState` (``NOT_RUN``/``RUNNING``/``SUCCESS``/``ERROR`` with the
error), which ``GET .../offload`` shows.  A failed automatic run is retried by
a later :func:`schedule`, after an exponential backoff (1 s .. 5 min).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from magnetar.bookkeeper.api import BKError, NoSuchLedgerError
from magnetar.managed_ledger.api import LedgerInfo, ManagedLedgerError, ManagedLedgerStorageError, Position
from magnetar.managed_ledger.context import timed_lock
from magnetar.managed_ledger.offload import DRIVERS, LedgerOffloader, OffloadContext, OffloadError
from magnetar.managed_ledger.state import MLState

if TYPE_CHECKING:
    from magnetar.managed_ledger.ledger import ManagedLedgerImpl

log = logging.getLogger(__name__)

RETRY_BACKOFF_MIN_S = 1.0
RETRY_BACKOFF_MAX_S = 300.0


class OffloadStatus(enum.Enum):
    NOT_RUN = "NOT_RUN"
    RUNNING = "RUNNING"
    SUCCESS = "SUCCESS"
    ERROR = "ERROR"


class OffloadInProgressError(ManagedLedgerError):
    """An offload of this managed ledger is already running."""


@dataclass(slots=True)
class OffloadState:
    """A managed ledger's offload progress (owned by the managed ledger).  A ledger that never
    offloaded shows :data:`IDLE` (shared, read-only); ``ManagedLedgerImpl.offload_progress()``
    gives it its own on the first change."""

    status: OffloadStatus = OffloadStatus.NOT_RUN
    last_error: str = ""
    first_unoffloaded: Position | None = None
    task: asyncio.Task[None] | None = None
    failures: int = 0  # in a row (the retry backoff); reset by a success
    errors_total: int = 0  # every failed run (brk_ledgeroffloader_offload_error)
    retry_at_mono: float = 0.0
    last_success_ms: int = 0
    last_failure_ms: int = 0
    offloaded_ledgers: int = 0
    offloaded_bytes: int = 0
    rerun: bool = False  # schedule() was called while a run was in progress
    copying: bool = False  # the running task copies ledgers (else it only deletes lagged copies)
    pending_before: Position | None = None  # an admin trigger waiting for a delete-only run

    def to_json(self) -> dict:
        p = self.first_unoffloaded or Position(-1, -1)
        return {
            "status": self.status.value,
            "lastError": self.last_error,
            "firstUnoffloadedMessage": {
                "ledgerId": p.ledger_id,
                "entryId": p.entry_id,
                "partitionIndex": -1,
                "batchIndex": -1,
            },
        }


class _ReadOnlyOffloadState(OffloadState):
    __slots__ = ()

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("the idle offload state is shared: change ManagedLedgerImpl.offload_progress()")


IDLE = OffloadState()
IDLE.__class__ = _ReadOnlyOffloadState  # every field at its default, never changed


# -- which offloader --------------------------------------------------------------------------


def writer_for(ml: ManagedLedgerImpl) -> LedgerOffloader | None:
    """The offloader new offloads of ``ml`` go to: its policies' driver, else the factory's."""
    p = ml.config.offload_policies
    if p.enabled and ml.ctx.offloaders is not None:
        return ml.ctx.offloaders.for_policies(p)
    return ml.ctx.offloader


def reader_for(ml: ManagedLedgerImpl, info: LedgerInfo) -> LedgerOffloader:
    """The offloader that holds ``info``'s objects (named by its context's driver metadata)."""
    c = info.offload_context
    if c is not None and c.driver_name in DRIVERS and ml.ctx.offloaders is not None:
        return ml.ctx.offloaders.for_context(c, ml.config.offload_policies)
    if ml.ctx.offloader is not None:
        return ml.ctx.offloader
    raise OffloadError(f"no offloader configured to read ledger {info.ledger_id} of {ml.name}")


# -- one ledger ---------------------------------------------------------------------------------


async def _update(
    ml: ManagedLedgerImpl, ledger_id: int, fn: Callable[[LedgerInfo], LedgerInfo]
) -> LedgerInfo:
    """Replace a ledger's info and CAS the list (restored on failure)."""
    async with timed_lock(ml.op_lock):
        if ml.state in (MLState.CLOSED, MLState.FENCED, MLState.NONE):
            raise ManagedLedgerError(f"{ml.name} is {ml.state.value}: offload stopped")
        info = ml.ledger_list.get(ledger_id)
        if info is None:
            raise ManagedLedgerError(f"ledger {ledger_id} of {ml.name} was deleted meanwhile")
        new = fn(info)
        ml.ledger_list.set(new)
        try:
            await ml._write_list()
        except ManagedLedgerError:
            if ml.state is not MLState.FENCED:
                ml.ledger_list.set(info)
            raise
        return new


async def offload_one(ml: ManagedLedgerImpl, ledger_id: int, *, delete_from_bookkeeper: bool = False) -> None:
    info = ml.ledger_list.get(ledger_id)
    if info is None:
        raise ManagedLedgerError(f"{ml.name}: ledger {ledger_id} is not in the ledger list")
    if ledger_id in (ml.ledger_list.current_id, _newest(ml)):
        # The newest ledger stays on the bookies even when closed (a terminated topic): reopening
        # a managed ledger recovers its last ledger from the bookies.
        raise ManagedLedgerError(f"{ml.name}: ledger {ledger_id} is the newest (or still being written)")
    if not info.offloaded:
        off = writer_for(ml)
        if off is None:
            raise ManagedLedgerError(f"{ml.name}: no offloader configured")
        stale = info.offload_context
        if stale is not None:  # an earlier attempt died half-way: remove what it wrote
            try:
                await reader_for(ml, info).delete_offloaded(ledger_id, stale.uid, stale.metadata())
            except OffloadError as e:
                log.info("removing a stale offload of %s/%d failed: %s", ml.name, ledger_id, e)
        uid = str(uuid.uuid4())
        ctx = OffloadContext(
            uid, driver_name=off.driver_name, driver_metadata=tuple(sorted(off.driver_metadata().items()))
        )
        await _update(ml, ledger_id, lambda i: replace(i, offload_context=ctx))
        try:
            handle = await ml.ctx.bookkeeper.open_ledger(
                ledger_id, password=ml.config.password, recovery=False
            )
        except BKError as e:
            raise ManagedLedgerStorageError(f"cannot open ledger {ledger_id} to offload: {e!r}") from e
        try:
            if handle.last_add_confirmed != info.entries - 1:
                raise ManagedLedgerStorageError(
                    f"ledger {ledger_id}: bookies have {handle.last_add_confirmed + 1} entries, list {info.entries}"
                )
            await off.offload(handle, uid, {"ManagedLedgerName": ml.name})
        finally:
            try:
                await handle.close()
            except BKError:
                pass
        done = replace(ctx, complete=True, timestamp_ms=ml.ctx.clock.time_ms())
        try:
            await _update(ml, ledger_id, lambda i: replace(i, offloaded=True, offload_context=done))
        except ManagedLedgerError:
            if ml.ledger_list.get(ledger_id) is None:  # trimmed meanwhile: the objects are orphans
                await off.delete_offloaded(ledger_id, uid, done.metadata())
            raise
        await ml.reader.drop_ledger(ledger_id)
        st = ml.offload_progress()
        st.offloaded_ledgers += 1
        st.offloaded_bytes += info.size_bytes
    if delete_from_bookkeeper:
        await delete_bk_copy(ml, ledger_id)


async def delete_bk_copy(ml: ManagedLedgerImpl, ledger_id: int) -> None:
    """Delete a ledger's BookKeeper copy once its offloaded copy checks out."""
    info = ml.ledger_list.get(ledger_id)
    if info is None or not info.offloaded or info.offload_context is None:
        raise ManagedLedgerError(f"ledger {ledger_id} of {ml.name} has no complete offloaded copy")
    c = info.offload_context
    h = await reader_for(ml, info).read_offloaded(ledger_id, c.uid, c.metadata())
    try:
        if h.last_add_confirmed != info.entries - 1:
            raise OffloadError(
                f"offloaded ledger {ledger_id} has {h.last_add_confirmed + 1} entries, list {info.entries}"
            )
    finally:
        await h.close()
    await ml.reader.drop_ledger(ledger_id)
    try:
        await ml.ctx.bookkeeper.delete_ledger(ledger_id)
    except NoSuchLedgerError:
        pass
    except BKError as e:
        raise ManagedLedgerStorageError(f"cannot delete ledger {ledger_id} from the bookies: {e!r}") from e
    await _update(ml, ledger_id, lambda i: replace(i, offload_context=replace(c, bookkeeper_deleted=True)))


async def delete_bk_copies(ml: ManagedLedgerImpl) -> int:
    """Delete the BookKeeper copies whose deletion lag has passed; how many went."""
    lag = ml.config.offload_policies.deletion_lag_ms
    if lag < 0:
        return 0
    now = ml.ctx.clock.time_ms()
    n = 0
    for info in ml.ledger_list.infos():
        c = info.offload_context
        if info.offloaded and c is not None and not c.bookkeeper_deleted and now - c.timestamp_ms >= lag:
            await delete_bk_copy(ml, info.ledger_id)
            n += 1
    return n


# -- runs ---------------------------------------------------------------------------------------


def _newest(ml: ManagedLedgerImpl) -> int:
    ids = ml.ledger_list.ids()
    return ids[-1] if ids else -1


def bytes_on_bookies(ml: ManagedLedgerImpl) -> int:
    ll = ml.ledger_list
    total = ll.current_size
    for info in ll.infos():
        c = info.offload_context
        if info.ledger_id != ll.current_id and not (c is not None and c.bookkeeper_deleted):
            total += info.size_bytes
    return total


def auto_candidate(ml: ManagedLedgerImpl) -> Position | None:
    """Offload every closed ledger before the returned position (None: nothing to do)."""
    p = ml.config.offload_policies
    ll = ml.ledger_list
    closed = [i for i in ll.infos() if i.ledger_id not in (ll.current_id, _newest(ml))]
    keep_from = None
    if p.threshold_bytes >= 0:
        kept = ll.current_size
        for info in reversed(closed):
            kept += info.size_bytes
            if kept > p.threshold_bytes:
                keep_from = info.ledger_id + 1  # this one and the older ones go
                break
    if p.threshold_s >= 0:
        cutoff = ml.ctx.clock.time_ms() - p.threshold_s * 1000
        old = [i.ledger_id + 1 for i in closed if i.timestamp_ms <= cutoff]
        if old:
            keep_from = max(keep_from or 0, max(old))
    if keep_from is None:
        return None
    todo = [i for i in closed if i.ledger_id < keep_from and not i.offloaded and i.entries > 0]
    return Position(keep_from, 0) if todo else None


async def offload_prefix(ml: ManagedLedgerImpl, before: Position) -> Position:
    """Offload every closed, non-empty ledger with an id below ``before``'s; the first
    position not offloaded."""
    ll = ml.ledger_list
    for info in ll.infos():
        if info.ledger_id >= before.ledger_id or info.ledger_id in (ll.current_id, _newest(ml)):
            break
        if info.entries > 0 and not info.offloaded:
            await offload_one(ml, info.ledger_id)
    for info in ll.infos():
        if not info.offloaded and info.entries > 0:
            return Position(info.ledger_id, 0)
    return ll.last_confirmed.next()


def _start(ml: ManagedLedgerImpl, before: Position, *, copies: bool = True) -> None:
    """Run in the background; ``copies=False``: only lagged BookKeeper deletes, which leave
    the status alone unless they fail."""
    st = ml.offload_progress()
    if copies:
        st.status = OffloadStatus.RUNNING
        st.last_error = ""

    async def run() -> None:
        try:
            st.first_unoffloaded = await offload_prefix(ml, before)
            await delete_bk_copies(ml)
        except asyncio.CancelledError:
            st.status, st.last_error = OffloadStatus.ERROR, "offload cancelled (managed ledger closed)"
            raise
        except (OffloadError, ManagedLedgerError) as e:
            _failed(ml, str(e))
        except Exception as e:  # noqa: BLE001 - an offloader is a plugin: report, don't crash the owner
            log.exception("offload of %s failed", ml.name)
            _failed(ml, f"{type(e).__name__}: {e}")
        else:
            st.failures = 0
            if copies:
                st.status = OffloadStatus.SUCCESS
                st.last_success_ms = ml.ctx.clock.time_ms()
        finally:
            st.task = None
            st.copying = False
        if st.pending_before is not None:
            before_next, st.pending_before = st.pending_before, None
            _start(ml, before_next)
            return
        if st.rerun and st.failures == 0:  # ledgers rolled meanwhile
            st.rerun = False
            schedule(ml)

    st.rerun = False
    st.copying = copies
    st.task = ml.ctx.supervisor.spawn(run(), name=f"offload-{ml.name}")


def _failed(ml: ManagedLedgerImpl, error: str) -> None:
    st = ml.offload_progress()
    st.status, st.last_error = OffloadStatus.ERROR, error
    st.failures += 1
    st.errors_total += 1
    st.last_failure_ms = ml.ctx.clock.time_ms()
    backoff = min(RETRY_BACKOFF_MAX_S, RETRY_BACKOFF_MIN_S * 2 ** (st.failures - 1))
    st.retry_at_mono = ml.ctx.clock.monotonic() + backoff
    log.warning("offload of %s failed (retry in %.0f s): %s", ml.name, backoff, error)


def trigger(ml: ManagedLedgerImpl, before: Position) -> None:
    """Admin trigger: offload the ledgers before ``before`` in the background."""
    st = ml.offload_state
    if st.copying or st.pending_before is not None:
        raise OffloadInProgressError(f"offload of {ml.name} is already running")
    if writer_for(ml) is None:
        raise ManagedLedgerError("tiered storage is not configured (managedLedgerOffloadDriver)")
    if st.task is not None:  # lagged BookKeeper deletes are running: offload right after them
        st = ml.offload_progress()
        st.pending_before = before
        st.status, st.last_error = OffloadStatus.RUNNING, ""
        return
    _start(ml, before)


def schedule(ml: ManagedLedgerImpl) -> None:
    """Automatic offload and BookKeeper deletion, if the policies ask and none is running."""
    st = ml.offload_state
    if st.task is not None:
        ml.offload_progress().rerun = True
        return
    if ml.state in (MLState.CLOSED, MLState.FENCED, MLState.NONE):
        return
    if ml.ctx.supervisor.closed or ml.ctx.clock.monotonic() < st.retry_at_mono:
        return
    try:
        if writer_for(ml) is None and not any(i.offloaded for i in ml.ledger_list.infos()):
            return
    except OffloadError as e:
        _failed(ml, str(e))
        return
    before = auto_candidate(ml) if writer_for(ml) is not None else None
    if before is not None:
        _start(ml, before)
        return
    if _deletion_due(ml):
        _start(ml, Position(-1, -1), copies=False)  # only the lagged BookKeeper deletes


def _deletion_due(ml: ManagedLedgerImpl) -> bool:
    lag = ml.config.offload_policies.deletion_lag_ms
    if lag < 0:
        return False
    now = ml.ctx.clock.time_ms()
    return any(
        i.offloaded
        and i.offload_context is not None
        and not i.offload_context.bookkeeper_deleted
        and now - i.offload_context.timestamp_ms >= lag
        for i in ml.ledger_list.infos()
    )
