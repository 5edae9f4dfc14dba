"""Helpers for replication tests between clusters: admin JSON over HTTP, receiving, polling.

Theory of operation: the geo-replication tests (two standalones sharing a
configuration store, and two ``magnetar cluster up`` clusters) drive the
official ``pulsar-client`` and the admin REST API and wait on asynchronous
effects: a replicator catching up, a snapshot moving a remote subscription, a
copy deleted.  Every wait here polls its condition until a deadline (never a
fixed sleep, never an assumed order of two asynchronous effects), and every
receive loop is bounded.  :func:`http_json` raises ``urllib.error.HTTPError``
on a non-2xx answer (a test that expects 404 catches it); :func:`receive_all`
returns what arrived by the deadline (the test asserts on the count);
:func:`receive_until` stops one quiet second after the last value it waits
for; :func:`poll` returns the condition's first true value or fails with the
last one seen.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
HTTP_TIMEOUT_S = 30.0


def http_json(method: str, url: str, body: Any = None, timeout_s: float = HTTP_TIMEOUT_S) -> Any:
    """One admin request with a JSON body (if any); the decoded JSON answer, or None if empty."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout_s) as resp:
        raw = resp.read()
    return json.loads(raw) if raw else None


def receive_all(consumer: Any, n: int, timeout_s: float = 60.0) -> list[Any]:
    """Receive and acknowledge up to ``n`` messages within ``timeout_s``; the messages."""
    import pulsar

    out: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while len(out) < n and time.monotonic() < deadline:
        try:
            msg = consumer.receive(timeout_millis=1000)
        except pulsar.Timeout:
            continue
        out.append(msg)
        consumer.acknowledge(msg)
    return out


def receive_until(consumer: Any, last: bytes, timeout_s: float = 40.0) -> list[bytes]:
    """Receive and acknowledge until ``last`` arrived and 1 s passed without more; the payloads."""
    import pulsar

    out: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            msg = consumer.receive(timeout_millis=1000)
        except pulsar.Timeout:
            if last in out:
                break
            continue
        consumer.acknowledge(msg)
        out.append(msg.data())
    return out


def poll(what: str, check: Callable[[], T], timeout_s: float = 30.0, every_s: float = 0.3) -> T:
    """``check()`` until it returns something true; that value (AssertionError at the deadline)."""
    deadline = time.monotonic() + timeout_s
    last: T | None = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(every_s)
    raise AssertionError(f"{what}: not within {timeout_s:.0f} s (last: {last})")
