"""PostgreSQL sink (JDBC-sink semantics) through psycopg.

Theory of operation: every record's value is a JSON object (bytes or text)
whose keys are column names, or -- from a topic with an AVRO (or JSON) schema
-- the decoded record, whose field names are the column names (nested records
and arrays are stored as JSON text, bytes as bytea).  Config (Pulsar's JDBC sink names where they
exist): ``jdbcUrl`` (``jdbc:postgresql://host:port/db`` or a libpq URI
``postgresql://...``), ``userName``, ``password``, ``tableName``, optional
``key`` (comma-separated key columns: then an upsert, ``INSERT ... ON CONFLICT
(key) DO UPDATE``; without it a plain insert) and ``nonKey`` (the columns to
update; default all others).  Each write is one statement in its own
transaction (autocommit): when it returns the row is durable, and only then is
the input message acknowledged.  A connection failure raises: the runner
closes the sink, the message is negative-acknowledged and redelivered, and the
next write reconnects -- so a PostgreSQL restart mid-stream loses nothing.
Identifiers go through ``psycopg.sql.Identifier``; values are parameters.
"""

from __future__ import annotations

import json
from typing import Any

from magnetar.connectors.api import ConnectorConfigError, Record, Sink, require

CONNECT_TIMEOUT_S = 5


def libpq_url(jdbc_url: str) -> str:
    return jdbc_url.removeprefix("jdbc:")


class PostgresSink(Sink):
    def open(self, config: dict[str, Any], context: Any) -> None:
        import psycopg

        self._table = str(require(config, "tableName"))
        self._key = [c.strip() for c in str(config.get("key") or "").split(",") if c.strip()]
        self._non_key = [c.strip() for c in str(config.get("nonKey") or "").split(",") if c.strip()]
        kwargs: dict[str, Any] = {"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S}
        if config.get("userName"):
            kwargs["user"] = config["userName"]
        if config.get("password"):
            kwargs["password"] = config["password"]
        self._conn = psycopg.connect(libpq_url(str(require(config, "jdbcUrl"))), **kwargs)

    def _row(self, record: Record) -> dict[str, Any]:
        value = record.value
        if isinstance(value, bytes | bytearray):
            value = bytes(value).decode("utf-8")
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError as exc:
                raise ConnectorConfigError(f"the record is not JSON: {exc}") from exc
        if not isinstance(value, dict) or not value:
            raise ConnectorConfigError("a record must be a non-empty JSON object of column -> value")
        return value

    def write(self, record: Record) -> None:
        from psycopg import sql

        row = self._row(record)
        cols = list(row)
        stmt = sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
            sql.Identifier(*self._table.split(".")),
            sql.SQL(", ").join(map(sql.Identifier, cols)),
            sql.SQL(", ").join(sql.Placeholder() * len(cols)),
        )
        if self._key:
            update = self._non_key or [c for c in cols if c not in self._key]
            action = (
                sql.SQL("DO UPDATE SET {}").format(
                    sql.SQL(", ").join(
                        sql.SQL("{} = EXCLUDED.{}").format(sql.Identifier(c), sql.Identifier(c))
                        for c in update
                    )
                )
                if update
                else sql.SQL("DO NOTHING")
            )
            stmt = sql.SQL("{} ON CONFLICT ({}) {}").format(
                stmt, sql.SQL(", ").join(map(sql.Identifier, self._key)), action
            )
        values = [json.dumps(v) if isinstance(v, dict | list) else v for v in row.values()]
        with self._conn.cursor() as cur:
            cur.execute(stmt, values)
        record.ack()

    def close(self) -> None:
        conn = getattr(self, "_conn", None)
        if conn is not None:
            conn.close()
