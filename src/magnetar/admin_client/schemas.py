"""Schemas: ``/admin/v2/schemas/{tenant}/{ns}/{topic}/...`` (the schema registry).

Theory of operation: a schema belongs to the topic's base name (all partitions
share it), so the path drops the domain and any ``-partition-N`` suffix.
Payloads are PostSchemaPayload JSON ``{"type": "AVRO", "schema": "<definition>",
"properties": {...}}``; :func:`schema_payload` builds one (a dict schema
definition is serialised to its JSON text, as Pulsar stores it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from magnetar.admin_client.core import Resource, call, schema_path


def schema_payload(
    schema_type: str, schema: str | Mapping[str, Any] = "", properties: Mapping[str, str] | None = None
) -> dict[str, Any]:
    definition = schema if isinstance(schema, str) else json.dumps(schema, separators=(",", ":"))
    return {"type": schema_type.upper(), "schema": definition, "properties": dict(properties or {})}


class Schemas(Resource):
    def get_schema(self, topic: str, version: int | None = None) -> Any:
        """GetSchemaResponse of the latest (or a given) version."""
        suffix = "/schema" if version is None else f"/schema/{int(version)}"
        return self._run(call("GET", schema_path(topic) + suffix))

    def get_all_schemas(self, topic: str) -> Any:
        """``{"getSchemaResponses": [...]}``, oldest first."""
        return self._run(call("GET", schema_path(topic) + "/schemas"))

    def create_schema(self, topic: str, payload: Mapping[str, Any]) -> Any:
        """Upload a schema; returns ``{"version": {"version": N}}`` (or similar, as the broker answers)."""
        return self._run(call("POST", schema_path(topic) + "/schema", body=dict(payload)))

    def delete_schema(self, topic: str, *, force: bool = False) -> Any:
        params = {"force": True} if force else None
        return self._run(call("DELETE", schema_path(topic) + "/schema", params=params))

    def test_compatibility(self, topic: str, payload: Mapping[str, Any]) -> Any:
        """``{"compatibility": bool, "schemaCompatibilityStrategy": ...}``."""
        return self._run(call("POST", schema_path(topic) + "/compatibility", body=dict(payload)))

    def get_version_by_schema(self, topic: str, payload: Mapping[str, Any]) -> Any:
        return self._run(call("POST", schema_path(topic) + "/version", body=dict(payload)))
