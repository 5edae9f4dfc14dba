"""Cleanup: trimming consumed ledgers under the retention policy, and message TTL.

Theory of operation
-------------------
Trimming (Pulsar's ``internalTrimConsumedLedgers``): the *slowest* durable
cursor's mark-delete -- the persisted one, if it lags the in-memory one, so an
ack that could still be lost never frees a ledger -- decides which ledgers are consumed -- every ledger before
the one holding the first entry it still needs.  (Without durable cursors
every closed ledger counts as consumed.)  Walking consumed ledgers oldest
first, a ledger is deleted if retention no longer keeps it:

* its age (since it was closed) exceeds ``retention_time_ms`` (-1 = forever), or
* the managed ledger's size without it and the ones before it still exceeds
  ``retention_size_bytes`` (-1 = unbounded);

the walk stops at the first ledger retention keeps.  The ledger being written
is never deleted, so with size retention S the stored bytes stay within S plus
the current ledger.  Empty closed ledgers always go -- once BookKeeper agrees:
a ledger whose list count is 0 is dropped only if its closed metadata (opened
with recovery, which closes a ledger left open) has no entry either, or it no
longer exists.  One that does hold entries is kept, and never deleted, but its
entries stay invisible: the list count is what the writer had confirmed (see
:mod:`.writer`), so they are adds that failed to their callers -- typically an
add stranded on a lost bookie, recovered from the one copy that got it, and
already retried on the next ledger: counting it would deliver it twice.  A
warning names the ledger (an operator can read it).  The ledger list is
rewritten first (CAS), then the ledgers are deleted on the bookies (and from an
offloader); a crash in between leaks ledgers, never loses listed data.

Trims are coalesced: :func:`schedule` runs at most one trim per managed ledger
at a time and re-runs once if asked again meanwhile.  Cursors ask for a trim
when their mark-delete moves to another ledger.

TTL: :func:`expire_messages` moves a cursor's mark-delete to the newest entry
published at or before ``now - ttl`` (binary search over the backlog with the
caller's ``publish_time_of(data)``, assuming publish times grow with position,
as Pulsar does).  :func:`find_first_at_or_after` is the same search for
"reset cursor to time T".
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from magnetar.bookkeeper.api import BKError, NoSuchLedgerError
from magnetar.managed_ledger.api import ManagedLedgerError, Position
from magnetar.managed_ledger.context import timed_lock
from magnetar.managed_ledger.state import MLState

if TYPE_CHECKING:
    from magnetar.managed_ledger.cursor import ManagedCursorImpl
    from magnetar.managed_ledger.ledger import ManagedLedgerImpl

PublishTimeOf = Callable[[bytes], int]
log = logging.getLogger(__name__)


def schedule(ml: ManagedLedgerImpl) -> None:
    if ml.trim_task is not None:
        ml.trim_again = True
        return
    if ml.state in (MLState.CLOSED, MLState.FENCED) or ml.ctx.supervisor.closed:
        return

    async def run() -> None:
        try:
            while True:
                ml.trim_again = False
                await trim_consumed_ledgers(ml)
                if not ml.trim_again:
                    break
        except ManagedLedgerError:
            pass
        finally:
            ml.trim_task = None

    ml.trim_task = ml.ctx.supervisor.spawn(run(), name=f"trim-{ml.name}")


def _ledgers_to_delete(ml: ManagedLedgerImpl) -> list:
    ll, c = ml.ledger_list, ml.config
    cursors = ml.durable_cursors()
    slowest = min(cur.trim_position for cur in cursors) if cursors else ll.last_confirmed
    needed = ll.next_valid(slowest.next())
    now = ml.ctx.clock.time_ms()
    total = ll.total_size()
    size_deleted = 0
    out = []
    for info in ll.infos():
        lid = info.ledger_id
        if lid == ll.current_id or lid >= needed.ledger_id:
            break
        if info.entries == 0:
            if lid in ml.verified_empty:  # else BookKeeper could not tell yet: kept for now
                out.append(info)
            continue
        expired = c.retention_time_ms >= 0 and now - info.timestamp_ms >= c.retention_time_ms
        over_size = c.retention_size_bytes >= 0 and total - size_deleted > c.retention_size_bytes
        if not (expired or over_size):
            break
        out.append(info)
        size_deleted += info.size_bytes
    return out


async def _verify_empty_ledgers(ml: ManagedLedgerImpl) -> None:
    """Ask BookKeeper about every closed ledger the list counts empty (once per ledger):
    empty ones join ``ml.verified_empty`` (the trim may drop them); one holding entries joins
    ``ml.kept_unconfirmed`` and stays.  Under the op lock, so no ledger being created or rolled
    is opened (and fenced) here."""
    ll = ml.ledger_list
    for info in ll.infos():
        lid = info.ledger_id
        if lid == ll.current_id:
            break
        if info.entries != 0 or lid in ml.verified_empty or lid in ml.kept_unconfirmed:
            continue
        try:
            rh = await ml.ctx.bookkeeper.open_ledger(lid, password=ml.config.password, recovery=True)
        except NoSuchLedgerError:
            ml.verified_empty = ml.verified_empty | {lid}
            continue
        except BKError as e:
            log.info("%s: cannot check whether ledger %d is empty (%r): kept", ml.name, lid, e)
            continue
        lac = rh.last_add_confirmed
        try:
            await rh.close()
        except BKError:
            pass
        if lac < 0:
            ml.verified_empty = ml.verified_empty | {lid}
            continue
        ml.kept_unconfirmed = ml.kept_unconfirmed | {lid}
        log.warning(
            "%s: ledger %d is listed with no confirmed entry but BookKeeper closed it at entry %d "
            "(adds that failed to their callers): kept, not deleted; its entries stay unlisted",
            ml.name,
            lid,
            lac,
        )


async def trim_consumed_ledgers(ml: ManagedLedgerImpl) -> None:
    async with timed_lock(ml.op_lock):
        if ml.state in (MLState.CLOSED, MLState.FENCED, MLState.NONE):
            return
        await _verify_empty_ledgers(ml)
        doomed = _ledgers_to_delete(ml)
        if not doomed:
            return
        ll = ml.ledger_list
        for info in doomed:
            ll.remove(info.ledger_id)
        try:
            await ml._write_list()
        except ManagedLedgerError:
            if ml.state is not MLState.FENCED:
                for info in doomed:
                    ll.set(info)
            raise
        ml.ledgers_deleted += len(doomed)
    for info in doomed:
        ml.message_counts.drop(info.ledger_id)
        await ml.reader.drop_ledger(info.ledger_id)
        try:
            await ml.ctx.bookkeeper.delete_ledger(info.ledger_id)
        except BKError:
            pass
        await delete_offloaded_copy(ml, info)


async def delete_offloaded_copy(ml: ManagedLedgerImpl, info) -> None:  # noqa: ANN001
    """Delete a ledger's objects in tiered storage (complete or a half-written attempt)."""
    from magnetar.managed_ledger.offload_process import reader_for

    c = info.offload_context
    if c is None:
        return
    try:
        await reader_for(ml, info).delete_offloaded(info.ledger_id, c.uid, c.metadata())
    except Exception:  # noqa: BLE001 - an offloader is a plugin; a failed delete only leaks
        log.warning("deleting the offloaded copy of %s/%d failed", ml.name, info.ledger_id, exc_info=True)


async def _publish_time_at(ml: ManagedLedgerImpl, pos: Position, publish_time_of: PublishTimeOf) -> int:
    entry = await ml.reader.read_entry(pos, read_ahead=False)
    return int(publish_time_of(entry.data))


async def _first_index_after(
    ml: ManagedLedgerImpl, start: Position, count: int, pred_false_then_true: Callable[[int], bool], pt_of
) -> int:
    """Smallest i in [0, count) with pred(publish time of entry i) true (count if none)."""
    ll = ml.ledger_list
    lo, hi = 0, count
    while lo < hi:
        mid = (lo + hi) // 2
        if pred_false_then_true(await _publish_time_at(ml, ll.advance(start, mid), pt_of)):
            hi = mid
        else:
            lo = mid + 1
    return lo


async def find_first_at_or_after(
    ml: ManagedLedgerImpl, timestamp_ms: int, publish_time_of: PublishTimeOf
) -> Position:
    ll = ml.ledger_list
    start = ll.first_position()
    lac = ll.last_confirmed
    count = ll.count_between(ll.previous(start), lac) if start <= lac else 0
    i = await _first_index_after(ml, start, count, lambda t: t >= timestamp_ms, publish_time_of)
    return ll.advance(start, i) if i < count else lac.next()


async def expire_messages(cursor: ManagedCursorImpl, ttl_ms: int, publish_time_of: PublishTimeOf) -> bool:
    ml = cursor.ml
    ll = ml.ledger_list
    cutoff = ml.ctx.clock.time_ms() - ttl_ms
    md = cursor.mark_delete_position
    lac = ll.last_confirmed
    start = ll.next_valid(md.next())
    count = ll.count_between(md, lac)
    if count <= 0:
        return False
    i = await _first_index_after(ml, start, count, lambda t: t > cutoff, publish_time_of)
    if i == 0:
        return False
    await cursor.mark_delete(ll.advance(start, i - 1))
    return True
