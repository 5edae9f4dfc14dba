# ruff: noqa: F811  -- module-scoped fixtures are imported by name
"""Failure domains and namespace-isolation policies over the admin REST (stored for real)."""

from __future__ import annotations

import httpx

from tests.integration.test_admin_support import http, standalone  # noqa: F401

C = "/admin/v2/clusters/standalone"


def test_failure_domains_crud(http: httpx.Client) -> None:
    assert http.get(f"{C}/failureDomains").json() == {}
    assert http.post(f"{C}/failureDomains/d1", json={"brokers": ["b1:8080", "b2:8080"]}).status_code == 204
    assert http.get(f"{C}/failureDomains/d1").json() == {"brokers": ["b1:8080", "b2:8080"]}
    # a broker already in another domain: 409
    r = http.post(f"{C}/failureDomains/d2", json={"brokers": ["b2:8080"]})
    assert r.status_code == 409 and "reason" in r.json()
    assert http.post(f"{C}/failureDomains/d2", json={"brokers": ["b3:8080"]}).status_code == 204
    assert set(http.get(f"{C}/failureDomains").json()) == {"d1", "d2"}
    assert http.delete(f"{C}/failureDomains/d1").status_code == 204
    assert http.get(f"{C}/failureDomains/d1").status_code == 404
    assert http.delete(f"{C}/failureDomains/d1").status_code == 404
    assert http.get("/admin/v2/clusters/nope/failureDomains").status_code == 404


def test_namespace_isolation_policies_crud(http: httpx.Client) -> None:
    data = {
        "namespaces": ["public/iso.*"],
        "primary": ["broker-1.*"],
        "secondary": ["broker-2.*"],
        "auto_failover_policy": {
            "policy_type": "min_available",
            "parameters": {"min_limit": "1", "usage_threshold": "80"},
        },
    }
    assert http.get(f"{C}/namespaceIsolationPolicies").json() == {}
    assert http.post(f"{C}/namespaceIsolationPolicies/p1", json=data).status_code == 204
    assert http.get(f"{C}/namespaceIsolationPolicies/p1").json() == data
    assert http.get(f"{C}/namespaceIsolationPolicies").json() == {"p1": data}
    assert http.post(f"{C}/namespaceIsolationPolicies/bad", json={"namespaces": []}).status_code == 400
    assert http.delete(f"{C}/namespaceIsolationPolicies/p1").status_code == 204
    assert http.get(f"{C}/namespaceIsolationPolicies/p1").status_code == 404
    assert http.get(f"{C}/namespaceIsolationPolicies").json() == {}


def test_namespace_isolation_brokers(http: httpx.Client) -> None:
    broker = http.get("/admin/v2/brokers/standalone").json()[0]
    data = {"namespaces": ["public/iso2.*"], "primary": [".*"], "secondary": []}
    assert http.post(f"{C}/namespaceIsolationPolicies/pb", json=data).status_code == 204
    want = {"brokerName": broker, "policyName": "pb", "namespaceRegex": ["public/iso2.*"], "primary": True}
    assert http.get(f"{C}/namespaceIsolationPolicies/brokers").json() == [want]
    assert http.get(f"{C}/namespaceIsolationPolicies/brokers/{broker}").json() == want
    assert http.get(f"{C}/namespaceIsolationPolicies/brokers/other:1").status_code == 404
    assert http.delete(f"{C}/namespaceIsolationPolicies/pb").status_code == 204
    assert http.get(f"{C}/namespaceIsolationPolicies/brokers").json() == []


def test_non_persistent_topic_internal_stats_with_metadata(http: httpx.Client, standalone) -> None:  # type: ignore[no-untyped-def]
    """The ledger-metadata variant of internalStats on a topic that has no ledgers."""
    import pulsar

    c = pulsar.Client(standalone.broker_url, operation_timeout_seconds=5)
    try:
        t = "non-persistent://public/default/np-meta"
        consumer = c.subscribe(t, "s")
        p = c.create_producer(t)
        p.send(b"np")
        assert consumer.receive(5000).data() == b"np"
        r = http.get(
            "/admin/v2/non-persistent/public/default/np-meta/internalStats", params={"metadata": "true"}
        )
        assert r.status_code == 200 and r.json()["ledgers"] == []
    finally:
        c.close()
