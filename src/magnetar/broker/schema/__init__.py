"""magnetar.broker.schema -- the schema registry (Pulsar's SchemaRegistryService).

Layout (each module opens with its theory of operation):

* ``types.py``         -- SchemaType (Java values; proto numbers 0..20), SchemaInfo, SchemaVersion
                          (8-byte big-endian long), SchemaRecord, KeyValue encoding, REST JSON shapes.
* ``errors.py``        -- SchemaError subclasses of BrokerError (wire code + HTTP status each).
* ``policies.py``      -- SchemaCompatibilityStrategy, SchemaRegistryConfig (broker keys),
                          resolve_policies (topic policy > namespace policy > broker default).
* ``definitions.py``   -- what a well-formed definition is per type (fastavro, protobuf descriptors).
* ``avro_compat.py``   -- Avro schema resolution: can a reader schema read a writer's data?
* ``compatibility.py`` -- strategies applied per type (Avro/JSON, Protobuf, KeyValue, primitives).
* ``storage.py``       -- versions on the metadata store at ``/schemas/{tenant}/{ns}/{topic}``.
* ``registry.py``      -- SchemaRegistry: the service API below.
* ``wire.py``          -- proto ``Schema`` <-> SchemaInfo (schema_info_from_command, to_wire_schema).

The service API (for the PRODUCER/SUBSCRIBE/GET_SCHEMA handlers and the REST routes)
=====================================================================================

::

    from magnetar.broker.schema import (
        SchemaRegistry, SchemaRegistryConfig, SchemaInfo, SchemaType, SchemaVersion,
        SchemaCompatibilityStrategy, resolve_policies, types as schema_types,
    )

    registry = SchemaRegistry(metadata_store, clock,
                              SchemaRegistryConfig.from_properties(broker_config.as_properties()))

Topics are names (``"persistent://t/ns/x-partition-3"``, short names, or a TopicName); the
registry keys everything by the base topic (``t/ns/x``), so partitions share one history.
Every error is a ``errors.BrokerError`` subclass (``.server_error`` for the wire, ``.http_status``
and ``.message`` for REST); metadata-store errors propagate unchanged (``errors.translate``).

Policies, once per request (namespace Policies JSON, TopicPolicies JSON or None)::

    pol = resolve_policies(registry.config, ns_policies, topic_policies,
                           is_system_topic=topic_name.is_system_topic)
    # pol.strategy, pol.allow_auto_update, pol.validation_enforced

Wire -> SchemaInfo and back (``schema.wire``)::

    from magnetar.broker.schema.wire import schema_info_from_command, to_wire_schema
    info = schema_info_from_command(cmd)      # PRODUCER/SUBSCRIBE pb command; None if no schema field

PRODUCER::

    version_bytes = await registry.add_producer_schema(topic, info_or_None, pol)
    # -> PRODUCER_SUCCESS.schema_version (b"" for a schemaless producer).
    # IncompatibleSchemaError (ServerError 18) with the reason; InvalidSchemaError (also 18)
    # for a malformed/oversized definition.

SUBSCRIBE::

    await registry.add_consumer_schema(topic, info_or_None, pol, topic_idle=...)
    # topic_idle: no producers, no non-AUTO_CONSUME consumers, no stored data.

GET_OR_CREATE_SCHEMA (AUTO_PRODUCE and multi-schema producers)::

    vb = await registry.put_schema_if_compatible(topic, schema_info_from_command(cmd),
                                                 pol.strategy, pol.allow_auto_update)

GET_SCHEMA (version bytes absent/empty/-1 = latest)::

    rec = await registry.get_schema(topic, cmd.schema_version if cmd.HasField("schema_version") else None)
    commands.get_schema_response(cmd.request_id, to_wire_schema(rec.info), rec.version_bytes)
    # SchemaNotFoundError / SchemaVersionNotFoundError: ServerError TopicNotFound, and Pulsar's
    # message "Topic not found or no-schema" is fine to use; InvalidSchemaVersionError for bad bytes.

REST ``/admin/v2/schemas/{tenant}/{ns}/{topic}/...`` (shapes in ``types``)::

    GET  /schema            rec = await registry.get_schema(topic)           -> types.get_schema_response(rec)
    GET  /schema/{version}  rec = await registry.get_schema(topic, int(v))   -> types.get_schema_response(rec)
    GET  /schemas           recs = await registry.get_all(topic)             -> types.get_all_schemas_response(recs)
                            (404 "Schema not found" if recs == [])
    POST /schema            info = types.schema_info_from_post_payload(body, name=topic_local_name)
                            vb = await registry.put_schema_if_compatible(topic, info, pol.strategy,
                                                                         pol.allow_auto_update)
                            -> types.post_schema_response(SchemaVersion.from_bytes(vb).value)
                            (409 IncompatibleSchemaError, 422 InvalidSchemaError/SchemaTooLargeError)
    DELETE /schema?force=   v = await registry.delete_schema(topic, force)   -> types.long_schema_version_response(v)
    POST /compatibility     ok, reason = await registry.check_compatibility(topic, info, pol.strategy)
                            -> types.compatibility_response(ok, pol.strategy.value)
    POST /version           v = await registry.find_version(topic, info)     -> 404 if None,
                            else types.long_schema_version_response(v)

Deleting a topic (non-partitioned topic, or a partitioned topic's metadata)::

    await registry.delete(topic)         # every version and the locator; idempotent
    # The history belongs to the base topic: delete it with a non-partitioned topic or with the
    # partitioned topic as a whole -- never when a single partition goes away.
"""

from magnetar.broker.schema import types
from magnetar.broker.schema.errors import (
    IncompatibleSchemaError,
    InvalidSchemaError,
    InvalidSchemaVersionError,
    SchemaConcurrentUpdateError,
    SchemaError,
    SchemaNotFoundError,
    SchemaTooLargeError,
    SchemaVersionNotFoundError,
)
from magnetar.broker.schema.policies import (
    EffectiveSchemaPolicies,
    SchemaCompatibilityStrategy,
    SchemaRegistryConfig,
    resolve_policies,
)
from magnetar.broker.schema.registry import SchemaRegistry, is_schemaless
from magnetar.broker.schema.storage import schema_id
from magnetar.broker.schema.types import SchemaInfo, SchemaRecord, SchemaType, SchemaVersion

__all__ = [
    "EffectiveSchemaPolicies",
    "IncompatibleSchemaError",
    "InvalidSchemaError",
    "InvalidSchemaVersionError",
    "SchemaCompatibilityStrategy",
    "SchemaConcurrentUpdateError",
    "SchemaError",
    "SchemaInfo",
    "SchemaNotFoundError",
    "SchemaRecord",
    "SchemaRegistry",
    "SchemaRegistryConfig",
    "SchemaTooLargeError",
    "SchemaType",
    "SchemaVersion",
    "SchemaVersionNotFoundError",
    "is_schemaless",
    "resolve_policies",
    "schema_id",
    "types",
]
