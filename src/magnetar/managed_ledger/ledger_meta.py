"""Reading and compare-and-set writing of a managed ledger's metadata nodes.

Theory of operation: :class:`LedgerMetaStore` remembers the version of
``/managed-ledgers/<name>`` it last read or wrote and writes only with it.  A
``BadVersion`` (or ``AlreadyExists`` on first creation) means another process
wrote the node since: it owns the managed ledger now and we are fenced
(:class:`ManagedLedgerFencedError`).  Other metadata failures become
:class:`ManagedLedgerStorageError` (retriable).  Cursor nodes are children of
the ledger node; :meth:`load_cursors` lists them for recovery.
"""

from __future__ import annotations

from magnetar.managed_ledger.api import (
    LedgerInfo,
    ManagedLedgerFencedError,
    ManagedLedgerStorageError,
    Position,
)
from magnetar.managed_ledger.metadata import CURSOR_KIND, MLInfo, cursor_name_of, ledger_path
from magnetar.metadata.api import BadVersion, MetadataError, MetadataStore, NotFound
from magnetar.runtime import Clock


class LedgerMetaStore:
    def __init__(self, store: MetadataStore, name: str, clock: Clock) -> None:
        self.store = store
        self.name = name
        self.path = ledger_path(name)
        self._clock = clock
        self.version = -1  # -1: the node does not exist yet
        self.info = MLInfo()

    async def load(self) -> MLInfo:
        try:
            got = await self.store.get(self.path)
        except MetadataError as e:
            raise ManagedLedgerStorageError(f"cannot read {self.path}: {e!r}") from e
        if got is None:
            now = self._clock.time_ms()
            self.info = MLInfo(creation_ms=now, modification_ms=now)
            self.version = -1
        else:
            try:
                self.info = MLInfo.decode(got.value)
            except (ValueError, KeyError, TypeError) as e:
                raise ManagedLedgerStorageError(f"corrupt managed-ledger info at {self.path}: {e}") from e
            self.version = got.stat.version
        return self.info

    async def store_list(self, ledgers: list[LedgerInfo], terminated: Position | None) -> None:
        self.info.ledgers = list(ledgers)
        self.info.terminated_position = terminated
        self.info.modification_ms = self._clock.time_ms()
        try:
            stat = await self.store.put(self.path, self.info.encode(), self.version)
        except BadVersion as e:  # includes AlreadyExists
            raise ManagedLedgerFencedError(f"{self.name}: metadata changed by another owner") from e
        except NotFound as e:
            raise ManagedLedgerFencedError(f"{self.name}: metadata deleted by another owner") from e
        except MetadataError as e:
            raise ManagedLedgerStorageError(f"cannot write {self.path}: {e!r}") from e
        self.version = stat.version

    async def load_cursors(self) -> list[tuple[str, bytes, int]]:
        out: list[tuple[str, bytes, int]] = []
        try:
            for seg in await self.store.children(self.path):
                got = await self.store.get(f"{self.path}/{seg}")
                if got is None or b'"kind":"' + CURSOR_KIND.encode() + b'"' not in got.value:
                    continue
                out.append((cursor_name_of(seg), got.value, got.stat.version))
        except MetadataError as e:
            raise ManagedLedgerStorageError(f"cannot list cursors of {self.name}: {e!r}") from e
        return out

    async def delete_all(self) -> None:
        try:
            await self.store.delete_recursive(self.path)
        except MetadataError as e:
            raise ManagedLedgerStorageError(f"cannot delete {self.path}: {e!r}") from e
