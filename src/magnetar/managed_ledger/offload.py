"""Tiered storage: the offloader interface, its policies and the per-ledger offload context.

Theory of operation: a closed ledger of a managed ledger can be *offloaded*:
its entries copied to long-term storage by a :class:`LedgerOffloader` (drivers
in :mod:`.offload_blob`: ``filesystem``, ``aws-s3``/``s3``), after which reads
of it go through :meth:`LedgerOffloader.read_offloaded`, which returns the
same :class:`~magnetar.bookkeeper.api.ReadHandle` interface a BookKeeper read
gives, so cursors, readers and seeks do not know the difference.

Each ledger's entry in the managed-ledger info keeps an :class:`OffloadContext`
(Pulsar's ``offload_context``): the uid of the offload attempt (object names
derive from it), ``complete`` once the objects are written and verified,
``bookkeeperDeleted`` once the BookKeeper copy is gone, and the driver's name
and metadata (bucket, endpoint, directory) so a reader finds the objects even
if the namespace's policies changed since.  The uid is recorded *before* any
object is written, so objects of an attempt interrupted by a crash can be
found and removed when the offload is retried.  The orchestration (when to
offload, the deletion lag, retries, status) is :mod:`.offload_process`.

:class:`OffloadPolicies` are Pulsar's offload settings (broker keys and the
namespace/topic ``offload_policies``), resolved into the managed ledger's
config; ``driver == ""`` means tiered storage is off.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from magnetar.bookkeeper.api import ReadHandle

S3_DRIVERS = ("aws-s3", "s3")
DRIVERS = ("filesystem", *S3_DRIVERS)
DEFAULT_MAX_BLOCK_SIZE = 64 * 1024 * 1024
DEFAULT_READ_BUFFER_SIZE = 1024 * 1024
DEFAULT_DELETION_LAG_MS = 4 * 3600 * 1000


class OffloadError(Exception):
    """An offload, a read of an offloaded ledger or a delete of one failed."""


class OffloadNotFoundError(OffloadError):
    """An object of an offloaded ledger is missing."""


@dataclass(frozen=True)
class OffloadPolicies:
    """Pulsar's OffloadPolicies, in the managed ledger's terms (units last)."""

    driver: str = ""
    bucket: str = ""
    region: str = ""
    service_endpoint: str = ""
    file_system_uri: str = ""
    max_block_size_bytes: int = DEFAULT_MAX_BLOCK_SIZE
    read_buffer_size_bytes: int = DEFAULT_READ_BUFFER_SIZE
    credential_id: str = ""
    credential_secret: str = ""
    threshold_bytes: int = -1  # automatic offload above this many bytes in BookKeeper; -1 off
    threshold_s: int = -1  # automatic offload of ledgers older than this; -1 off
    deletion_lag_ms: int = DEFAULT_DELETION_LAG_MS  # negative: never delete from BookKeeper

    @property
    def enabled(self) -> bool:
        return bool(self.driver)

    def check(self) -> None:
        """Raise OffloadError naming what is wrong (unsupported driver, missing bucket/URI)."""
        d = self.driver.lower()
        if not d:
            return
        if d not in DRIVERS:
            raise OffloadError(
                f"unsupported offload driver {self.driver!r} (supported: {', '.join(DRIVERS)})"
            )
        if d in S3_DRIVERS and not self.bucket:
            raise OffloadError("s3ManagedLedgerOffloadBucket is required for the aws-s3 driver")
        if d == "filesystem" and not self.file_system_uri:
            raise OffloadError("fileSystemURI is required for the filesystem driver")
        if self.max_block_size_bytes <= 0 or self.read_buffer_size_bytes <= 0:
            raise OffloadError("offload block and read buffer sizes must be positive")


# Pulsar's OffloadPolicies JSON names -> our fields (the generic managedLedgerOffload* names
# and the s3-specific ones both map, as Pulsar accepts both).
POLICY_KEYS: dict[str, str] = {
    "managedLedgerOffloadDriver": "driver",
    "managedLedgerOffloadBucket": "bucket",
    "managedLedgerOffloadRegion": "region",
    "managedLedgerOffloadServiceEndpoint": "service_endpoint",
    "fileSystemURI": "file_system_uri",
    "managedLedgerOffloadMaxBlockSizeInBytes": "max_block_size_bytes",
    "managedLedgerOffloadReadBufferSizeInBytes": "read_buffer_size_bytes",
    "managedLedgerOffloadAutoTriggerSizeThresholdBytes": "threshold_bytes",
    "managedLedgerOffloadThresholdInBytes": "threshold_bytes",
    "managedLedgerOffloadThresholdInSeconds": "threshold_s",
    "managedLedgerOffloadDeletionLagMs": "deletion_lag_ms",
    "managedLedgerOffloadDeletionLagInMillis": "deletion_lag_ms",
    # The s3-prefixed names last: where both are given, the specific one wins.
    "s3ManagedLedgerOffloadBucket": "bucket",
    "s3ManagedLedgerOffloadRegion": "region",
    "s3ManagedLedgerOffloadServiceEndpoint": "service_endpoint",
    "s3ManagedLedgerOffloadMaxBlockSizeInBytes": "max_block_size_bytes",
    "s3ManagedLedgerOffloadReadBufferSizeInBytes": "read_buffer_size_bytes",
    "s3ManagedLedgerOffloadCredentialId": "credential_id",
    "s3ManagedLedgerOffloadCredentialSecret": "credential_secret",
}
_INT_FIELDS = {
    "max_block_size_bytes",
    "read_buffer_size_bytes",
    "threshold_bytes",
    "threshold_s",
    "deletion_lag_ms",
}


def policies_from(values: Mapping[str, Any], base: OffloadPolicies | None = None) -> OffloadPolicies:
    """Overlay Pulsar-named values (a properties file or an OffloadPolicies document) on ``base``.
    Absent, None and empty values keep the base's."""
    changes: dict[str, Any] = {}
    for key, name in POLICY_KEYS.items():
        v = values.get(key)
        if v is None or v == "":
            continue
        try:
            changes[name] = int(v) if name in _INT_FIELDS else str(v)
        except (TypeError, ValueError):
            raise OffloadError(f"{key} must be an integer, got {v!r}") from None
    return _replace(base or OffloadPolicies(), changes)


def _replace(p: OffloadPolicies, changes: dict[str, Any]) -> OffloadPolicies:
    from dataclasses import replace

    return replace(p, **changes)


@dataclass(frozen=True)
class OffloadContext:
    """Pulsar's per-ledger ``offload_context``."""

    uid: str
    complete: bool = False
    bookkeeper_deleted: bool = False
    timestamp_ms: int = 0  # when the offload completed
    driver_name: str = ""
    driver_metadata: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    def metadata(self) -> dict[str, str]:
        return dict(self.driver_metadata)

    def to_json(self) -> dict:
        return {
            "uuid": self.uid,
            "complete": self.complete,
            "bookkeeperDeleted": self.bookkeeper_deleted,
            "timestamp": self.timestamp_ms,
            "driverMetadata": {"name": self.driver_name, "properties": self.metadata()},
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> OffloadContext:
        dm = d.get("driverMetadata") or {}
        return cls(
            uid=str(d["uuid"]),
            complete=bool(d.get("complete", False)),
            bookkeeper_deleted=bool(d.get("bookkeeperDeleted", False)),
            timestamp_ms=int(d.get("timestamp", 0)),
            driver_name=str(dm.get("name", "")),
            driver_metadata=tuple(sorted((str(k), str(v)) for k, v in (dm.get("properties") or {}).items())),
        )

    def __str__(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True)


@runtime_checkable
class LedgerOffloader(Protocol):
    @property
    def driver_name(self) -> str: ...

    def driver_metadata(self) -> dict[str, str]:
        """What a reader needs to find this offloader's objects (bucket, endpoint, directory)."""

    async def offload(self, handle: ReadHandle, uid: str, extra_metadata: Mapping[str, str]) -> None:
        """Copy every entry of the closed ledger behind ``handle`` to objects named by ``uid``,
        and verify them; raise OffloadError if any of it failed (partial objects removed)."""

    async def read_offloaded(
        self, ledger_id: int, uid: str, driver_metadata: Mapping[str, str]
    ) -> ReadHandle:
        """A read handle over an offloaded ledger (its index is read and checked first)."""

    async def delete_offloaded(self, ledger_id: int, uid: str, driver_metadata: Mapping[str, str]) -> None:
        """Remove an offloaded copy; missing is not an error."""


# The name the managed ledger's context and factory use.
Offloader = LedgerOffloader


async def offload_ledger(ml, ledger_id: int, *, delete_from_bookkeeper: bool = False) -> None:  # noqa: ANN001
    """Offload one closed ledger of ``ml`` now (see :mod:`.offload_process`)."""
    from magnetar.managed_ledger.offload_process import offload_one

    await offload_one(ml, ledger_id, delete_from_bookkeeper=delete_from_bookkeeper)
