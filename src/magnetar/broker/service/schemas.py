"""Schemas on the binary protocol: PRODUCER/SUBSCRIBE checks and GET_SCHEMA, over the registry.

Theory of operation: ``broker.schema.SchemaRegistry`` owns the rules
(compatibility strategies, versions, storage); this module only asks it the
questions the command handlers have, with the effective policies of the
topic's namespace:

* PRODUCER -- the schema version to put in PRODUCER_SUCCESS (``b""`` when the
  producer sends none), or IncompatibleSchema (ServerError 18);
* SUBSCRIBE -- a consumer may define the schema of an idle schemaless topic
  (no producers, no consumers, nothing stored), else it must be able to read it;
* GET_OR_CREATE_SCHEMA -- register (under the compatibility rules) or find a
  schema on a loaded topic; its version (a geo-replicator's producer uses it
  before sending entries of a schema the remote topic may not have yet);
* GET_SCHEMA -- the latest (or a given) version, or Pulsar's "Topic not found or
  no-schema" error form.

Partitions share their base topic's schema (the registry keys by the base name).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from magnetar.broker import errors
from magnetar.broker.schema import SchemaNotFoundError, SchemaRegistry, resolve_policies
from magnetar.broker.schema.wire import schema_info_from_command, to_wire_schema
from magnetar.broker.service.admission import topic_policies_of
from magnetar.protocol import server_commands as cmds
from magnetar.protocol.enums import ServerError

if TYPE_CHECKING:
    from magnetar.broker.service.broker_service import BrokerService
    from magnetar.broker.service.topic import PersistentTopic

NO_SCHEMA_MESSAGE = "Topic not found or no-schema"


async def _policies(svc: BrokerService, topic: PersistentTopic):  # type: ignore[no-untyped-def]
    ns_policies = await svc.resources.namespaces.get(topic.ref.namespace)
    tp = topic_policies_of(topic)  # the topic-level override (.admission)
    return resolve_policies(svc.schemas.config, ns_policies, tp, is_system_topic=topic.ref.is_system)


async def producer_schema_version(svc: BrokerService, topic: PersistentTopic, cmd: Any) -> bytes:
    """PRODUCER: register/check the producer's schema; the version bytes for PRODUCER_SUCCESS."""
    info = schema_info_from_command(cmd)
    return await svc.schemas.add_producer_schema(topic.name, info, await _policies(svc, topic))


async def get_or_create_schema_version(svc: BrokerService, topic: PersistentTopic, cmd: Any) -> bytes:
    """GET_OR_CREATE_SCHEMA: the version of the command's schema on ``topic`` (new if compatible)."""
    info = schema_info_from_command(cmd)
    if info is None:
        raise errors.BrokerError("GET_OR_CREATE_SCHEMA without a schema")
    pol = await _policies(svc, topic)
    return await svc.schemas.put_schema_if_compatible(topic.name, info, pol.strategy, pol.allow_auto_update)


async def check_consumer_schema(svc: BrokerService, topic: PersistentTopic, cmd: Any) -> None:
    """SUBSCRIBE: may this consumer read (or define) the topic's schema?"""
    info = schema_info_from_command(cmd)
    if info is None:
        return
    idle = not topic.producers and not topic.has_clients and topic.number_of_entries == 0
    await svc.schemas.add_consumer_schema(topic.name, info, await _policies(svc, topic), topic_idle=idle)


async def get_schema_answer(
    registry: SchemaRegistry, request_id: int, topic: str, version: bytes | None
) -> bytes:
    """The GET_SCHEMA_RESPONSE frame, in its success or its error form."""
    try:
        rec = await registry.get_schema(topic, version or None)
    except SchemaNotFoundError:
        return cmds.get_schema_response(
            request_id, error_code=ServerError.TopicNotFound, error_message=NO_SCHEMA_MESSAGE
        )
    return cmds.get_schema_response(request_id, to_wire_schema(rec.info), rec.version_bytes)
