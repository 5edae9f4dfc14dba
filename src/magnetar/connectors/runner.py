"""Connectors as functions: ``sink_function`` and ``source_function`` wrap a Sink / Source class.

Theory of operation: the worker runs connectors with the same instance loop
as functions.  ``sink_function(SinkClass)`` is a function class whose
``process(value, context)`` opens the sink once (with the connector's config,
``context.get_user_config_map()``), wraps the input in a
:class:`~magnetar.connectors.api.Record` and writes it (a value from a topic
with an AVRO or JSON schema is decoded into a dict first, with the writer's
schema version fetched from the broker: :func:`decode_by_schema`); a failed record raises
:class:`SinkWriteError`, which the instance answers with a negative ack (the
message comes back: retry without loss).  A failed write also closes and
forgets the sink so the next attempt opens it afresh (a fresh connection after
a database restart).  ``source_function(SourceClass)``'s ``process(None,
context)`` returns the source's next value; the instance's source loop calls it
repeatedly and publishes what it returns to the output topic.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from magnetar.connectors.api import Record


def decode_by_schema(value: Any, context: Any) -> Any:
    """The record's value as its topic's schema reads it: an AVRO or JSON record -> a dict.

    Other topics (no schema, bytes, string...) keep the value as the instance decoded it.
    """
    schema = context.get_message_schema() if hasattr(context, "get_message_schema") else None
    if schema is None:
        return value
    kind, definition = schema
    data = context.get_message_data()
    if kind == "AVRO":
        import io

        import fastavro

        parsed = _AVRO_SCHEMAS.get(definition)
        if parsed is None:
            parsed = _AVRO_SCHEMAS[definition] = fastavro.parse_schema(json.loads(definition))
        return fastavro.schemaless_reader(io.BytesIO(data), parsed)
    if kind == "JSON":
        return json.loads(data)
    return value


_AVRO_SCHEMAS: dict[bytes, Any] = {}


class SinkWriteError(Exception):
    """The sink failed (or refused) a record; it will be redelivered."""


def sink_function(sink_class: type) -> type:
    class SinkFunction:
        def __init__(self) -> None:
            self._sink: Any = None

        def process(self, value: Any, context: Any) -> None:
            if self._sink is None:
                sink = sink_class()
                sink.open(context.get_user_config_map(), context)
                self._sink = sink
            record = Record(
                value=decode_by_schema(value, context),
                key=context.get_message_key(),
                properties=context.get_message_properties(),
                topic_name=context.get_current_message_topic_name(),
                message_id=context.get_message_id(),
                event_time=context.get_message_eventtime(),
            )
            try:
                self._sink.write(record)
            except Exception as exc:
                self._reset()
                raise SinkWriteError(f"{type(exc).__name__}: {exc}") from exc
            if record.failed:
                raise SinkWriteError("the sink failed the record")
            return None

        def _reset(self) -> None:
            sink, self._sink = self._sink, None
            with contextlib.suppress(Exception):
                sink.close()

    SinkFunction.__name__ = f"SinkFunction[{sink_class.__name__}]"
    return SinkFunction


def source_function(source_class: type) -> type:
    class SourceFunction:
        is_source = True

        def __init__(self) -> None:
            self._source: Any = None

        def process(self, _value: Any, context: Any) -> Any:
            if self._source is None:
                source = source_class()
                source.open(context.get_user_config_map(), context)
                self._source = source
            value = self._source.read()
            if isinstance(value, dict | list):
                return json.dumps(value)
            return value

    SourceFunction.__name__ = f"SourceFunction[{source_class.__name__}]"
    return SourceFunction
