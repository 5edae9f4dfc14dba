"""The ledger storage's state machine and directory layout.

Theory of operation: the storage (storage.py) is in exactly one
:class:`StorageState`; transitions happen only in its ``_set_state``, which
checks them against :data:`TRANSITIONS` and tells the state listeners (the
bookie's registration, so a read-only bookie is registered as such)::

    NEW --open--> WRITABLE <--disk check / journal broken--> READ_ONLY
    any --aclose--> CLOSED

In READ_ONLY adds fail with BookieReadOnlyError; reads and fencing go on.
In NEW and CLOSED nothing but ``open`` / nothing at all is allowed.

:class:`StoragePaths` names the directories: the journal's, and under the
first ledger directory the entry logs (``current``) and the index
(``current/index``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class StorageState(enum.Enum):
    NEW = "new"
    WRITABLE = "writable"
    READ_ONLY = "read_only"
    CLOSED = "closed"


TRANSITIONS: dict[StorageState, frozenset[StorageState]] = {
    StorageState.NEW: frozenset({StorageState.WRITABLE, StorageState.CLOSED}),
    StorageState.WRITABLE: frozenset({StorageState.READ_ONLY, StorageState.CLOSED}),
    StorageState.READ_ONLY: frozenset({StorageState.WRITABLE, StorageState.CLOSED}),
    StorageState.CLOSED: frozenset(),
}


@dataclass(frozen=True, slots=True)
class StoragePaths:
    journal_dir: str
    ledger_dir: str

    @property
    def entry_log_dir(self) -> str:
        return f"{self.ledger_dir}/current"

    @property
    def index_dir(self) -> str:
        return f"{self.ledger_dir}/current/index"
