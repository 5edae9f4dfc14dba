"""Topic lifecycle: partitioned metadata, create, list, delete -- what the service itself needs.

Theory of operation: a mixin of :class:`BrokerService` holding the topic
operations the service layer uses itself -- lookup answers partitioned
metadata, the registry enforces ``maxTopicsPerNamespace`` and lists topics,
replication and inactive-topic policies delete topics -- and the HTTP layer
calls for creating, listing and deleting (the service API in
``magnetar.broker``'s docstring).  Everything else about a topic's state
(stats, internal stats, subscriptions, cursor moves, peek, unload,
terminate) is ``broker.admin.topic_ops``: one owner, driving the service
through ``BrokerServiceView``.  Each operation here
validates the name, checks that the namespace exists (404 otherwise), then
works on the partitioned-topic metadata and the topic registry.  Errors are
``broker.errors`` types carrying the HTTP status Pulsar answers with.

Partitioned-metadata rules (Pulsar's): an existing partitioned topic answers
its count; anything else answers 0, except that with
``check_allow_auto_creation`` and auto-creation of type ``partitioned`` an
absent topic gets metadata with the default partition count first.
"""

from __future__ import annotations

from typing import Any

from magnetar.broker import errors
from magnetar.broker.service.names import (
    PARTITION_SUFFIX,
    TopicRef,
    from_managed_ledger_name,
    parse_namespace,
    parse_topic,
    topic_ref,
)


class TopicAdmin:
    # Provided by BrokerService.
    config: Any
    resources: Any
    topics: Any
    ml_factory: Any
    schemas: Any
    compaction: Any

    async def require_namespace(self, namespace: str) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    async def partitions_of(self, ref: TopicRef) -> int | None:
        """The partition count of a partitioned topic; None when ``ref`` is not one."""
        return await self.resources.partitioned_topics.partitions(
            ref.tenant, ref.namespace_portion, ref.domain, ref.local_name
        )

    # ------------------------------------------------------------ limits
    async def check_max_topics(self, ref: TopicRef, adding: int) -> None:
        """``maxTopicsPerNamespace`` (the namespace's policy, else the broker's; 0 = none):
        refuse creating ``adding`` more topics (partitions count one each, system topics not at
        all) in a namespace that would then hold more, as Pulsar does (HTTP 412; on the binary
        protocol NotAllowedError, which the client does not retry)."""
        if ref.is_system:
            return
        policies = await self.resources.namespaces.get(ref.namespace) or {}
        limit = policies.get("max_topics_per_namespace")
        if limit is None:
            limit = self.config.max_topics_per_namespace
        if not limit or limit <= 0:
            return
        count = len(await self.list_topics(ref.namespace, "ALL"))
        if count + adding > limit:
            raise errors.PreconditionFailedError(
                f"Exceed maximum number of topics in namespace. Current: {count}, Max: {limit}"
            )

    # ------------------------------------------------------------ partitioned metadata
    async def get_partitioned_metadata(self, topic: str, check_allow_auto_creation: bool = False) -> int:
        ref = parse_topic(topic)
        await self.require_namespace(ref.namespace)
        n = await self.partitions_of(ref)
        if n is not None:
            return n
        if not check_allow_auto_creation or ref.is_partition:
            return 0
        allowed, kind, default_n = await self.topics.auto_creation(ref)
        if not allowed or kind != "partitioned" or await self.topics.exists(ref):
            return 0
        await self.check_max_topics(ref, default_n)
        try:
            await self.resources.partitioned_topics.create(
                ref.tenant, ref.namespace_portion, ref.domain, ref.local_name, default_n
            )
        except errors.AlreadyExistsError:
            pass
        return await self.partitions_of(ref) or 0

    async def create_partitioned_topic(
        self, topic: str, num_partitions: int, properties: dict | None = None
    ) -> None:
        ref = parse_topic(topic)
        await self.require_namespace(ref.namespace)
        if num_partitions <= 0:
            raise errors.InvalidPartitionCountError("Number of partitions should be more than 0")
        limit = self.config.max_num_partitions_per_partitioned_topic
        if limit and num_partitions > limit:
            raise errors.InvalidPartitionCountError(
                f"Number of partitions should be less than or equal to {limit}"
            )
        if PARTITION_SUFFIX in ref.local_name:
            raise errors.PreconditionFailedError("Partitioned Topic Name should not contain '-partition-'")
        if await self.topics.exists(ref):
            raise errors.AlreadyExistsError("This topic already exists")
        await self.check_max_topics(ref, num_partitions)
        await self.resources.partitioned_topics.create(
            ref.tenant, ref.namespace_portion, ref.domain, ref.local_name, num_partitions, properties
        )

    async def update_partitioned_topic(self, topic: str, num_partitions: int) -> None:
        ref = parse_topic(topic)
        await self.require_namespace(ref.namespace)
        n = await self.partitions_of(ref)
        if n is None:
            raise errors.TopicNotFoundError("Partitioned topic does not exist")
        if num_partitions <= n:
            raise errors.UnprocessableError("Number of partitions can only be increased")
        await self.resources.partitioned_topics.update(
            ref.tenant, ref.namespace_portion, ref.domain, ref.local_name, num_partitions
        )

    async def create_non_partitioned_topic(self, topic: str) -> None:
        ref = parse_topic(topic)
        await self.require_namespace(ref.namespace)
        if await self.partitions_of(ref) is not None or await self.topics.exists(ref):
            raise errors.AlreadyExistsError("This topic already exists")
        await self.topics.get_topic(ref, create=True, explicit=True)

    # ------------------------------------------------------------ listing
    async def list_topics(self, namespace: str, mode: str = "PERSISTENT") -> list[str]:
        """Topics of a namespace, partitions included, system topics left out.  ``mode`` is
        PERSISTENT, NON_PERSISTENT or ALL (GET_TOPICS_OF_NAMESPACE's modes).  Non-persistent
        topics exist only while loaded, plus the partitions of partitioned ones."""
        tenant, ns = parse_namespace(namespace)
        await self.require_namespace(namespace)
        mode = mode.upper()
        domains = {"PERSISTENT": ("persistent",), "NON_PERSISTENT": ("non-persistent",)}.get(
            mode, ("persistent", "non-persistent")
        )
        names: set[str] = set()
        if "persistent" in domains:
            for ml_name in await self.ml_factory.list_names(f"{tenant}/{ns}/persistent/"):
                ref = from_managed_ledger_name(ml_name)
                if ref is not None:
                    names.add(ref.full_name)
        for t in self.topics.loaded():
            if t.ref.namespace == namespace and t.ref.domain in domains:
                names.add(t.name)
        for domain in domains:
            for local in await self.resources.partitioned_topics.list(tenant, ns, domain):
                base = topic_ref(domain, tenant, ns, local)
                n = await self.partitions_of(base) or 0
                names.update(base.partition(i).full_name for i in range(n))
        return sorted(n for n in names if not parse_topic(n).is_system)

    async def list_partitioned_topics(self, namespace: str) -> list[str]:
        tenant, ns = parse_namespace(namespace)
        await self.require_namespace(namespace)
        locals_ = await self.resources.partitioned_topics.list(tenant, ns, "persistent")
        return sorted(topic_ref("persistent", tenant, ns, n).full_name for n in locals_)

    # ------------------------------------------------------------ delete / unload
    async def delete_topic(self, topic: str, force: bool = False) -> None:
        ref = parse_topic(topic)
        await self.require_namespace(ref.namespace)
        if await self.partitions_of(ref) is not None:
            raise errors.AlreadyExistsError(
                f"{ref.full_name} is a partitioned topic, instead of calling delete topic, "
                "please call delete-partitioned-topic."
            )
        if not force:
            self._refuse_replicated_delete([ref])
        await self.compaction.delete_state(ref.full_name, force)
        await self.topics.delete(ref, force)
        if not ref.is_partition:
            await self.schemas.delete(ref.full_name)

    async def delete_partitioned_topic(self, topic: str, force: bool = False) -> None:
        ref = parse_topic(topic)
        await self.require_namespace(ref.namespace)
        if PARTITION_SUFFIX in ref.local_name and ref.is_partition:
            raise errors.PreconditionFailedError("Partitioned Topic Name should not contain '-partition-'")
        n = await self.partitions_of(ref)
        if n is None:
            raise errors.TopicNotFoundError("Partitioned topic does not exist")
        parts = [ref.partition(i) for i in range(n)]
        if not force:
            self._refuse_replicated_delete(parts)
            for p in parts:
                t = self.topics.get_loaded(p.full_name)
                if t is not None and t.has_clients:
                    raise errors.PreconditionFailedError("Topic has active producers/subscriptions")
        for p in parts:
            try:
                await self.compaction.delete_state(p.full_name, True)
                await self.topics.delete(p, force=True)
            except errors.TopicNotFoundError:
                pass
        await self.resources.partitioned_topics.delete(
            ref.tenant, ref.namespace_portion, ref.domain, ref.local_name
        )
        await self.schemas.delete(ref.full_name)

    def _refuse_replicated_delete(self, refs: list[TopicRef]) -> None:
        """Pulsar's rule for geo-replicated topics: a delete without ``force`` of a topic with
        replicators is refused (the copies in the other clusters are never deleted from here;
        a forced delete removes the local topic only, its replicators closed first)."""
        for r in refs:
            t = self.topics.get_loaded(r.full_name)
            clusters = sorted(t.replicators) if t is not None else []
            if clusters:
                raise errors.BadRequestError(f"Delete forbidden topic is replicated on clusters {clusters}")

    def web_service_url(self) -> str:  # pragma: no cover - overridden
        raise NotImplementedError
