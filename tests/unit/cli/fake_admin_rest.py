"""An in-process fake of the admin REST API for CLI tests (an httpx.MockTransport handler).

It keeps just enough state (clusters, tenants, namespaces with their policies,
topics with subscriptions) to drive a create -> configure -> inspect -> delete
flow, answers with Pulsar's status codes and ``{"reason": ...}`` bodies, and
records every request so tests can check method, path, query and body.
The CLI finds it through ``MAGNETAR_ADMIN_TRANSPORT=fake_admin_rest:CURRENT``;
each test installs a fresh instance with monkeypatch.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import unquote

import httpx


class FakeAdminRest:
    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []
        self.clusters: dict[str, dict[str, Any]] = {"standalone": {"serviceUrl": "http://localhost:8080"}}
        self.tenants: dict[str, dict[str, Any]] = {}
        self.namespaces: dict[str, dict[str, Any]] = {}
        self.topics: dict[str, dict[str, Any]] = {}  # full name -> {"partitions": n, "subs": {...}}
        self.canned: dict[tuple[str, str], httpx.Response] = {}

    # ------------------------------------------------------------ helpers
    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self)

    def last(self) -> httpx.Request:
        return self.requests[-1]

    def body(self, request: httpx.Request | None = None) -> Any:
        req = request or self.last()
        return json.loads(req.content) if req.content else None

    @staticmethod
    def err(status: int, reason: str) -> httpx.Response:
        return httpx.Response(status, json={"reason": reason})

    # ------------------------------------------------------------ dispatch
    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        path = request.url.raw_path.decode().split("?")[0]
        key = (request.method, path)
        if key in self.canned:
            return self.canned[key]
        m = request.method
        for pattern, handler in self._routes():
            match = re.fullmatch(pattern, path)
            if match:
                return handler(m, request, *[unquote(g) for g in match.groups()])
        return httpx.Response(204) if m != "GET" else self.err(404, f"no fake route for {path}")

    def _routes(self) -> list[tuple[str, Any]]:
        return [
            (r"/admin/v2/clusters", lambda m, r: httpx.Response(200, json=sorted(self.clusters))),
            (r"/admin/v2/tenants", lambda m, r: httpx.Response(200, json=sorted(self.tenants))),
            (r"/admin/v2/tenants/([^/]+)", self._tenant),
            (r"/admin/v2/namespaces/([^/]+)", self._ns_list),
            (r"/admin/v2/namespaces/([^/]+)/([^/]+)", self._ns),
            (r"/admin/v2/namespaces/([^/]+)/([^/]+)/([A-Za-z]+)", self._ns_policy),
            (r"/admin/v2/(persistent|non-persistent)/([^/]+)/([^/]+)", self._topic_list),
            (r"/admin/v2/persistent/([^/]+)/([^/]+)/([^/]+)/partitions", self._partitions),
            (r"/admin/v2/persistent/([^/]+)/([^/]+)/([^/]+)/partitioned-stats", self._pstats),
            (r"/admin/v2/persistent/([^/]+)/([^/]+)/([^/]+)/stats", self._stats),
            (r"/admin/v2/persistent/([^/]+)/([^/]+)/([^/]+)/subscription/([^/]+)", self._sub),
            (r"/admin/v2/persistent/([^/]+)/([^/]+)/([^/]+)", self._topic),
        ]

    def _tenant(self, m: str, r: httpx.Request, tenant: str) -> httpx.Response:
        if m == "PUT":
            if tenant in self.tenants:
                return self.err(409, "Tenant already exist")
            self.tenants[tenant] = self.body(r)
            return httpx.Response(204)
        if tenant not in self.tenants:
            return self.err(404, "Tenant does not exist")
        if m == "GET":
            return httpx.Response(200, json=self.tenants[tenant])
        if m == "POST":
            self.tenants[tenant] = self.body(r)
        if m == "DELETE":
            if any(ns.startswith(tenant + "/") for ns in self.namespaces):
                return self.err(409, "The tenant still has active namespaces")
            del self.tenants[tenant]
        return httpx.Response(204)

    def _ns_list(self, m: str, r: httpx.Request, tenant: str) -> httpx.Response:
        if tenant not in self.tenants:
            return self.err(404, "Tenant does not exist")
        return httpx.Response(200, json=sorted(ns for ns in self.namespaces if ns.startswith(tenant + "/")))

    def _ns(self, m: str, r: httpx.Request, tenant: str, local: str) -> httpx.Response:
        ns = f"{tenant}/{local}"
        if m == "PUT":
            if tenant not in self.tenants:
                return self.err(404, "Tenant does not exist")
            if ns in self.namespaces:
                return self.err(409, "Namespace already exists")
            self.namespaces[ns] = {"create_body": self.body(r), "policies": {}}
            return httpx.Response(204)
        if ns not in self.namespaces:
            return self.err(404, "Namespace does not exist")
        if m == "GET":
            return httpx.Response(200, json={"bundles": {"numBundles": 4}, **self.namespaces[ns]["policies"]})
        if m == "DELETE":
            if any(t.split("://")[1].startswith(ns + "/") for t in self.topics):
                return self.err(409, "Cannot delete non empty namespace")
            del self.namespaces[ns]
        return httpx.Response(204)

    def _ns_policy(self, m: str, r: httpx.Request, tenant: str, local: str, policy: str) -> httpx.Response:
        ns = f"{tenant}/{local}"
        if ns not in self.namespaces:
            return self.err(404, "Namespace does not exist")
        store = self.namespaces[ns]["policies"]
        if m == "GET":
            if policy not in store:
                return httpx.Response(204)
            return httpx.Response(200, json=store[policy])
        if m in ("POST", "PUT"):
            store[policy] = self.body(r)
        elif m == "DELETE":
            store.pop(policy, None)
        return httpx.Response(204)

    def _topic_list(self, m: str, r: httpx.Request, domain: str, tenant: str, local: str) -> httpx.Response:
        ns = f"{tenant}/{local}"
        if ns not in self.namespaces:
            return self.err(404, "Namespace does not exist")
        out: list[str] = []
        for name, t in sorted(self.topics.items()):
            if not name.startswith(f"{domain}://{ns}/"):
                continue
            n = t["partitions"]
            out.extend([f"{name}-partition-{i}" for i in range(n)] if n else [name])
        return httpx.Response(200, json=out)

    def _name(self, tenant: str, ns: str, topic: str) -> str:
        return f"persistent://{tenant}/{ns}/{topic}"

    def _partitions(self, m: str, r: httpx.Request, tenant: str, ns: str, topic: str) -> httpx.Response:
        name = self._name(tenant, ns, topic)
        if m == "PUT":
            if name in self.topics:
                return self.err(409, "Partitioned topic already exist")
            n = self.body(r)
            if not isinstance(n, int) or n <= 0:
                return self.err(406, "Number of partitions should be more than 0")
            self.topics[name] = {"partitions": n, "subs": {}}
            return httpx.Response(204)
        if m == "GET":
            return httpx.Response(200, json={"partitions": self.topics.get(name, {}).get("partitions", 0)})
        if name not in self.topics:
            return self.err(404, "Partitioned topic does not exist")
        if m == "DELETE":
            del self.topics[name]
        if m == "POST":
            n = self.body(r)
            if n <= self.topics[name]["partitions"]:
                return self.err(
                    422, "Number of new partitions must be greater than existing number of partitions"
                )
            self.topics[name]["partitions"] = n
        return httpx.Response(204)

    def _stats_of(self, t: dict[str, Any]) -> dict[str, Any]:
        return {
            "msgRateIn": 0.0,
            "msgInCounter": t.get("msgInCounter", 0),
            "storageSize": 0,
            "backlogSize": 0,
            "publishers": [],
            "replication": {},
            "deduplicationStatus": "Disabled",
            "subscriptions": {s: {"msgBacklog": 0, "type": "Exclusive", "consumers": []} for s in t["subs"]},
        }

    def _stats(self, m: str, r: httpx.Request, tenant: str, ns: str, topic: str) -> httpx.Response:
        name = self._name(tenant, ns, topic)
        if name not in self.topics or self.topics[name]["partitions"]:
            return self.err(404, "Topic not found")
        return httpx.Response(200, json=self._stats_of(self.topics[name]))

    def _pstats(self, m: str, r: httpx.Request, tenant: str, ns: str, topic: str) -> httpx.Response:
        name = self._name(tenant, ns, topic)
        if name not in self.topics or not self.topics[name]["partitions"]:
            return self.err(404, "Partitioned Topic not found")
        t = self.topics[name]
        return httpx.Response(
            200, json={**self._stats_of(t), "metadata": {"partitions": t["partitions"]}, "partitions": {}}
        )

    def _sub(self, m: str, r: httpx.Request, tenant: str, ns: str, topic: str, sub: str) -> httpx.Response:
        name = self._name(tenant, ns, topic)
        if name not in self.topics:
            return self.err(404, "Topic not found")
        subs = self.topics[name]["subs"]
        if m == "PUT":
            if sub in subs:
                return self.err(409, "Subscription already exists for topic")
            subs[sub] = self.body(r)
        elif m == "DELETE":
            if sub not in subs:
                return self.err(404, "Subscription not found")
            del subs[sub]
        return httpx.Response(204)

    def _topic(self, m: str, r: httpx.Request, tenant: str, ns: str, topic: str) -> httpx.Response:
        name = self._name(tenant, ns, topic)
        if m == "PUT":
            if name in self.topics:
                return self.err(409, "This topic already exists")
            self.topics[name] = {"partitions": 0, "subs": {}}
            return httpx.Response(204)
        if name not in self.topics:
            return self.err(404, "Topic not found")
        if m == "DELETE":
            if self.topics[name]["partitions"]:
                return self.err(
                    409,
                    f"{name} is a partitioned topic, instead of calling delete topic, "
                    "please call delete-partitioned-topic.",
                )
            del self.topics[name]
        return httpx.Response(204)


CURRENT: Any = None  # set per test with monkeypatch (see conftest-free fixture in the tests)
