"""Reading entries from replicas: digest checks and speculative reads.

Theory of operation: an entry lives on the Qw bookies of its write set.
:meth:`EntryReader.read_entry` asks the first of them; if no answer arrives
within ``speculative_read_timeout_ms`` it also asks the next one (and so on),
and any failure -- the bookie is down, does not have the entry, or returns
bytes whose CRC32-C digest does not verify -- moves on to the next replica at
once.  The first verified answer wins and the other requests are cancelled.
Every request to a bookie is bounded by ``read_timeout_ms``, so the whole
read is bounded too.

When every replica failed the caller gets one error summarising them:
NoSuchEntryError if all said "missing", DigestMismatchError if corruption
was among the reasons, BKTimeoutError / BookieFailedError otherwise.

:meth:`read_range` fetches a range and returns it in entry order.  Where a
run of the range has the same first replica and that bookie's client offers
a batch read (``read_entries``, the in-process bookie), the run is asked for
in one call and each entry's digest is checked as usual; whatever the batch
did not return verified (a missing entry, a bad digest, a failed or slow
bookie) is read entry by entry as above, with at most
``read_parallelism_max`` entries in flight.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from magnetar.bookie import api as bookie_api
from magnetar.bookie.entry_format import DigestMismatch, EntryHeader, MalformedEntry, decode_entry
from magnetar.bookkeeper import api
from magnetar.bookkeeper.context import ClientContext
from magnetar.bookkeeper.errors import BookieFailedError, is_missing, translate
from magnetar.bookkeeper.timeouts import with_timeout

_BATCH_ENTRIES_MAX = 1000  # entries asked for in one batch read


def summarize(errors: Sequence[BaseException], ledger_id: int, entry_id: int) -> api.BKError:
    if errors and all(is_missing(e) for e in errors):
        return api.NoSuchEntryError(f"ledger {ledger_id} entry {entry_id}: no replica has it")
    if any(isinstance(e, DigestMismatch | MalformedEntry) for e in errors):
        return api.DigestMismatchError(
            f"ledger {ledger_id} entry {entry_id}: no replica returned a verified copy ({errors[0]})"
        )
    if any(isinstance(e, bookie_api.UnauthorizedAccessError) for e in errors):
        return translate(
            next(e for e in errors if isinstance(e, bookie_api.UnauthorizedAccessError)), ledger_id
        )
    if errors and all(isinstance(e, bookie_api.BookieTimeoutError) for e in errors):
        return api.BKTimeoutError(f"ledger {ledger_id} entry {entry_id}: every replica timed out")
    detail = "; ".join(f"{type(e).__name__}: {e}" for e in errors[:4])
    return BookieFailedError(f"ledger {ledger_id} entry {entry_id}: read failed on every replica ({detail})")


class EntryReader:
    def __init__(self, ctx: ClientContext, ledger_id: int, master_key: bytes = b"") -> None:
        self._ctx = ctx
        self._ledger_id = ledger_id
        self._master_key = master_key

    async def read_from(self, bookie_id: str, entry_id: int) -> tuple[EntryHeader, bytes]:
        """One verified read from one bookie (raises bookie errors / DigestMismatch)."""
        ctx = self._ctx
        raw = await with_timeout(
            ctx.clock,
            ctx.pool.get(bookie_id).read_entry(self._ledger_id, entry_id),
            ctx.config.read_timeout_ms,
            lambda: bookie_api.BookieTimeoutError(f"read of entry {entry_id} timed out", bookie_id),
        )
        return decode_entry(raw, self._ledger_id, entry_id)

    async def _attempt(self, bookie_id: str, entry_id: int) -> tuple[EntryHeader, bytes] | BaseException:
        """Like :meth:`read_from` but returns the error instead of raising (for spawned reads)."""
        try:
            return await self.read_from(bookie_id, entry_id)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return exc

    async def read_entry(self, replicas: Sequence[str], entry_id: int) -> tuple[EntryHeader, bytes]:
        ctx = self._ctx
        events: asyncio.Queue[tuple[str, asyncio.Task[tuple[EntryHeader, bytes] | BaseException] | None]] = (
            asyncio.Queue(maxsize=2 * len(replicas) + 2)
        )
        tasks: list[asyncio.Task[tuple[EntryHeader, bytes] | BaseException]] = []
        errors: list[BaseException] = []
        spec_s = ctx.config.speculative_read_timeout_ms / 1000.0
        timer = None

        if ctx.supervisor.closed:
            raise api.BKClosedError("the BookKeeper client is closed")

        def launch() -> None:
            nonlocal timer
            task = ctx.supervisor.spawn(self._attempt(replicas[len(tasks)], entry_id), name="bk-read")
            task.add_done_callback(lambda t: events.put_nowait(("done", t)))
            tasks.append(task)
            if timer is not None:
                timer.cancel()
                timer = None
            if spec_s > 0 and len(tasks) < len(replicas):
                timer = ctx.clock.call_later(spec_s, lambda: events.put_nowait(("speculate", None)))

        outstanding = 0
        try:
            launch()
            outstanding = 1
            while True:
                kind, task = await events.get()
                if kind == "speculate":
                    if len(tasks) < len(replicas):
                        launch()
                        outstanding += 1
                    continue
                assert task is not None
                outstanding -= 1
                if task.cancelled():
                    errors.append(bookie_api.BookieUnavailableError("read cancelled"))
                elif isinstance(result := task.result(), BaseException):
                    errors.append(result)
                else:
                    return result
                if len(tasks) < len(replicas):
                    launch()
                    outstanding += 1
                elif outstanding == 0:
                    raise summarize(errors, self._ledger_id, entry_id)
        finally:
            if timer is not None:
                timer.cancel()
            for t in tasks:
                if not t.done():
                    t.cancel()

    async def read_range(self, md: api.LedgerMetadata, first: int, last: int) -> list[api.LedgerEntry]:
        out: list[api.LedgerEntry] = []
        step = self._ctx.config.read_parallelism_max
        start = first
        while start <= last:
            got = await self._read_batch(md, start, min(last, start + _BATCH_ENTRIES_MAX - 1))
            if got:
                out.extend(got)
                start += len(got)
                continue
            ids = range(start, min(last, start + step - 1) + 1)
            singles = await asyncio.gather(*(self.read_entry(md.write_set(e), e) for e in ids))
            out.extend(
                api.LedgerEntry(self._ledger_id, e, payload)
                for e, (_, payload) in zip(ids, singles, strict=True)
            )
            start = ids[-1] + 1
        return out

    async def _read_batch(self, md: api.LedgerMetadata, first: int, last: int) -> list[api.LedgerEntry]:
        """The verified prefix of ``first..last`` that one batch read of the first replica
        returns; [] when there is no batch to make (one entry, no batch read, a failure)."""
        if first >= last:
            return []
        bookie_id = md.write_set(first)[0]
        end = first
        while end < last and md.write_set(end + 1)[0] == bookie_id:
            end += 1
        if end == first:
            return []
        ctx = self._ctx
        batch = getattr(ctx.pool.get(bookie_id), "read_entries", None)
        if batch is None or ctx.supervisor.closed:
            return []
        try:
            raws = await with_timeout(
                ctx.clock,
                batch(self._ledger_id, first, end),
                ctx.config.read_timeout_ms,
                lambda: bookie_api.BookieTimeoutError(f"read of entries {first}..{end} timed out", bookie_id),
            )
        except asyncio.CancelledError:
            raise
        except Exception:
            return []  # the entry-by-entry path tries the other replicas and reports errors
        out: list[api.LedgerEntry] = []
        for entry_id, raw in zip(range(first, end + 1), raws, strict=False):
            try:
                _, payload = decode_entry(raw, self._ledger_id, entry_id)
            except (DigestMismatch, MalformedEntry):
                break
            out.append(api.LedgerEntry(self._ledger_id, entry_id, payload))
        return out

    async def read_lac(self, bookies: Sequence[str]) -> int:
        """Highest LAC reported by any of ``bookies`` (-1 if none answered)."""
        ctx = self._ctx

        async def one(b: str) -> int:
            return await with_timeout(
                ctx.clock,
                ctx.pool.get(b).read_lac(self._ledger_id),
                ctx.config.read_timeout_ms,
                lambda: bookie_api.BookieTimeoutError("read_lac timed out", b),
            )

        results = await asyncio.gather(*(one(b) for b in bookies), return_exceptions=True)
        lacs = [r for r in results if isinstance(r, int)]
        return max(lacs, default=-1)
