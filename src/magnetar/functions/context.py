"""``Context``: what a function sees of its world, with the methods of ``pulsar.Function``'s context.

Theory of operation: one Context per instance; the instance loop sets the
message being processed (:meth:`Context.set_message`) before it calls the
user's ``process`` on the user-code thread, so every ``get_message_*`` answers
about that message.  The methods and their argument names are those of
``pulsar/functions/context.py`` in the ``pulsar-client`` package, so code
written for Pulsar runs unchanged:

* message: ``get_message_id``, ``get_message_key``, ``get_message_eventtime``,
  ``get_message_properties``, ``get_current_message_topic_name``,
  ``get_partition_key``, ``get_ordering_key``;
* identity: ``get_function_name``/``tenant``/``namespace``/``id``/``version``,
  ``get_instance_id``, ``get_input_topics``, ``get_output_topic``;
* config: ``get_user_config_value``, ``get_user_config_map``, ``get_secret``
  (the function's ``secrets`` map: ``env:NAME`` reads an environment variable,
  ``file:/path`` a file, anything else is the value; a name not in the map is
  looked up in the environment, as Pulsar's environment secrets provider does);
* output: ``publish(topic, message, serde_class_name, properties, ...)`` --
  queued on the instance's producer for that topic (``publish_fn``);
* metrics and state: ``record_metric``, ``incr_counter``, ``get_counter``,
  ``del_counter``, ``put_state``, ``get_state`` (durable, see ``state``);
* ``get_logger``: a logger whose records also go to the log topic, if any.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from magnetar.functions.config import FunctionConfig
from magnetar.functions.loader import serializer


class Context:
    def __init__(
        self,
        config: FunctionConfig,
        instance_id: int,
        *,
        state: Any,
        publish_fn: Callable[..., Any],
        logger: logging.Logger,
        metrics: dict[str, dict[str, float]],
        function_id: str = "",
        version: str = "0",
        schema_fn: Callable[[str, bytes], tuple[str, bytes] | None] | None = None,
    ) -> None:
        self._schema_fn = schema_fn
        self._config = config
        self._instance_id = instance_id
        self._state = state
        self._publish_fn = publish_fn
        self._logger = logger
        self._metrics = metrics
        self._function_id = function_id or config.fqfn
        self._version = version
        self._message: Any = None

    def set_message(self, message: Any) -> None:
        self._message = message

    # --- the message being processed ---------------------------------------------------------

    def get_message_id(self) -> Any:
        return self._message.message_id() if self._message is not None else None

    def get_message_key(self) -> str | None:
        if self._message is None or not self._message.partition_key():
            return None
        return self._message.partition_key()

    def get_partition_key(self) -> str | None:
        return self.get_message_key()

    def get_ordering_key(self) -> bytes | None:
        return self._message.ordering_key() if self._message is not None else None

    def get_message_eventtime(self) -> int:
        return self._message.event_timestamp() if self._message is not None else 0

    def get_message_properties(self) -> dict[str, str]:
        return dict(self._message.properties()) if self._message is not None else {}

    def get_message_data(self) -> bytes | None:
        """The current message's payload as sent (Magnetar's: the connectors decode it by schema)."""
        return self._message.data() if self._message is not None else None

    def get_message_schema(self) -> tuple[str, bytes] | None:
        """``(type name, definition)`` of the schema the current message was written with, or None."""
        if self._message is None or self._schema_fn is None:
            return None
        return self._schema_fn(self._message.topic_name(), self._message.schema_version() or b"")

    def get_current_message_topic_name(self) -> str | None:
        return self._message.topic_name() if self._message is not None else None

    # --- who am I --------------------------------------------------------------------------------

    def get_function_tenant(self) -> str:
        return self._config.tenant

    def get_function_namespace(self) -> str:
        return self._config.namespace

    def get_function_name(self) -> str:
        return self._config.name

    def get_function_id(self) -> str:
        return self._function_id

    def get_function_version(self) -> str:
        return self._version

    def get_instance_id(self) -> int:
        return self._instance_id

    def get_input_topics(self) -> list[str]:
        return list(self._config.inputs)

    def get_output_topic(self) -> str | None:
        return self._config.output

    def get_output_serde_class_name(self) -> str:
        return "serde.IdentitySerDe"

    def get_logger(self) -> logging.Logger:
        return self._logger

    # --- configuration ---------------------------------------------------------------------------

    def get_user_config_value(self, key: str) -> Any:
        return self.get_user_config_map().get(key)

    def get_user_config_map(self) -> dict[str, Any]:
        return {**self._config.configs, **self._config.userConfig}

    def get_secret(self, secret_name: str) -> str | None:
        spec = self._config.secrets.get(secret_name)
        if spec is None:
            return os.environ.get(secret_name)
        if isinstance(spec, str) and spec.startswith("env:"):
            return os.environ.get(spec[4:])
        if isinstance(spec, str) and spec.startswith("file:"):
            try:
                return Path(spec[5:]).read_text().strip()
            except OSError:
                return None
        if isinstance(spec, dict) and "path" in spec:  # Pulsar-style {"path": ..., "key": ...}
            return os.environ.get(str(spec.get("key") or secret_name))
        return str(spec)

    # --- output ----------------------------------------------------------------------------------

    def publish(
        self,
        topic_name: str,
        message: Any,
        serde_class_name: Any = "serde.IdentitySerDe",
        properties: dict[str, str] | None = None,
        compression_type: Any = None,
        callback: Callable[..., Any] | None = None,
        message_conf: dict[str, Any] | None = None,
    ) -> None:
        # A schema object from the caller (publish(topic, msg, schema)) encodes itself.
        if hasattr(serde_class_name, "encode") and not isinstance(serde_class_name, str):
            payload = serde_class_name.encode(message)
        else:
            payload = serializer(serde_class_name)(message)
        conf = dict(message_conf or {})
        if properties:
            conf["properties"] = properties
        self._publish_fn(topic_name, payload, conf, callback)

    def ack(self, msgid: Any, topic: str) -> None:
        """Pulsar's manual ack (autoAck=false): the instance acks after process() returns anyway."""

    # --- metrics and state -----------------------------------------------------------------------

    def record_metric(self, metric_name: str, metric_value: float) -> None:
        m = self._metrics.setdefault(
            metric_name, {"count": 0, "sum": 0.0, "min": float(metric_value), "max": float(metric_value)}
        )
        m["count"] += 1
        m["sum"] += float(metric_value)
        m["min"] = min(m["min"], float(metric_value))
        m["max"] = max(m["max"], float(metric_value))

    def incr_counter(self, key: str, amount: int) -> None:
        self._state.incr(key, amount)

    def get_counter(self, key: str) -> int:
        return self._state.get_counter(key)

    def del_counter(self, key: str) -> None:
        self._state.del_counter(key)

    def put_state(self, key: str, value: Any) -> None:
        self._state.put_state(key, value)

    def get_state(self, key: str) -> Any:
        return self._state.get_state(key)
