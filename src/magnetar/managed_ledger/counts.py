"""Message counts per entry, for backlogs counted in messages as well as entries.

Theory of operation: a batch entry holds several messages.  The writer knows
how many (``add_entry(data, num_messages=n)``, taken from the entry's
metadata by the broker), so the managed ledger records it: one ``uint16`` per
entry in an ``array('H')`` per ledger (2 bytes an entry; sizes above 65,535
are clamped), dropped when the ledger is trimmed.  Ledgers written before
this process opened the managed ledger have no counts and are counted as one
message per entry -- after a restart the message backlog is an estimate until
those ledgers are consumed (Pulsar's own msgBacklog counts entries).

``messages_in(ledger, first, last)`` sums a slice (C speed); a cursor's
message backlog is the messages after mark-delete, minus those in its acked
ranges, minus the acknowledged messages of partly acked batches.

Entry sizes are kept the same way (one ``uint32`` per entry, 4 bytes an
entry): ``known_bytes(ledger, first, last)`` gives the bytes of the entries
whose size is known and how many are not (the ledger-list estimates those
from the ledger's average entry size).  A cursor's backlog size is then exact
-- the bytes after mark-delete minus the bytes of its individually acked
ranges -- for every entry written since this process opened the ledger.
"""

from __future__ import annotations

from array import array

_MAX_COUNT = 0xFFFF
_MAX_SIZE = 0xFFFFFFFF


class MessageCounts:
    __slots__ = ("_by_ledger", "_sizes")

    def __init__(self) -> None:
        self._by_ledger: dict[int, array] = {}
        self._sizes: dict[int, array] = {}

    def record(self, ledger_id: int, entry_id: int, num_messages: int, size: int | None = None) -> None:
        counts = self._by_ledger.get(ledger_id)
        if counts is None:
            if entry_id != 0:
                return  # the ledger predates us (or counts were lost): count entries
            counts = self._by_ledger[ledger_id] = array("H")
            if size is not None:
                self._sizes[ledger_id] = array("I")
        if entry_id == len(counts):
            counts.append(min(max(num_messages, 0), _MAX_COUNT))
            sizes = self._sizes.get(ledger_id)
            if sizes is not None and size is not None and entry_id == len(sizes):
                sizes.append(min(max(size, 0), _MAX_SIZE))

    def drop(self, ledger_id: int) -> None:
        self._by_ledger.pop(ledger_id, None)
        self._sizes.pop(ledger_id, None)

    def known_bytes(self, ledger_id: int, first: int, last: int) -> tuple[int, int]:
        """(bytes of the entries first..last whose size is known, number of the others)."""
        if last < first:
            return 0, 0
        sizes = self._sizes.get(ledger_id)
        if sizes is None:
            return 0, last - first + 1
        known_last = min(last, len(sizes) - 1)
        total = sum(sizes[first : known_last + 1]) if known_last >= first else 0
        return total, max(0, last - max(known_last, first - 1))

    def batch_size(self, ledger_id: int, entry_id: int) -> int:
        counts = self._by_ledger.get(ledger_id)
        if counts is None or entry_id >= len(counts) or entry_id < 0:
            return 1
        return counts[entry_id]

    def messages_in(self, ledger_id: int, first: int, last: int) -> int:
        """Messages in entries first..last (inclusive) of one ledger."""
        if last < first:
            return 0
        counts = self._by_ledger.get(ledger_id)
        if counts is None:
            return last - first + 1
        known_last = min(last, len(counts) - 1)
        total = sum(counts[first : known_last + 1]) if known_last >= first else 0
        return total + max(0, last - max(known_last, first - 1))
