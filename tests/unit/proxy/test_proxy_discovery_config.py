"""The proxy's configuration (proxy.conf keys) and broker discovery, without processes."""

from __future__ import annotations

import json

import pytest

from magnetar.app.config_keys import PROXY_KEYS
from magnetar.metadata.memory import MemoryMetadataServer
from magnetar.proxy.config import ProxyConfig, ProxyConfigError
from magnetar.proxy.discovery import BrokerDiscovery, NoBrokerAvailable, host_port
from magnetar.runtime import RealClock


def test_config_reads_pulsar_keys():
    cfg = ProxyConfig.from_properties(
        {
            "brokerServiceURL": "pulsar://b1:6650,b2:6650",
            "brokerWebServiceURL": "http://b1:8080",
            "servicePort": "0",
            "webServicePort": "18080",
            "authenticationEnabled": "true",
            "forwardAuthorizationCredentials": "true",
            "brokerProxyAllowedTargetPorts": "6650, 6651",
        }
    )
    assert cfg.broker_service_urls == ("pulsar://b1:6650", "pulsar://b2:6650")
    assert cfg.service_port == 0 and cfg.web_service_port == 18080
    assert cfg.authentication_enabled and cfg.forward_authorization_credentials
    assert cfg.allowed_target_ports == (6650, 6651)
    assert ProxyConfig.from_properties({"zookeeperServers": "zk1:2181"}).metadata_store_url == "zk:zk1:2181"
    assert {"brokerServiceURL", "metadataStoreUrl", "servicePort", "authenticationEnabled"} <= PROXY_KEYS


@pytest.mark.parametrize(
    ("props", "names"),
    [
        ({}, "metadataStoreUrl"),
        ({"brokerServiceURL": "http://b1:8080"}, "pulsar://"),
        ({"brokerServiceURL": "b1:6650"}, "not a URL"),
        ({"metadataStoreUrl": "zk:h:1", "servicePort": "70000"}, "servicePort"),
        ({"metadataStoreUrl": "zk:h:1", "authenticationEnabled": "maybe"}, "authenticationEnabled"),
    ],
)
def test_config_errors_name_the_key(props, names):
    with pytest.raises(ProxyConfigError, match=names):
        ProxyConfig.from_properties(props)


def test_host_port_forms():
    assert host_port("pulsar://h:6650/") == "h:6650"
    assert host_port("h:6650") == "h:6650"  # what the official clients put in proxy_to_broker_url


async def _store():
    return MemoryMetadataServer(clock=RealClock()).session()


async def test_discovery_prefers_registered_brokers():
    store = await _store()
    cfg = ProxyConfig.from_properties({"metadataStoreUrl": "memory:", "clusterName": "east"})
    d = BrokerDiscovery(cfg, store, refresh_s=0)
    with pytest.raises(NoBrokerAvailable):
        await d.next_broker()
    # before any registration: the cluster record names a broker
    await store.put(
        "/admin/clusters/east",
        json.dumps({"serviceUrl": "http://b0:8080", "brokerServiceUrl": "pulsar://b0:6650"}).encode(),
    )
    assert [b.service_url for b in await d.brokers()] == ["pulsar://b0:6650"]
    # registrations (LocalBrokerData field names) win
    for i in (1, 2):
        doc = {"pulsarServiceUrl": f"pulsar://b{i}:6650", "webServiceUrl": f"http://b{i}:8080"}
        await store.put(f"/loadbalance/brokers/b{i}:8080", json.dumps(doc).encode(), ephemeral=True)
    assert [b.service_url for b in await d.brokers()] == ["pulsar://b1:6650", "pulsar://b2:6650"]
    picked = {(await d.next_broker()).service_url for _ in range(4)}
    assert picked == {"pulsar://b1:6650", "pulsar://b2:6650"}  # round-robin
    assert await d.next_web_url() in ("http://b1:8080", "http://b2:8080")
    assert await d.is_known("b1:6650") and not await d.is_known("evil:22")
    d.learn("pulsar://b9:6650")
    assert await d.is_known("pulsar://b9:6650")
    await store.aclose()


async def test_static_discovery_and_allowed_ports():
    cfg = ProxyConfig.from_properties(
        {"brokerServiceURL": "pulsar://s1:6650", "brokerProxyAllowedTargetPorts": "6651"}
    )
    d = BrokerDiscovery(cfg, None)
    assert (await d.next_broker()).service_url == "pulsar://s1:6650"
    assert await d.is_known("other:6651") and not await d.is_known("other:6650")
    with pytest.raises(NoBrokerAvailable):
        await d.next_web_url()


async def test_configured_list_is_the_fallback_while_none_registered():
    store = await _store()
    cfg = ProxyConfig.from_properties(
        {"metadataStoreUrl": "memory:", "clusterName": "east", "brokerServiceURL": "pulsar://s1:6650,s2:6650",
         "brokerWebServiceURL": "http://s1:8080,s2:8080"}
    )  # fmt: skip
    d = BrokerDiscovery(cfg, store, refresh_s=0)
    await store.put("/admin/clusters/east", json.dumps({"brokerServiceUrl": "pulsar://s2:6650"}).encode())
    assert [(b.service_url, b.web_url) for b in await d.brokers()] == [
        ("pulsar://s1:6650", "http://s1:8080"),
        ("pulsar://s2:6650", "http://s2:8080"),
    ]
    doc = {"pulsarServiceUrl": "pulsar://r1:6650", "webServiceUrl": "http://r1:8080"}
    await store.put("/loadbalance/brokers/r1:8080", json.dumps(doc).encode(), ephemeral=True)
    assert [b.service_url for b in await d.brokers()] == ["pulsar://r1:6650"]
    await store.aclose()
