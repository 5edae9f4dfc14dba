"""Schema-registry errors.

Theory of operation: every error the registry raises is a :class:`SchemaError`, itself a
:class:`magnetar.broker.errors.BrokerError`, so the broker's one translation point
(``errors.translate``) already knows the wire ``ServerError`` and the HTTP status of each:

=============================  ==========================  ======  ==========================
error                          wire ServerError            HTTP    when
=============================  ==========================  ======  ==========================
IncompatibleSchemaError        IncompatibleSchema (18)     409     a strategy rejects a schema
InvalidSchemaError             IncompatibleSchema (18)     422     malformed definition
SchemaTooLargeError            IncompatibleSchema (18)     422     definition over the limit
SchemaNotFoundError            TopicNotFound (11)          404     no (live) schema for topic
SchemaVersionNotFoundError     TopicNotFound (11)          404     that version does not exist
InvalidSchemaVersionError      IncompatibleSchema (18)     422     version bytes not 8 long
SchemaConcurrentUpdateError    ServiceNotReady (6)         409     CAS lost too many times
=============================  ==========================  ======  ==========================

An invalid definition goes out as IncompatibleSchema on the wire (as Pulsar maps its
InvalidSchemaDataException) because the client must fail fast rather than retry it.
"""

from __future__ import annotations

from magnetar.broker import errors as broker_errors


class SchemaError(broker_errors.BrokerError):
    """Base of every schema-registry error (carries no codes itself: see subclasses)."""


class IncompatibleSchemaError(SchemaError, broker_errors.IncompatibleSchemaError):
    """The schema is not compatible with the topic's schema under its strategy."""


class InvalidSchemaError(SchemaError):
    """The schema definition is malformed (broken Avro JSON, unknown type, bad KeyValue ...)."""

    server_error = broker_errors.Code.IncompatibleSchema
    http_status = 422


class SchemaTooLargeError(InvalidSchemaError):
    """The definition (data plus properties) is over ``schema_bytes_max``."""


class InvalidSchemaVersionError(InvalidSchemaError):
    """Schema-version bytes that are not an 8-byte big-endian long (or a negative one)."""


class SchemaNotFoundError(SchemaError):
    """The topic has no schema, or its latest schema is a deletion marker."""

    server_error = broker_errors.Code.TopicNotFound
    http_status = 404


class SchemaVersionNotFoundError(SchemaNotFoundError):
    """The topic has no schema with the requested version."""


class SchemaConcurrentUpdateError(SchemaError):
    """Gave up after losing the compare-and-set on the schema locator too many times."""

    server_error = broker_errors.Code.ServiceNotReady
    http_status = 409
