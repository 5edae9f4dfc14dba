"""Coordination recipes on any MetadataStore: distributed lock, leader election, CAS update loop.

Like kazoo's recipes they use only the store's public API, so they run the same
on memory, RocksDB and ZooKeeper.
"""

from magnetar.metadata.coordination.cas import DELETE, NO_CHANGE, CasConflict, CasResult, update_with_cas
from magnetar.metadata.coordination.election import ElectionState, LeaderElection, LeaderEvent
from magnetar.metadata.coordination.lock import DistributedLock, LockBusy, LockLost, LockState

__all__ = [
    "DELETE",
    "NO_CHANGE",
    "CasConflict",
    "CasResult",
    "DistributedLock",
    "ElectionState",
    "LeaderElection",
    "LeaderEvent",
    "LockBusy",
    "LockLost",
    "LockState",
    "update_with_cas",
]
