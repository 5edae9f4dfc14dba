"""Ledger metadata in the metadata store.

Theory of operation: each ledger has one node, ``bookie.api.ledger_path(id)``,
whose value is the JSON form of :class:`~magnetar.bookkeeper.api.LedgerMetadata`
(BookKeeper's field names).  Every change is a compare-and-set on the node's
version: :meth:`LedgerMetadataStore.update` reads the node, applies a pure
function to the metadata and writes it back with the version it read; on
``BadVersion`` it re-reads and re-applies, so concurrent writers (a writer's
ensemble change, a recoverer, a replication worker) merge rather than
overwrite each other.  The function may raise to abort, or return the
metadata unchanged to make the update a no-op.  A write whose outcome is
unknown (ConnectionLoss, timeout) is retried the same way, so every mutation
must recognise its own already-applied result and return it unchanged.

Ledger ids come from a counter node at ``LEDGER_ID_GEN_PATH`` incremented with
CAS, so they are unique across every client sharing the store; creation
itself uses create-if-absent, so even a reused id can never clobber a ledger.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from magnetar.bookie.api import LEDGER_ID_GEN_PATH, LEDGERS_ROOT, ledger_id_from_node, ledger_path
from magnetar.bookkeeper.api import (
    DigestType,
    LedgerMetadata,
    LedgerState,
    MetadataVersionError,
    NoSuchLedgerError,
)
from magnetar.metadata.api import (
    AlreadyExists,
    BadVersion,
    ConnectionLoss,
    MetadataStore,
    MetadataTimeout,
    NotFound,
)

FORMAT_VERSION = 3


def to_json(md: LedgerMetadata) -> bytes:
    doc: dict[str, Any] = {
        "metadataFormatVersion": FORMAT_VERSION,
        "ledgerId": md.ledger_id,
        "ensembleSize": md.ensemble_size,
        "writeQuorumSize": md.write_quorum,
        "ackQuorumSize": md.ack_quorum,
        "state": md.state.value,
        "lastEntryId": md.last_entry_id,
        "length": md.length,
        "digestType": md.digest_type.value,
        "password": base64.b64encode(md.password).decode(),
        "ctime": md.ctime_ms,
        "ensembles": [{"firstEntryId": first, "bookies": list(ens)} for first, ens in md.ensembles],
        "customMetadata": {k: base64.b64encode(v).decode() for k, v in sorted(md.custom_metadata.items())},
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def from_json(raw: bytes) -> LedgerMetadata:
    try:
        doc = json.loads(raw)
        return LedgerMetadata(
            ledger_id=int(doc["ledgerId"]),
            ensemble_size=int(doc["ensembleSize"]),
            write_quorum=int(doc["writeQuorumSize"]),
            ack_quorum=int(doc["ackQuorumSize"]),
            state=LedgerState(doc["state"]),
            ensembles=tuple(
                (int(f["firstEntryId"]), tuple(str(b) for b in f["bookies"])) for f in doc["ensembles"]
            ),
            last_entry_id=int(doc.get("lastEntryId", -1)),
            length=int(doc.get("length", 0)),
            digest_type=DigestType(doc.get("digestType", "CRC32C")),
            password=base64.b64decode(doc.get("password", "")),
            ctime_ms=int(doc.get("ctime", 0)),
            custom_metadata={k: base64.b64decode(v) for k, v in doc.get("customMetadata", {}).items()},
        )
    except (KeyError, ValueError, TypeError) as exc:
        raise MetadataVersionError(f"unreadable ledger metadata: {exc}") from exc


def with_fragment(md: LedgerMetadata, first_entry_id: int, ensemble: Sequence[str]) -> LedgerMetadata:
    """A new last fragment starting at ``first_entry_id`` (replacing one that starts there)."""
    fragments = [f for f in md.ensembles if f[0] < first_entry_id]
    if not fragments or fragments[-1][1] != tuple(ensemble):
        fragments.append((first_entry_id, tuple(ensemble)))
    # else: the new ensemble equals the previous fragment's, which simply extends
    return replace(md, ensembles=tuple(fragments))


def fragment_ranges(md: LedgerMetadata) -> list[tuple[int, int, tuple[str, ...]]]:
    """(first, last, ensemble) per fragment; last is -1-open-ended (=-2) for an open ledger's tail."""
    out = []
    for i, (first, ensemble) in enumerate(md.ensembles):
        if i + 1 < len(md.ensembles):
            last = md.ensembles[i + 1][0] - 1
        else:
            last = md.last_entry_id if md.is_closed else -2
        out.append((first, last, ensemble))
    return out


class LedgerMetadataStore:
    """CAS access to ledger metadata nodes and the ledger id counter."""

    def __init__(self, store: MetadataStore, retries_max: int = 32) -> None:
        self._store = store
        self._retries_max = retries_max
        # One allocation at a time in this process: the CAS loop is for other processes; many
        # concurrent ones here (a burst of topic creations) would only fight each other until
        # one ran out of retries.
        self._id_lock = asyncio.Lock()

    async def next_ledger_id(self) -> int:
        async with self._id_lock:
            return await self._next_ledger_id()

    async def _next_ledger_id(self) -> int:
        for _ in range(self._retries_max):
            got = await self._store.get(LEDGER_ID_GEN_PATH)
            if got is None:
                current, version = -1, -1
            else:
                current = int(got.value.decode() or "-1")
                version = got.stat.version
            try:
                await self._store.put(LEDGER_ID_GEN_PATH, str(current + 1).encode(), version)
            except BadVersion:
                continue
            return current + 1
        raise MetadataVersionError("could not allocate a ledger id: too much contention")

    async def create(self, make: Callable[[int], LedgerMetadata]) -> tuple[LedgerMetadata, int]:
        """Allocate an id and create the node; returns (metadata, version)."""
        for _ in range(self._retries_max):
            ledger_id = await self.next_ledger_id()
            md = make(ledger_id)
            try:
                stat = await self._store.put(ledger_path(ledger_id), to_json(md), -1)
            except AlreadyExists:
                continue
            return md, stat.version
        raise MetadataVersionError("could not create a ledger node: ids keep colliding")

    async def read(self, ledger_id: int) -> tuple[LedgerMetadata, int]:
        got = await self._store.get(ledger_path(ledger_id))
        if got is None:
            raise NoSuchLedgerError(f"ledger {ledger_id} does not exist")
        return from_json(got.value), got.stat.version

    async def update(
        self,
        ledger_id: int,
        mutate: Callable[[LedgerMetadata], LedgerMetadata],
        known: tuple[LedgerMetadata, int] | None = None,
    ) -> tuple[LedgerMetadata, int]:
        """Read-modify-write until the CAS succeeds.  ``known`` saves the first read."""
        current = known
        for _ in range(self._retries_max):
            if current is None:
                current = await self.read(ledger_id)
            md, version = current
            new = mutate(md)
            if new == md:
                return current
            try:
                stat = await self._store.put(ledger_path(ledger_id), to_json(new), version)
            except NotFound:
                raise NoSuchLedgerError(f"ledger {ledger_id} was deleted") from None
            except BadVersion:
                current = None
                continue
            except (ConnectionLoss, MetadataTimeout):
                # Outcome unknown: the write may have been applied.  Re-read and re-apply;
                # every mutation we use recognises its own applied result and returns it as is.
                current = None
                continue
            return new, stat.version
        raise MetadataVersionError(f"ledger {ledger_id}: metadata kept changing under us")

    async def delete(self, ledger_id: int) -> bool:
        try:
            await self._store.delete(ledger_path(ledger_id))
        except NotFound:
            return False
        return True

    async def list_ids(self) -> list[int]:
        ids = (ledger_id_from_node(name) for name in await self._store.children(LEDGERS_ROOT))
        return sorted(i for i in ids if i is not None)
