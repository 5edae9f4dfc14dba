"""Decommissioning a bookie: its ledgers re-replicated elsewhere, then its identity removed.

Theory of operation (BookKeeper's ``bookkeeper shell decommissionbookie`` /
``BookKeeperAdmin.decommissionBookie``):

1. The bookie must already be stopped: a bookie still registered (writable or
   read-only) is refused, since it could take new ledgers while it is being
   drained.  Auto-recovery must be running (an auditor is elected: its
   election node exists), because its replication workers do the copying.
2. The audit is triggered at once rather than after ``lostBookieRecoveryDelay``:
   every ledger whose metadata names the bookie gets an under-replication mark
   listing it (:class:`~magnetar.bookkeeper.underreplication.UnderReplicationManager`,
   idempotent), and the workers copy its fragments to other bookies and rewrite
   the ensembles (the last fragment of an open ledger is fenced after
   ``openLedgerRereplicationGracePeriod``, as auto-recovery always does).
3. The pass is repeated every ``poll_s`` until no ledger's ensemble names the
   bookie (a ledger marked meanwhile and repaired, or a mark lost, is re-marked);
   past ``timeout_s`` it fails, saying how many ledgers still name it.
4. Then its cookie (the persistent half of its registration; the ephemeral
   half went with its session) is deleted, so the id cannot come back with its
   old disks -- a bookie started with that id must be formatted anew.

``progress`` is called after each pass with the ledgers that still name the bookie.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from magnetar.bookie.api import AVAILABLE_PATH, COOKIES_PATH, READONLY_PATH
from magnetar.bookkeeper.api import NoSuchLedgerError
from magnetar.bookkeeper.metadata import LedgerMetadataStore
from magnetar.bookkeeper.underreplication import AUDITOR_ELECTION_PATH, UnderReplicationManager
from magnetar.metadata.api import MetadataStore, NotFound


class DecommissionError(Exception):
    """The bookie cannot be decommissioned (still running, unknown, no auto-recovery, timeout)."""


@dataclass(frozen=True, slots=True)
class DecommissionResult:
    bookie_id: str
    ledgers_rereplicated: list[int]  # the ledgers that named the bookie when it began
    passes: int
    seconds: float


async def ledgers_naming(ledgers: LedgerMetadataStore, bookie_id: str) -> list[int]:
    """The ids of the ledgers with the bookie in some fragment's ensemble."""
    found = []
    for ledger_id in await ledgers.list_ids():
        try:
            md, _ = await ledgers.read(ledger_id)
        except NoSuchLedgerError:
            continue
        if any(bookie_id in ensemble for _, ensemble in md.ensembles):
            found.append(ledger_id)
    return found


async def _registered_as(store: MetadataStore, bookie_id: str) -> str | None:
    if await store.get(f"{READONLY_PATH}/{bookie_id}") is not None:
        return "read-only"
    if await store.get(f"{AVAILABLE_PATH}/{bookie_id}") is not None:
        return "writable"
    return None


async def decommission_bookie(
    store: MetadataStore,
    bookie_id: str,
    *,
    timeout_s: float = 600.0,
    poll_s: float = 1.0,
    progress: Callable[[list[int]], None] | None = None,
) -> DecommissionResult:
    started = time.monotonic()
    state = await _registered_as(store, bookie_id)
    if state is not None:
        raise DecommissionError(
            f"bookie {bookie_id} is still running (registered {state}): stop it first, then decommission it"
        )
    ledgers = LedgerMetadataStore(store)
    naming = await ledgers_naming(ledgers, bookie_id)
    has_cookie = await store.get(f"{COOKIES_PATH}/{bookie_id}") is not None
    if not naming and not has_cookie:
        raise DecommissionError(f"bookie {bookie_id} is unknown: no cookie and no ledger names it")
    if naming and await store.get(AUDITOR_ELECTION_PATH) is None:  # the elected auditor's node
        raise DecommissionError(
            "no auto-recovery is running to re-replicate its ledgers: start `magnetar autorecovery` "
            "or bookies with autoRecoveryDaemonEnabled=true"
        )
    marks = UnderReplicationManager(store)
    first, passes, left = list(naming), 0, naming
    while True:
        passes += 1
        if progress is not None:
            progress(left)
        if not left:
            break
        if time.monotonic() - started > timeout_s:
            raise DecommissionError(
                f"timed out after {timeout_s:g} s: {len(left)} ledgers still name {bookie_id} "
                f"({', '.join(map(str, left[:10]))}{'...' if len(left) > 10 else ''})"
            )
        now_ms = int(time.time() * 1000)
        for ledger_id in left:
            await marks.mark(ledger_id, [bookie_id], now_ms)
        await asyncio.sleep(poll_s)
        left = await ledgers_naming(ledgers, bookie_id)
    state = await _registered_as(store, bookie_id)
    if state is not None:
        raise DecommissionError(f"bookie {bookie_id} started again (registered {state}) while draining")
    try:
        await store.delete(f"{COOKIES_PATH}/{bookie_id}")
    except NotFound:
        pass
    return DecommissionResult(bookie_id, first, passes, time.monotonic() - started)
