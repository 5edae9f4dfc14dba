"""Helpers of the native client's tests (admin REST calls against the test standalone)."""

from __future__ import annotations

import json
import urllib.request


def admin(standalone, method: str, path: str, body: object = None) -> tuple[int, bytes]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        standalone.web_url + path, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:  # the first admin call builds the routers
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def create_partitioned(standalone, topic: str, n: int) -> str:
    local = topic.rsplit("/", 1)[1]
    status, body = admin(standalone, "PUT", f"/admin/v2/persistent/public/default/{local}/partitions", n)
    assert status == 204, body
    return topic
