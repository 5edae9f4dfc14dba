"""Function state: counters and key/value state, kept durably by the worker in the metadata store.

Theory of operation: Pulsar keeps a function's state in BookKeeper's table
service; Magnetar keeps it in the metadata store (RocksDB in the standalone)
under ``/admin/functions-state/{tenant}/{ns}/{name}/{key}``, one node per key
holding JSON ``{"numberValue": n}`` (a counter) or ``{"stringValue": s}`` /
``{"byteValue": base64}`` (state).  :class:`StateStore` is the worker's side:
counters are incremented with a version-CAS loop, so concurrent instances of
one function never lose an increment.

Instances reach it through the worker's REST API (:class:`HttpStateClient`,
used from the user-code thread, so its calls are plain blocking HTTP): the
thread and the process runtime share one path, and the admin API's
``functions querystate``/``putstate`` read and write the very same nodes.
"""

from __future__ import annotations

import base64
import json
import urllib.parse
from typing import Any

import httpx

from magnetar.metadata.api import BadVersion, MetadataStore, NotFound

STATE_ROOT = "/admin/functions-state"
KEY_BYTES_MAX = 1024
VALUE_BYTES_MAX = 1024 * 1024
CAS_ATTEMPTS_MAX = 100


class StateError(Exception):
    """Bad key/value, or the state service could not be reached."""


def _path(fqfn: str, key: str) -> str:
    if not key or len(key.encode()) > KEY_BYTES_MAX:
        raise StateError(f"a state key must be 1..{KEY_BYTES_MAX} bytes")
    return f"{STATE_ROOT}/{fqfn}/{urllib.parse.quote(key, safe='')}"


class StateStore:
    def __init__(self, store: MetadataStore) -> None:
        self._store = store

    async def get(self, fqfn: str, key: str) -> dict[str, Any] | None:
        """``{"key", "numberValue"|"stringValue"|"byteValue", "version"}`` or None."""
        got = await self._store.get(_path(fqfn, key))
        if got is None:
            return None
        doc = json.loads(got.value)
        return {"key": key, **doc, "version": got.stat.version}

    async def put(self, fqfn: str, key: str, doc: dict[str, Any]) -> None:
        value = {k: doc[k] for k in ("numberValue", "stringValue", "byteValue") if k in doc}
        if len(value) != 1:
            raise StateError("give exactly one of numberValue, stringValue, byteValue")
        raw = json.dumps(value).encode()
        if len(raw) > VALUE_BYTES_MAX:
            raise StateError(f"a state value must be at most {VALUE_BYTES_MAX} bytes")
        await self._store.put(_path(fqfn, key), raw)

    async def incr(self, fqfn: str, key: str, amount: int) -> int:
        path = _path(fqfn, key)
        for _ in range(CAS_ATTEMPTS_MAX):
            got = await self._store.get(path)
            current = int(json.loads(got.value).get("numberValue", 0)) if got else 0
            try:
                await self._store.put(
                    path,
                    json.dumps({"numberValue": current + amount}).encode(),
                    expected_version=got.stat.version if got else -1,
                )
                return current + amount
            except BadVersion:
                continue
        raise StateError(f"counter {key} is too contended")

    async def delete(self, fqfn: str, key: str) -> None:
        try:
            await self._store.delete(_path(fqfn, key))
        except NotFound:
            pass

    async def drop_all(self, fqfn: str) -> None:
        try:
            await self._store.delete_recursive(f"{STATE_ROOT}/{fqfn}")
        except NotFound:
            pass


class HttpStateClient:
    """Blocking client of the worker's state routes (called from the user-code thread)."""

    def __init__(
        self, web_url: str, fqfn: str, timeout_s: float = 30.0, headers: dict[str, str] | None = None
    ) -> None:
        self._base = f"{web_url.rstrip('/')}/admin/v3/functions/{fqfn}/state"
        self._http = httpx.Client(timeout=timeout_s, headers=headers or {})

    def _url(self, key: str) -> str:
        return f"{self._base}/{urllib.parse.quote(key, safe='')}"

    def _check(self, r: httpx.Response) -> None:
        if r.status_code >= 400:
            raise StateError(f"state service answered {r.status_code}: {r.text[:200]}")

    def incr(self, key: str, amount: int) -> int:
        r = self._http.post(self._url(key) + "/incr", json={"amount": int(amount)})
        self._check(r)
        return int(r.json()["numberValue"])

    def get_counter(self, key: str) -> int:
        r = self._http.get(self._url(key))
        if r.status_code == 404:
            return 0
        self._check(r)
        return int(r.json().get("numberValue", 0))

    def del_counter(self, key: str) -> None:
        self._check(self._http.delete(self._url(key)))

    def put_state(self, key: str, value: Any) -> None:
        if isinstance(value, bytes | bytearray):
            doc = {"key": key, "byteValue": base64.b64encode(bytes(value)).decode()}
        else:
            doc = {"key": key, "stringValue": str(value)}
        self._check(self._http.post(self._url(key), data={"state": json.dumps(doc)}))

    def get_state(self, key: str) -> Any:
        r = self._http.get(self._url(key))
        if r.status_code == 404:
            return None
        self._check(r)
        doc = r.json()
        if "byteValue" in doc:
            return base64.b64decode(doc["byteValue"])
        if "stringValue" in doc:
            return doc["stringValue"]
        return doc.get("numberValue")

    def close(self) -> None:
        self._http.close()


class LocalState:
    """In-process, non-durable state for ``magnetar functions localrun`` without a worker."""

    def __init__(self) -> None:
        self._values: dict[str, Any] = {}

    def incr(self, key: str, amount: int) -> int:
        self._values[key] = int(self._values.get(key) or 0) + int(amount)
        return self._values[key]

    def get_counter(self, key: str) -> int:
        return int(self._values.get(key) or 0)

    def del_counter(self, key: str) -> None:
        self._values.pop(key, None)

    def put_state(self, key: str, value: Any) -> None:
        self._values[key] = value

    def get_state(self, key: str) -> Any:
        return self._values.get(key)

    def close(self) -> None:
        pass
