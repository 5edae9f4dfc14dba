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


async def offload_ledger(ml, ledger_id: int, *, delete_from_bookkeeper: bool = False) -> None:  # noqa: ANN001
    """Copy a closed ledger of ``ml`` (a ManagedLedgerImpl) through the factory's offloader,
    mark it ``isOffloaded`` in the ledger list (CAS), and optionally drop the BookKeeper copy.
    Reads of it then go through :meth:`Offloader.read_offloaded`."""
    from magnetar.bookkeeper.api import BKError
    from magnetar.managed_ledger.api import ManagedLedgerError, ManagedLedgerStorageError

    offloader = ml.ctx.offloader
    if offloader is None:
        raise ManagedLedgerError(f"{ml.name}: no offloader configured")
    info = ml.ledger_list.get(ledger_id)
    if info is None:
        raise ManagedLedgerError(f"{ml.name}: ledger {ledger_id} is not in the ledger list")
    if ledger_id == ml.ledger_list.current_id:
        raise ManagedLedgerError(f"{ml.name}: ledger {ledger_id} is still being written")
    if not info.offloaded:
        try:
            handle = await ml.ctx.bookkeeper.open_ledger(
                ledger_id, password=ml.config.password, recovery=False
            )
        except BKError as e:
            raise ManagedLedgerStorageError(f"cannot open ledger {ledger_id} to offload: {e!r}") from e
        try:
            await offloader.offload(handle, {"ManagedLedgerName": ml.name})
        finally:
            try:
                await handle.close()
            except BKError:
                pass
        await ml.set_ledger_offloaded(ledger_id)
    if delete_from_bookkeeper:
        await ml.reader.drop_ledger(ledger_id)
        try:
            await ml.ctx.bookkeeper.delete_ledger(ledger_id)
        except BKError:
            pass
