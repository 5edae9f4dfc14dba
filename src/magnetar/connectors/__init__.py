"""Pulsar IO for Magnetar: sources and sinks that run as functions on the functions worker.

Theory of operation: a connector is a function with a different face.  A
**sink** (``api.Sink``: ``open(config, context)``, ``write(record)``,
``close()``) becomes the function ``runner.sink_function(SinkClass)``: each
input message is wrapped in a ``Record`` and written; the message is
acknowledged only when the write returned (the record's ``ack``), and a
``fail()`` or an exception negative-acknowledges it, so it comes again --
retrying until the external system takes it, losing nothing.  A **source**
(``api.Source``: ``open``, ``read`` -> value or None, ``close``) is driven by
the instance's source loop, which publishes what ``read`` returns to the
source's output topic.  A user's own connector file (``--archive my_sink.py
--classname my_sink.MySink``) is wrapped the same way when it is loaded
(``functions.loader``), so this package sits below ``functions``.

:func:`catalogue` lists the built-ins (``admin sinks available-sinks``);
:func:`builtin_code` gives the worker the shim module a ``builtin://NAME``
archive runs: a file that imports the connector class from this package.
"""

from __future__ import annotations

from typing import Any

BUILTINS: dict[str, dict[str, Any]] = {
    "jdbc-postgres": {
        "name": "jdbc-postgres",
        "description": "JDBC-style sink writing JSON records as rows into PostgreSQL (psycopg)",
        "kinds": ["sink"],
        "module": "magnetar.connectors.postgres",
        "sink": "PostgresSink",
    },
    "file": {
        "name": "file",
        "description": "file source (tails files in a directory) and file sink (appends lines)",
        "kinds": ["source", "sink"],
        "module": "magnetar.connectors.files",
        "sink": "FileSink",
        "source": "FileSource",
    },
    "http": {
        "name": "http",
        "description": "HTTP/webhook sink: POSTs each record to a URL (retried until a 2xx answer)",
        "kinds": ["sink"],
        "module": "magnetar.connectors.http",
        "sink": "HttpSink",
    },
    "data-generator": {
        "name": "data-generator",
        "description": "source producing generated JSON person records at a configured rate",
        "kinds": ["source"],
        "module": "magnetar.connectors.generator",
        "source": "DataGeneratorSource",
    },
}


def catalogue() -> list[dict[str, Any]]:
    return [{k: v for k, v in c.items() if k in ("name", "description", "kinds")} for c in BUILTINS.values()]


def builtin_code(archive: str, kind: str = "sink") -> tuple[str, bytes] | None:
    """(file name, shim code) for ``builtin://NAME``; None if there is no such built-in."""
    name = archive.removeprefix("builtin://")
    entry = BUILTINS.get(name)
    if entry is None or kind not in entry:
        return None
    wrap = "sink_function" if kind == "sink" else "source_function"
    code = (
        f"from magnetar.connectors.runner import {wrap}\n"
        f"from {entry['module']} import {entry[kind]}\n"
        f"Connector = {wrap}({entry[kind]})\n"
    )
    return f"builtin_{name.replace('-', '_')}_{kind}.py", code.encode()
