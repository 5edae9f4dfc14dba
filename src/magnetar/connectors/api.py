"""The connector interfaces: ``Source``, ``Sink`` and the ``Record`` a sink is handed.

Theory of operation: Python connectors implement these plain classes (no
import of pulsar needed).  A sink's ``write(record)`` either returns (the
record is done: acknowledged on the input topic) or calls ``record.fail()`` /
raises (the input message is negative-acknowledged and comes back later: the
sink sees it again until it succeeds, so nothing is lost while an external
system is down).  ``record.ack()`` may be called explicitly; returning is the
same.  A source's ``read()`` returns the next value (bytes, str, a number, or
a dict/list, which is sent as JSON) or None when nothing is ready yet; it is
called on the instance's user thread, so it may block briefly.  ``config`` is
the connector's ``configs`` map (``--sink-config`` / ``--source-config``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Record:
    value: Any
    key: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    topic_name: str | None = None
    message_id: Any = None
    event_time: int = 0
    acked: bool = False
    failed: bool = False

    def ack(self) -> None:
        self.acked = True

    def fail(self) -> None:
        self.failed = True


class Sink:
    def open(self, config: dict[str, Any], context: Any) -> None:
        """Connect to the external system (called once, before the first write)."""

    def write(self, record: Record) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Release connections."""


class Source:
    def open(self, config: dict[str, Any], context: Any) -> None:
        """Prepare to read (called once, before the first read)."""

    def read(self) -> Any:
        raise NotImplementedError

    def close(self) -> None:
        """Release resources."""


class ConnectorConfigError(ValueError):
    """A connector's configs map is missing a key or has a bad value."""


def require(config: dict[str, Any], key: str) -> Any:
    if config.get(key) in (None, ""):
        raise ConnectorConfigError(f"the connector config needs {key!r}")
    return config[key]
