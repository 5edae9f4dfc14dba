"""The write handle: pipelined adds with write/ack quorums and ensemble changes.

Theory of operation.  Each ``add_entry`` takes the next entry id, frames the
payload with :func:`~magnetar.bookie.entry_format.encode_entry` (carrying the
current LAC and the running length) and sends it to the Qw bookies of
``write_set(entry_id)``.  A :class:`PendingAdd` collects acks; the head of the
pending queue completes once ``ack_quorum`` bookies of its *current* write set
acked, so adds complete strictly in entry order and the LAC is the last
completed id.

Ensemble change.  A bookie in the last ensemble that fails an add (error or
``add_timeout_ms``) is queued in ``_failed`` and completions stop
(``_changing``): completing an entry whose ack came from a bookie about to be
replaced could leave it on too few bookies of its recorded ensemble.  The
change task picks a replacement with the placement policy, and CASes a new
fragment starting at ``LAC + 1`` into the metadata (replacing a fragment
that already starts there).  Then each pending entry keeps only the acks of
bookies still in its write set, is sent to the write-set bookies that have
neither acked it nor a request in flight, and completions resume.  New adds made during a change are queued
and sent afterwards.  If no replacement can be found after
``ensemble_change_attempts_max`` tries the handle is BROKEN.

Fencing.  A bookie answering LedgerFenced means another client is recovering
the ledger: every pending add fails with LedgerFencedError and so do later
ones (state FENCED).  A metadata state other than OPEN found during a change
means the same.

Recovery mode (used by :mod:`magnetar.bookkeeper.recovery`): adds carry
``recovery=True`` (accepted by fenced bookies), need acks from the whole write
quorum, and ensemble changes stay local to the handle: the recovery writes
them into the metadata together with the close, so a failed recovery never
leaves metadata that points away from the bookies holding the tail.

States (transitions only in :meth:`_set_state`):

    OPEN --close()--> CLOSING --metadata CAS--> CLOSED
    OPEN | CLOSING --fenced--> FENCED        (terminal, adds fail LedgerFencedError)
    OPEN | CLOSING --no bookies / metadata error--> BROKEN   (terminal)
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections import deque
from dataclasses import dataclass, field, replace

from magnetar.bookie import api as bookie_api
from magnetar.bookie.entry_format import encode_entry
from magnetar.bookkeeper import api
from magnetar.bookkeeper.context import ClientContext
from magnetar.bookkeeper.errors import UnauthorizedError, is_fenced, translate
from magnetar.bookkeeper.isolation import isolation_exclusions
from magnetar.bookkeeper.metadata import with_fragment
from magnetar.bookkeeper.read_handle import check_range
from magnetar.bookkeeper.reader import EntryReader
from magnetar.bookkeeper.timeouts import wait_event, with_timeout
from magnetar.metadata.api import MetadataError
from magnetar.runtime import SlimEvent

log = logging.getLogger(__name__)


class HandleState(enum.Enum):
    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"
    FENCED = "fenced"
    BROKEN = "broken"


_TRANSITIONS: dict[HandleState, set[HandleState]] = {
    HandleState.OPEN: {HandleState.CLOSING, HandleState.FENCED, HandleState.BROKEN},
    HandleState.CLOSING: {HandleState.CLOSED, HandleState.FENCED, HandleState.BROKEN},
    HandleState.CLOSED: set(),
    HandleState.FENCED: set(),
    HandleState.BROKEN: set(),
}
_TERMINAL = {HandleState.CLOSED, HandleState.FENCED, HandleState.BROKEN}


@dataclass(eq=False)
class PendingAdd:
    entry_id: int
    framed: bytes
    length: int
    future: asyncio.Future[int]
    # bookies with an outstanding request -> (future, deadline) of a nowait send (the handle's
    # watchdog times it out), or None for a send running as a task (it times itself out)
    inflight: dict[str, tuple[asyncio.Future[None], float] | None] = field(default_factory=dict)
    acked: set[str] = field(default_factory=set)  # bookies of the current write set that acked


class LedgerHandle:
    """Implements :class:`~magnetar.bookkeeper.api.WriteHandle`."""

    # Slots, not an instance dict: every topic holds the handle of the ledger it writes.
    __slots__ = (
        "_ctx", "_md", "_version", "_recovery", "_ack_needed", "_lac", "_last_pushed", "_length",
        "_confirmed_length", "_pending", "_room", "_drained", "_failed", "_changing", "_change_task",
        "_state", "_error", "_entry_reader", "ensemble_changes", "_watchdog", "__weakref__",
    )  # fmt: skip

    def __init__(
        self,
        ctx: ClientContext,
        md: api.LedgerMetadata,
        version: int,
        *,
        recovery: bool = False,
        lac: int = -1,
        length: int = 0,
    ) -> None:
        self._ctx = ctx
        self._md = md
        self._version = version
        self._recovery = recovery
        self._ack_needed = md.write_quorum if recovery else md.ack_quorum
        self._lac = lac
        self._last_pushed = lac
        self._length = length
        self._confirmed_length = length
        # Adds pushed, not yet confirmed; a deque made on the first add (an empty deque holds a
        # ~760-byte block, and a topic's ledger may stay idle for days).
        self._pending: deque[PendingAdd] | tuple[()] = ()
        self._room = asyncio.Semaphore(ctx.config.pending_adds_max)
        self._drained = SlimEvent()
        self._drained.set()
        self._failed: dict[str, BaseException] = {}
        self._changing = False
        self._change_task: asyncio.Task[None] | None = None
        self._state = HandleState.OPEN
        self._error: api.BKError | None = None
        self._entry_reader: EntryReader | None = None  # made by the first read
        self.ensemble_changes = 0  # statistics
        self._watchdog: object | None = None  # the clock's timer handle while nowait sends are out

    @property
    def _reader(self) -> EntryReader:
        r = self._entry_reader
        if r is None:
            r = self._entry_reader = EntryReader(self._ctx, self._md.ledger_id, self._md.password)
        return r

    # --- ReadHandle -----------------------------------------------------------------------
    @property
    def ledger_id(self) -> int:
        return self._md.ledger_id

    @property
    def metadata(self) -> api.LedgerMetadata:
        return self._md

    @property
    def last_add_confirmed(self) -> int:
        return self._lac

    @property
    def last_add_pushed(self) -> int:
        return self._last_pushed

    @property
    def length(self) -> int:
        return self._confirmed_length

    @property
    def metadata_and_version(self) -> tuple[api.LedgerMetadata, int]:
        return self._md, self._version

    @property
    def state(self) -> HandleState:
        return self._state

    async def read(self, first_entry_id: int, last_entry_id: int) -> list[api.LedgerEntry]:
        check_range(self._md, self._lac, first_entry_id, last_entry_id)
        return await self._reader.read_range(self._md, first_entry_id, last_entry_id)

    async def read_last_add_confirmed(self) -> int:
        return self._lac

    # --- state machine ---------------------------------------------------------------------
    def _set_state(self, new: HandleState, error: api.BKError | None = None) -> None:
        if new not in _TRANSITIONS[self._state]:
            return  # terminal states stay; a second failure changes nothing
        self._state = new
        if error is not None:
            self._error = error
            self._fail_pending(error)

    def abort(self, error: api.BKError) -> None:
        """Fail every pending and later add with ``error`` (the client is closing)."""
        self._set_state(HandleState.BROKEN, error)

    def _fail_pending(self, error: api.BKError) -> None:
        while self._pending:
            p = self._pending.popleft()
            self._release_room()
            if not p.future.done():
                p.future.set_exception(error)
                p.future.exception()  # retrieved: no "never retrieved" log if nobody awaits it
        self._drained.set()

    def _check_writable(self) -> None:
        if self._state is HandleState.OPEN:
            return
        if self._error is not None:
            raise self._error
        raise api.LedgerClosedError(f"ledger {self.ledger_id} is {self._state.value}")

    # --- adds --------------------------------------------------------------------------------
    async def add_entry(self, data: bytes) -> int:
        self._check_writable()
        if self._room.locked():
            await self._acquire_room()
        else:
            await self._room.acquire()  # returns at once: no timer needed
        entry_id = self._last_pushed + 1
        self._length += len(data)
        framed = encode_entry(self.ledger_id, entry_id, self._lac, self._length, data)
        return await self._push(entry_id, framed, self._length)

    def add_entry_nowait(self, data: bytes) -> asyncio.Future[int] | None:
        """:meth:`add_entry` without a coroutine when there is room for it now: the future of
        its entry id (completing in entry order), or None when the caller must await
        :meth:`add_entry` (the pending-add limit is reached).  Raises if the handle is not
        writable.  Nothing cancels the future on the caller's behalf."""
        self._check_writable()
        room = self._room
        if room._value <= 0 or room._waiters:  # room.locked(), without its generator
            return None
        room._value -= 1  # what acquire() does when not locked, without the coroutine
        entry_id = self._last_pushed + 1
        self._length += len(data)
        framed = encode_entry(self.ledger_id, entry_id, self._lac, self._length, data)
        return self._push_nowait(entry_id, framed, self._length)

    def add_framed_nowait(self, entry_id: int, framed: bytes, length: int) -> asyncio.Future[int]:
        """Recovery: re-add an entry exactly as the original writer framed it.  The caller
        bounds how many it keeps outstanding (recovery handles do not use the room semaphore)."""
        assert self._recovery, "add_framed_nowait is for recovery handles"
        self._check_writable()
        if entry_id != self._last_pushed + 1:
            raise api.BKError(f"recovery add of entry {entry_id} out of order (pushed {self._last_pushed})")
        self._length = length
        return self._push_nowait(entry_id, framed, length)

    async def _acquire_room(self) -> None:
        cfg = self._ctx.config
        await with_timeout(
            self._ctx.clock,
            self._room.acquire(),
            cfg.add_wait_timeout_ms,
            lambda: api.BKTimeoutError(f"ledger {self.ledger_id}: {cfg.pending_adds_max} adds pending"),
        )
        if self._state is not HandleState.OPEN:
            self._room.release()
            self._check_writable()

    def _release_room(self) -> None:
        if not self._recovery:
            self._room.release()

    async def _push(self, entry_id: int, framed: bytes, length: int) -> int:
        return await asyncio.shield(self._push_nowait(entry_id, framed, length))

    def _push_nowait(self, entry_id: int, framed: bytes, length: int) -> asyncio.Future[int]:
        self._last_pushed = entry_id
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        p = PendingAdd(entry_id, framed, length, future)
        pending = self._pending
        if pending.__class__ is not deque:
            pending = self._pending = deque()
        pending.append(p)  # type: ignore[union-attr]
        self._drained.clear()
        if not self._changing:
            self._send(p)
        return future

    def _send(self, p: PendingAdd) -> None:
        ctx = self._ctx
        for bookie in self._write_set(p.entry_id):
            if bookie in p.inflight or bookie in p.acked:
                continue
            client = ctx.pool.get(bookie)
            nowait = getattr(client, "add_entry_nowait", None)
            if nowait is not None:
                # The hot path (the in-process bookie): no task, no timer per add.
                try:
                    fut = nowait(
                        self.ledger_id, p.entry_id, self._md.password, p.framed, recovery=self._recovery
                    )
                except Exception as exc:
                    self._on_add_failed(p, bookie, exc)
                    continue
                if fut is not None:
                    deadline = ctx.clock.monotonic() + ctx.config.add_timeout_ms / 1000.0
                    p.inflight[bookie] = (fut, deadline)
                    fut.add_done_callback(lambda f, p=p, b=bookie: self._on_nowait_done(p, b, f))
                    if self._watchdog is None:
                        self._arm_watchdog()
                    continue
            p.inflight[bookie] = None
            ctx.supervisor.spawn(self._send_one(p, bookie), name=f"bk-add-{self.ledger_id}")

    def _write_set(self, entry_id: int) -> tuple[str, ...] | list[str]:
        """``md.write_set(entry_id)``, without the fragment search for entries of the last
        fragment (every add of a writer): its striping is a rotation of that ensemble."""
        md = self._md
        first, ensemble = md.ensembles[-1]
        n = len(ensemble)
        if entry_id < first or md.write_quorum != n:
            return md.write_set(entry_id)
        if n == 1:
            return ensemble
        k = entry_id % n
        return ensemble[k:] + ensemble[:k]

    def _on_nowait_done(self, p: PendingAdd, bookie: str, fut: asyncio.Future[None]) -> None:
        sent = p.inflight.get(bookie)
        if sent is None or sent[0] is not fut:
            return  # timed out (or re-sent) meanwhile: that outcome was already taken
        del p.inflight[bookie]
        exc = (
            fut.exception()
            if not fut.cancelled()
            else bookie_api.BookieUnavailableError("add cancelled", bookie)
        )
        if exc is None:
            self._on_add_ok(p, bookie)
        else:
            self._on_add_failed(p, bookie, exc)

    def _arm_watchdog(self) -> None:
        tick_s = max(0.001, min(0.25, self._ctx.config.add_timeout_ms / 10_000.0))
        self._watchdog = self._ctx.clock.call_later(tick_s, self._expire_overdue)

    def _expire_overdue(self) -> None:
        """Every tick while nowait sends are out: a send past ``add_timeout_ms`` fails as a
        BookieTimeoutError (its late answer is then ignored), as a timed-out task's would."""
        self._watchdog = None
        now = self._ctx.clock.monotonic()
        waiting = False
        for p in list(self._pending):
            for bookie, sent in list(p.inflight.items()):
                if sent is None:
                    continue
                if sent[1] > now:
                    waiting = True
                    continue
                del p.inflight[bookie]
                self._on_add_failed(
                    p, bookie, bookie_api.BookieTimeoutError(f"add of entry {p.entry_id} timed out", bookie)
                )
        if waiting and self._state not in _TERMINAL:
            self._arm_watchdog()

    async def _send_one(self, p: PendingAdd, bookie: str) -> None:
        ctx = self._ctx
        try:
            await with_timeout(
                ctx.clock,
                ctx.pool.get(bookie).add_entry(
                    self.ledger_id, p.entry_id, self._md.password, p.framed, recovery=self._recovery
                ),
                ctx.config.add_timeout_ms,
                lambda: bookie_api.BookieTimeoutError(f"add of entry {p.entry_id} timed out", bookie),
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            p.inflight.pop(bookie, None)
            self._on_add_failed(p, bookie, exc)
            return
        p.inflight.pop(bookie, None)
        self._on_add_ok(p, bookie)

    def _on_add_ok(self, p: PendingAdd, bookie: str) -> None:
        if self._state in _TERMINAL or p.future.done():
            return
        if bookie in self._write_set(p.entry_id):
            p.acked.add(bookie)
            self._complete_ready()

    def _on_add_failed(self, p: PendingAdd, bookie: str, exc: BaseException) -> None:
        if self._state in _TERMINAL:
            return
        if is_fenced(exc):
            self._set_state(HandleState.FENCED, api.LedgerFencedError(f"ledger {self.ledger_id} was fenced"))
            return
        if isinstance(exc, bookie_api.UnauthorizedAccessError):
            self._set_state(HandleState.BROKEN, UnauthorizedError(f"ledger {self.ledger_id}: wrong password"))
            return
        if bookie not in self._md.ensembles[-1][1]:
            return  # already replaced
        log.info("ledger %d: bookie %s failed entry %d: %r", self.ledger_id, bookie, p.entry_id, exc)
        self._failed.setdefault(bookie, exc)
        self._ctx.registry.mark_failed(bookie)
        self._changing = True
        if self._change_task is None or self._change_task.done():
            self._change_task = self._ctx.supervisor.spawn(
                self._ensemble_change_loop(), name="bk-ensemble-change"
            )

    def _complete_ready(self) -> None:
        if self._changing:
            return
        while self._pending and len(self._pending[0].acked) >= self._ack_needed:
            p = self._pending.popleft()
            self._release_room()
            self._lac = p.entry_id
            self._confirmed_length = p.length
            if not p.future.done():
                p.future.set_result(p.entry_id)
        if not self._pending:
            self._drained.set()

    # --- ensemble change ---------------------------------------------------------------------
    async def _ensemble_change_loop(self) -> None:
        cfg = self._ctx.config
        attempts = 0
        try:
            while self._failed and self._state not in _TERMINAL:
                last_ensemble = self._md.ensembles[-1][1]
                failed = sorted(b for b in self._failed if b in last_ensemble)
                if not failed:
                    self._failed.clear()
                    break
                try:
                    self._adopt(*await self._change_ensemble(failed))
                except api.LedgerFencedError as exc:
                    self._set_state(HandleState.FENCED, exc)
                    return
                except (api.NoSuchLedgerError, UnauthorizedError) as exc:
                    self._set_state(HandleState.BROKEN, exc)
                    return
                except Exception as exc:  # no bookie, CAS race, metadata store trouble: retry, bounded
                    attempts += 1
                    log.info(
                        "ledger %d: ensemble change attempt %d failed: %r", self.ledger_id, attempts, exc
                    )
                    if attempts >= cfg.ensemble_change_attempts_max:
                        self._set_state(HandleState.BROKEN, translate(exc, self.ledger_id))
                        return
                    await self._ctx.clock.sleep(cfg.ensemble_change_backoff_ms / 1000.0)
                    if not self._recovery:
                        await self._adopt_stored_metadata()
                    continue
                self.ensemble_changes += 1
                for b in failed:
                    self._failed.pop(b, None)
        finally:
            if self._state not in _TERMINAL and not any(b in self._md.ensembles[-1][1] for b in self._failed):
                self._failed.clear()
                self._changing = False
                for p in list(self._pending):  # adds pushed during the change were held back
                    self._send(p)
                self._complete_ready()

    def _adopt(self, md: api.LedgerMetadata, version: int) -> None:
        """Take ``md`` as our metadata: keep only acks of bookies still in each pending entry's
        write set and send each pending entry to the write-set bookies it is missing on."""
        self._md, self._version = md, version
        for p in self._pending:
            p.acked &= set(md.write_set(p.entry_id))
        for p in list(self._pending):
            self._send(p)

    async def _adopt_stored_metadata(self) -> None:
        """After a failed metadata update whose outcome may be unknown (connection loss after
        the write was applied): re-read it.  While the ledger is OPEN only this writer changes
        its last fragment, so whatever is stored there is ours to adopt."""
        try:
            md, version = await with_timeout(
                self._ctx.clock,
                self._ctx.ledgers.read(self.ledger_id),
                self._ctx.config.metadata_timeout_ms,
                lambda: api.BKTimeoutError("metadata read timed out"),
            )
        except Exception:  # still unreachable: the next attempt will tell
            return
        if md.state is api.LedgerState.OPEN and md.ensembles[-1] != self._md.ensembles[-1]:
            log.info("ledger %d: adopting stored ensemble %s", self.ledger_id, md.ensembles[-1])
            self._adopt(md, version)

    async def _change_ensemble(self, failed: list[str]) -> tuple[api.LedgerMetadata, int]:
        ctx = self._ctx
        bookies = await ctx.registry.writable_bookies()
        racks = await ctx.registry.racks()
        ensemble = list(self._md.ensembles[-1][1])
        exclude = set(failed) | set(self._failed) | ctx.registry.quarantined()
        usable = [b for b in bookies if b not in exclude]  # a namespace's bookie groups still hold
        exclude |= await isolation_exclusions(
            ctx.registry, self._md.custom_metadata, usable, self._md.ensemble_size
        )
        for i, b in enumerate(ensemble):
            if b in failed:
                ensemble[i] = ctx.placement.replace_bookie(
                    ensemble, i, self._md.write_quorum, bookies, racks, exclude
                )
        new_start = self._lac + 1
        ours = self._md.ensembles[-1]
        log.info(
            "ledger %d: ensemble change at entry %d: %s -> %s%s",
            self.ledger_id,
            new_start,
            ours[1],
            ensemble,
            " (recovery: local until close)" if self._recovery else "",
        )
        if self._recovery:
            # Never persisted before the recovery closes the ledger (BookKeeper does the same):
            # were it written now and the recovery then failed, the metadata would name bookies
            # that hold only part of the tail, and the next recovery would miss entries that
            # are still on the original ensemble.  The close CAS writes these fragments.
            return with_fragment(self._md, new_start, ensemble), self._version

        def mutate(md: api.LedgerMetadata) -> api.LedgerMetadata:
            if md.state is not api.LedgerState.OPEN:
                raise api.LedgerFencedError(f"ledger {md.ledger_id} is {md.state.value} in the metadata")
            if md.ensembles[-1] != ours:
                if with_fragment(md, new_start, ensemble) == md:
                    return md  # our own earlier write, whose answer was lost
                raise api.MetadataVersionError(
                    f"ledger {md.ledger_id}: last fragment changed by someone else"
                )
            return with_fragment(md, new_start, ensemble)

        return await with_timeout(
            ctx.clock,
            ctx.ledgers.update(self.ledger_id, mutate, known=(self._md, self._version)),
            ctx.config.metadata_timeout_ms,
            lambda: api.BKTimeoutError(f"ledger {self.ledger_id}: metadata update timed out"),
        )

    # --- close ---------------------------------------------------------------------------------
    async def wait_pending(self) -> None:
        if not await wait_event(self._ctx.clock, self._drained, self._ctx.config.add_wait_timeout_ms):
            raise api.BKTimeoutError(f"ledger {self.ledger_id}: pending adds did not drain")
        if self._error is not None:
            raise self._error

    async def close(self) -> None:
        if self._state is HandleState.CLOSED:
            return
        if self._state is HandleState.OPEN:
            self._set_state(HandleState.CLOSING)
        if self._error is not None:
            raise self._error
        await self.wait_pending()
        if self._recovery:
            self._set_state(HandleState.CLOSED)
            return
        lac, length = self._lac, self._confirmed_length

        def mutate(md: api.LedgerMetadata) -> api.LedgerMetadata:
            if md.state is api.LedgerState.CLOSED and md.last_entry_id == lac:
                return md
            if md.state is not api.LedgerState.OPEN:
                raise api.LedgerFencedError(f"ledger {md.ledger_id} was recovered by another client")
            return replace(md, state=api.LedgerState.CLOSED, last_entry_id=lac, length=length)

        try:
            self._md, self._version = await with_timeout(
                self._ctx.clock,
                self._ctx.ledgers.update(self.ledger_id, mutate, known=(self._md, self._version)),
                self._ctx.config.metadata_timeout_ms,
                lambda: api.BKTimeoutError(f"ledger {self.ledger_id}: close timed out"),
            )
        except api.LedgerFencedError as exc:
            self._set_state(HandleState.FENCED, exc)
            raise
        except MetadataError as exc:  # still CLOSING: close may be called again
            raise translate(exc, self.ledger_id) from exc
        self._set_state(HandleState.CLOSED)
