"""Schema registry REST operations over ``broker.schema.SchemaRegistry``, and compaction.

Theory of operation: the schema id is the topic without domain and partition
suffix; the registry keys everything that way, so the REST layer passes
``persistent://t/ns/x``.  Compatibility decisions use the *effective* schema
policies: the topic's ``schemaCompatibilityStrategy`` override (topic
policies document) over the namespace's, over the broker default
(``resolve_policies``).  Compaction routes hand the topic to the broker's
CompactionService (one run per topic, 409 while running).
"""

from __future__ import annotations

from typing import Any

from magnetar.broker import errors
from magnetar.broker.admin.topic_policies import TopicPolicyAdmin
from magnetar.broker.schema import SchemaNotFoundError, SchemaVersion, resolve_policies
from magnetar.broker.schema import types as st
from magnetar.broker.service.api import BrokerServiceView
from magnetar.broker.service.names import parse_topic


class SchemaAdmin:
    def __init__(self, svc: BrokerServiceView, topic_policies: TopicPolicyAdmin) -> None:
        self._svc = svc
        self._tp = topic_policies

    async def _policies(self, topic: str) -> Any:
        ref = parse_topic(topic)
        ns = await self._svc.resources.namespaces.get(ref.namespace)
        if ns is None:
            raise errors.NamespaceNotFoundError("Namespace does not exist")
        tpol = await self._tp.document(ref) or None
        return resolve_policies(self._svc.schemas.config, ns, tpol, is_system_topic=ref.is_system)

    async def get(self, topic: str, version: int | None = None) -> dict:
        await self._policies(topic)
        rec = await self._svc.schemas.get_schema(topic, version)
        return st.get_schema_response(rec)

    async def get_all(self, topic: str) -> dict:
        await self._policies(topic)
        recs = await self._svc.schemas.get_all(topic)
        if not recs:
            raise SchemaNotFoundError("Schema not found")
        return st.get_all_schemas_response(recs)

    async def post(self, topic: str, payload: Any) -> dict:
        pol = await self._policies(topic)
        info = st.schema_info_from_post_payload(payload, name=parse_topic(topic).local_name)
        vb = await self._svc.schemas.put_schema_if_compatible(
            topic, info, pol.strategy, pol.allow_auto_update
        )
        return st.post_schema_response(SchemaVersion.from_bytes(vb).value)

    async def delete(self, topic: str, force: bool = False) -> dict:
        await self._policies(topic)
        v = await self._svc.schemas.delete_schema(topic, force)
        if v is None:
            raise SchemaNotFoundError("Schema not found")
        return st.long_schema_version_response(v)

    async def compatibility(self, topic: str, payload: Any) -> dict:
        pol = await self._policies(topic)
        info = st.schema_info_from_post_payload(payload, name=parse_topic(topic).local_name)
        ok, _reason = await self._svc.schemas.check_compatibility(topic, info, pol.strategy)
        return st.compatibility_response(ok, pol.strategy.value)

    async def version(self, topic: str, payload: Any) -> dict:
        await self._policies(topic)
        info = st.schema_info_from_post_payload(payload, name=parse_topic(topic).local_name)
        v = await self._svc.schemas.find_version(topic, info)
        if v is None:
            raise SchemaNotFoundError("Schema not found")
        return st.long_schema_version_response(v)

    # ------------------------------------------------------------ compaction
    def _compaction(self) -> Any:
        c = getattr(self._svc, "compaction", None)
        if c is None:
            raise errors.NotAllowedError("Compaction is not available on this broker")
        return c.service

    async def _require_topic(self, topic: str) -> str:
        ref = parse_topic(topic)
        if not ref.persistent:
            raise errors.NotAllowedError("Compaction is not allowed on a non-persistent topic")
        await self._svc.require_namespace(ref.namespace)
        if await self._svc.partitions_of(ref):
            raise errors.NotAllowedError("Compaction is not allowed on a partitioned topic: use a partition")
        await self._svc.topics.get_topic(ref, create=False)
        return ref.full_name

    async def compact(self, topic: str) -> None:
        self._compaction().trigger(await self._require_topic(topic))

    async def compaction_status(self, topic: str) -> dict:
        return self._compaction().status(await self._require_topic(topic))
