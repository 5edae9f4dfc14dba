"""The offloader seam (tiered storage comes later).

Theory of operation: a ledger in a managed ledger's list can be *offloaded*:
its entries copied to long-term storage (S3, a filesystem, ...) by an
:class:`Offloader`, after which the list marks it ``isOffloaded`` and reads of
it go through :meth:`Offloader.read_offloaded`, which returns the same
:class:`~magnetar.bookkeeper.api.ReadHandle` interface a BookKeeper read gives.
The BookKeeper copy can then be deleted (Pulsar waits
``managedLedgerOffloadDeletionLagMs``).  Nothing here implements an offloader;
the managed ledger only needs these three calls, so one can be plugged in
(through the factory) without touching the managed ledger.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

from magnetar.bookkeeper.api import ReadHandle


class OffloadError(Exception):
    pass


@runtime_checkable
class Offloader(Protocol):
    @property
    def driver_name(self) -> str: ...

    async def offload(self, handle: ReadHandle, extra_metadata: Mapping[str, str]) -> None:
        """Copy every entry of the (closed) ledger behind ``handle`` to long-term storage."""

    async def read_offloaded(self, ledger_id: int) -> ReadHandle:
        """A read handle over an offloaded ledger."""

    async def delete_offloaded(self, ledger_id: int) -> None:
        """Remove an offloaded copy; missing is not an error."""
