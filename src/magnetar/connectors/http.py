"""HTTP (webhook) sink: each record POSTed to a URL.

Theory of operation: config ``url`` (required), ``headers`` (a JSON object of
extra headers), ``timeoutMs`` (default 10000).  Each record's value is the
request body (``Content-Type: application/octet-stream`` unless a header says
otherwise); the record's key and properties travel as headers
``pulsar-key`` / ``pulsar-property-<name>``, its topic as ``pulsar-topic``.
A 2xx answer completes the record; anything else (or no answer) raises, so the
message is redelivered and POSTed again later: at-least-once delivery to the
endpoint.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from magnetar.connectors.api import ConnectorConfigError, Record, Sink, require


class HttpSink(Sink):
    def open(self, config: dict[str, Any], context: Any) -> None:
        self._url = str(require(config, "url"))
        headers = config.get("headers") or {}
        if isinstance(headers, str):
            headers = json.loads(headers)
        if not isinstance(headers, dict):
            raise ConnectorConfigError("headers must be a JSON object")
        self._headers = {
            "Content-Type": "application/octet-stream",
            **{str(k): str(v) for k, v in headers.items()},
        }
        self._http = httpx.Client(timeout=int(config.get("timeoutMs", 10_000)) / 1000)

    def write(self, record: Record) -> None:
        value = record.value
        body = value if isinstance(value, bytes) else str(value).encode()
        headers = dict(self._headers)
        if record.key:
            headers["pulsar-key"] = record.key
        if record.topic_name:
            headers["pulsar-topic"] = record.topic_name
        for k, v in record.properties.items():
            headers[f"pulsar-property-{k}"] = v
        r = self._http.post(self._url, content=body, headers=headers)
        if not 200 <= r.status_code < 300:
            raise RuntimeError(f"{self._url} answered {r.status_code}")

    def close(self) -> None:
        self._http.close()
