"""The console's two helper routes: payload decoding and the policy table.

Theory of operation: peeking goes through the admin API
(``.../subscription/{sub}/position/{n}``), which answers the raw payload; the
topic's schema comes from the schema registry route.  The browser then posts
both here and gets the value back as JSON:

* ``AVRO`` -- the schema's definition is parsed with fastavro and the payload
  read as one schemaless datum (Pulsar's Avro encoding: no container, no
  fingerprint); bytes, decimals and dates in the result become JSON-safe
  (hex text, strings);
* ``JSON`` -- the payload parsed as JSON;
* fixed-width primitives (``INT8`` ... ``DOUBLE``, ``BOOLEAN``) -- big-endian,
  as Pulsar's primitive schemas write them;
* anything else (``STRING``, ``BYTES``, no schema) -- UTF-8 text, or hex when
  the bytes are not text.

A peeked entry that is a batch (the API's ``X-Pulsar-num-batch-message``
header; the browser passes it on as ``batchCount``) is split into its records
with the protocol's batch codec first, and each record is decoded on its own.

Nothing is read from the broker, so a caller learns nothing it did not send;
decoding runs on a thread of the request's own (never on the event loop);
sizes are bounded and a payload that does not match its schema is a 400 with
the decoder's reason, never a 500.  ``GET /console/api/policies`` lists the
namespace policies the page can edit, from ``broker.admin.policies.SPECS``
(the one owner of that table).
"""

from __future__ import annotations

import base64
import binascii
import datetime
import decimal
import io
import json
import struct
import uuid
from typing import Any

import fastavro
from fastapi import APIRouter, Request

from magnetar.broker.admin.policies import SPECS
from magnetar.protocol.batch import MAX_BATCH_RECORDS, decode_batch
from magnetar.protocol.errors import CorruptPayload
from magnetar.runtime import BlockingExecutor
from magnetar.web.errors import WebError

router = APIRouter()

PAYLOAD_BYTES_MAX = 5 * 1024 * 1024  # Pulsar's default maxMessageSize
SCHEMA_BYTES_MAX = 1024 * 1024
BODY_BYTES_MAX = PAYLOAD_BYTES_MAX * 4 // 3 + SCHEMA_BYTES_MAX + 4096  # base64 + schema + envelope

# Pulsar's primitive schemas: big-endian fixed-width encodings.
PRIMITIVES = {
    "INT8": ">b",
    "INT16": ">h",
    "INT32": ">i",
    "INT64": ">q",
    "FLOAT": ">f",
    "DOUBLE": ">d",
    "BOOLEAN": ">?",
}


def decode_payload(schema_type: str, definition: str, payload: bytes) -> tuple[str, Any]:
    """(format, value) of ``payload`` under the schema; ValueError with a reason when it does not fit."""
    kind = (schema_type or "NONE").upper()
    if kind == "AVRO":
        return "avro", _avro(definition, payload)
    if kind == "JSON":
        try:
            return "json", json.loads(payload)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"the payload is not JSON: {exc}") from None
    if kind in PRIMITIVES:
        fmt = PRIMITIVES[kind]
        if len(payload) != struct.calcsize(fmt):
            raise ValueError(f"a {kind} payload is {struct.calcsize(fmt)} bytes, not {len(payload)}")
        return kind.lower(), struct.unpack(fmt, payload)[0]
    return _text_or_hex(payload)


def _avro(definition: str, payload: bytes) -> Any:
    try:
        parsed = fastavro.parse_schema(json.loads(definition))
    except (json.JSONDecodeError, TypeError) as exc:
        raise ValueError(f"the Avro schema is not JSON: {exc}") from None
    except Exception as exc:  # fastavro raises SchemaParseException, KeyError, ...
        raise ValueError(f"the Avro schema does not parse: {exc}") from None
    buf = io.BytesIO(payload)
    try:
        value = fastavro.schemaless_reader(buf, parsed)
    except Exception as exc:  # truncated or mismatched data: EOFError, UnicodeDecodeError, ...
        raise ValueError(f"the payload does not decode with the topic's Avro schema: {exc!r}") from None
    if buf.tell() != len(payload):
        raise ValueError(f"the payload has {len(payload) - buf.tell()} bytes past the Avro datum")
    return _json_safe(value)


def _text_or_hex(payload: bytes) -> tuple[str, str]:
    try:
        return "text", payload.decode("utf-8")
    except UnicodeDecodeError:
        return "hex", payload.hex()


def _json_safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, decimal.Decimal | uuid.UUID | datetime.date | datetime.time | datetime.datetime):
        return str(value)
    return value


@router.post("/console/api/decode")
async def decode(request: Request) -> dict:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > BODY_BYTES_MAX:  # refuse before reading it
        raise WebError(413, f"the request is over {BODY_BYTES_MAX} bytes")
    body = await request.body()
    if len(body) > BODY_BYTES_MAX:
        raise WebError(413, f"the request is over {BODY_BYTES_MAX} bytes")
    try:
        doc = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise WebError(400, f"the request is not JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("payload"), str):
        raise WebError(400, 'expected {"schemaType": ..., "schema": ..., "payload": "<base64>"}')
    definition = doc.get("schema") or ""
    if not isinstance(definition, str) or len(definition) > SCHEMA_BYTES_MAX:
        raise WebError(400, f"schema must be a string of at most {SCHEMA_BYTES_MAX} characters")
    try:
        payload = base64.b64decode(doc["payload"], validate=True)
    except (binascii.Error, ValueError) as exc:
        raise WebError(400, f"payload is not base64: {exc}") from None
    if len(payload) > PAYLOAD_BYTES_MAX:
        raise WebError(413, f"the payload is over {PAYLOAD_BYTES_MAX} bytes")
    batch_count = doc.get("batchCount")
    if batch_count is not None and (
        not isinstance(batch_count, int) or not 0 < batch_count <= MAX_BATCH_RECORDS
    ):
        raise WebError(400, f"batchCount must be an integer in 1..{MAX_BATCH_RECORDS}")
    schema_type = str(doc.get("schemaType") or "NONE")
    # Decoding up to 5 MB (or a batch of many records) is CPU work: off the event loop, on a thread this
    # request owns and stops when done (the console is driven by people, not by a hot path).
    executor = BlockingExecutor("console-decode", 1)
    try:
        return {"messages": await executor.run(_decode_all, schema_type, definition, payload, batch_count)}
    except CorruptPayload as exc:
        raise WebError(400, f"the batch does not split into {batch_count} records: {exc}") from None
    except ValueError as exc:
        raise WebError(400, str(exc)) from None
    finally:
        executor.close_nowait()


def _decode_all(schema_type: str, definition: str, payload: bytes, batch_count: int | None) -> list[dict]:
    if batch_count is None:
        return [_decoded(schema_type, definition, payload, {}, None)]
    return [
        _decoded(schema_type, definition, r.payload, r.properties, r.partition_key)
        for r in decode_batch(payload, batch_count)
    ]


def _decoded(schema_type: str, definition: str, payload: bytes, properties: dict, key: str | None) -> dict:
    fmt, value = decode_payload(schema_type, definition, payload)
    return {"format": fmt, "value": value, "properties": properties, "key": key, "size": len(payload)}


@router.get("/console/api/policies")
async def policies() -> list[dict]:
    """The namespace policies: the ``Policies`` field, its REST suffix and the method that sets it."""
    return [
        {
            "name": s.name,
            "field": s.ns_field,
            "suffix": s.ns_suffix,
            "method": s.ns_set,
            "perCluster": s.per_cluster,
        }
        for s in SPECS
        if s.ns_suffix and s.ns_field
    ]
