"""``magnetar admin schemas``: upload, get, delete and check schemas of a topic.

Theory of operation: ``upload`` and ``compatibility`` read a PostSchemaPayload
JSON file (``{"type": "AVRO", "schema": "<definition>", "properties": {}}``,
the same file ``pulsar-admin schemas upload -f`` takes; a ``schema`` given as
a JSON object is turned into its text); the file is bounded in size.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from magnetar.admin_client.schemas import schema_payload
from magnetar.cli.admin.common import CliUsageError, Ctx, command, topic_arg

SCHEMA_FILE_BYTES_MAX = 16 * 1024 * 1024


def register(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "upload", "upload a schema for a topic", _upload)
    topic_arg(p)
    p.add_argument(
        "-f", "--filename", required=True, help='JSON file: {"type": ..., "schema": ..., "properties": {}}'
    )
    p = command(sub, "get", "print a topic's schema (latest, a version, or all versions)", _get)
    topic_arg(p)
    p.add_argument("-v", "--version", type=int, help="schema version")
    p.add_argument("-a", "--all-version", action="store_true", help="print every version")
    p = command(
        sub,
        "delete",
        "delete a topic's schema",
        lambda c, a: c.emit(c.admin.schemas.delete_schema(a.topic, force=a.force)),
    )
    topic_arg(p)
    p.add_argument("-f", "--force", action="store_true", help="delete even if in use")
    p = command(
        sub,
        "compatibility",
        "check whether a schema is compatible with the topic's, without uploading",
        lambda c, a: c.emit(c.admin.schemas.test_compatibility(a.topic, _payload(a.filename))),
    )
    topic_arg(p)
    p.add_argument("-f", "--filename", required=True, help="JSON schema payload file")


def _payload(filename: str) -> dict[str, Any]:
    path = Path(filename)
    try:
        if path.stat().st_size > SCHEMA_FILE_BYTES_MAX:
            raise CliUsageError(f"{path} is larger than {SCHEMA_FILE_BYTES_MAX} bytes")
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise CliUsageError(f"cannot read {path}: {e.strerror or e}") from None
    except ValueError as e:
        raise CliUsageError(f"{path} is not JSON: {e}") from None
    if not isinstance(data, dict) or "type" not in data:
        raise CliUsageError(f"{path} must be a JSON object with a 'type'")
    return schema_payload(str(data["type"]), data.get("schema") or "", data.get("properties") or {})


def _upload(c: Ctx, a: argparse.Namespace) -> None:
    c.emit(c.admin.schemas.create_schema(a.topic, _payload(a.filename)))


def _get(c: Ctx, a: argparse.Namespace) -> None:
    if a.all_version:
        c.emit(c.admin.schemas.get_all_schemas(a.topic))
    else:
        c.emit(c.admin.schemas.get_schema(a.topic, a.version))
