"""Which worker runs which instance: membership, a leader-elected scheduler, the assignment table.

Theory of operation: the workers of one cluster share a metadata store (the
cluster's ZooKeeper, ``configurationMetadataStoreUrl``).  Each worker

* registers itself as an **ephemeral** node ``/admin/functions-workers/{workerId}``
  holding ``{"workerId", "webServiceUrl"}`` -- a worker that dies (even kill -9)
  disappears from the membership when its session expires;
* joins the election on ``/admin/functions-leader``
  (:class:`~magnetar.metadata.coordination.election.LeaderElection`, Pulsar's
  leader worker).

Only the leader schedules: from the functions' definitions (every instance
``0..parallelism-1`` of each) and the live members it computes the assignment
with :func:`assign` and writes it, when it changed, as one JSON document
``/admin/functions-assignments`` = ``{"fqfn:instance": workerId}`` (one write,
so a reader sees one whole table).  :func:`assign` is sticky: an instance stays
on its worker while that worker is alive; instances of dead workers and new
instances go to the least loaded live worker (ties by worker id), so a killed
worker's instances are rescheduled on the others, and a worker that joins
takes new work without moving running instances.  Every worker (the leader too)
reads the table and runs the instances assigned to it (``FunctionsWorker.reconcile``).

Pulsar keeps assignments in a compacted system topic; a metadata-store node is
the same one-writer/many-readers table, with watches for the readers.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from magnetar.metadata.api import AlreadyExists, MetadataError, MetadataStore, NotFound
from magnetar.metadata.coordination.election import LeaderElection

log = logging.getLogger(__name__)

WORKERS_ROOT = "/admin/functions-workers"
LEADER_PATH = "/admin/functions-leader"
ASSIGNMENTS_PATH = "/admin/functions-assignments"


def instance_key(fqfn: str, instance: int) -> str:
    return f"{fqfn}:{instance}"


def assign(instances: Iterable[str], workers: Iterable[str], previous: Mapping[str, str]) -> dict[str, str]:
    """Sticky least-loaded assignment of instance keys to live worker ids (empty without workers)."""
    live = sorted(set(workers))
    if not live:
        return {}
    load = dict.fromkeys(live, 0)
    out: dict[str, str] = {}
    pending = []
    for key in sorted(set(instances)):
        owner = previous.get(key)
        if owner in load:
            out[key] = owner
            load[owner] += 1
        else:
            pending.append(key)
    for key in pending:
        owner = min(live, key=lambda w: (load[w], w))
        out[key] = owner
        load[owner] += 1
    return out


class ClusterMembership:
    """One worker's membership node, its candidacy, and the assignment table."""

    def __init__(self, store: MetadataStore, worker_id: str, web_url: str) -> None:
        self.store = store
        self.worker_id = worker_id
        self.web_url = web_url
        self.election = LeaderElection(store, LEADER_PATH, worker_id.encode())

    @property
    def is_leader(self) -> bool:
        return self.election.is_leader

    async def start(self) -> None:
        await self.ensure_registered()
        await self.election.start()

    async def close(self) -> None:
        await self.election.close()
        try:
            await self.store.delete(f"{WORKERS_ROOT}/{self.worker_id}")
        except (NotFound, MetadataError):
            pass

    async def ensure_registered(self) -> None:
        """(Re)create our ephemeral node -- after a lost session it is gone."""
        path = f"{WORKERS_ROOT}/{self.worker_id}"
        got = await self.store.get(path)
        if got is not None:
            if got.stat.ephemeral_owner == self.store.session_id:
                return
            raise RuntimeError(f"another live worker is registered as {self.worker_id!r}")
        doc = {"workerId": self.worker_id, "webServiceUrl": self.web_url}
        try:
            await self.store.put(path, json.dumps(doc).encode(), -1, ephemeral=True)
        except AlreadyExists:
            pass

    async def workers(self) -> dict[str, dict[str, Any]]:
        try:
            names = await self.store.children(WORKERS_ROOT)
        except NotFound:
            return {}
        out = {}
        for name in names:
            got = await self.store.get(f"{WORKERS_ROOT}/{name}")
            if got is not None:
                out[name] = json.loads(got.value)
        return out

    async def assignments(self) -> dict[str, str]:
        got = await self.store.get(ASSIGNMENTS_PATH)
        return json.loads(got.value) if got is not None else {}

    async def schedule(self, instances: Iterable[str]) -> dict[str, str]:
        """Leader only: compute the table from the live members and write it if it changed."""
        previous = await self.assignments()
        table = assign(instances, (await self.workers()).keys(), previous)
        if table != previous and self.is_leader:
            await self.store.put(ASSIGNMENTS_PATH, json.dumps(table, sort_keys=True).encode())
            moved = sum(1 for k, w in table.items() if previous.get(k) not in (None, w))
            log.info("functions scheduler: %d instances assigned (%d moved)", len(table), moved)
        return table
