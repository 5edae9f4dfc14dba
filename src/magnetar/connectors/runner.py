"""Connectors as functions: ``sink_function`` and ``source_function`` wrap a Sink / Source class.

Theory of operation: the worker runs connectors with the same instance loop
as functions.  ``sink_function(SinkClass)`` is a function class whose
``process(value, context)`` opens the sink once (with the connector's config,
``context.get_user_config_map()``), wraps the input in a
:class:`~magnetar.connectors.api.Record` and writes it; a failed record raises
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
                value=value,
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
