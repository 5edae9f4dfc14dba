"""Which brokers the proxy can send a client to.

Theory of operation: with a metadata store, the live brokers are the
ephemeral registrations under ``/loadbalance/brokers`` (each a JSON document
with the broker's advertised URLs: ``pulsarServiceUrl`` / ``webServiceUrl`` in
Pulsar's load-report vocabulary; ``brokerServiceUrl`` / ``nativeUrl`` /
``httpUrl`` are accepted too).  While none is registered (brokers that predate
registration, or all of them down) the configured ``brokerServiceURL`` /
``brokerWebServiceURL`` list is used, and without one the cluster record
``/admin/clusters/{clusterName}`` (which names one broker).  Without a store,
the configured list is all there is.  The list is
re-read at most every ``refresh_s`` seconds, on use; :meth:`next_broker`
hands brokers out round-robin.  :meth:`is_known` answers "may a client be
tunnelled to this URL?": a broker of the list, or one a lookup through this
proxy named (``learn``), so the proxy is not an open relay.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any

from magnetar.metadata.api import MetadataStore
from magnetar.proxy.config import ProxyConfig

log = logging.getLogger(__name__)

BROKERS_PATH = "/loadbalance/brokers"
_PULSAR_KEYS = ("pulsarServiceUrl", "brokerServiceUrl", "nativeUrl", "serviceUrl")
_WEB_KEYS = ("webServiceUrl", "httpUrl")
MAX_LEARNED = 10_000


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    service_url: str  # pulsar://host:port
    web_url: str | None  # http://host:port


class NoBrokerAvailable(Exception):
    pass


def host_port(url: str) -> str:
    """``pulsar://h:p/`` -> ``h:p``; a bare ``h:p`` (what clients put in proxy_to_broker_url) stays."""
    return (url.partition("://")[2] if "://" in url else url).rstrip("/")


def _first(doc: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    for k in keys:
        v = doc.get(k)
        if isinstance(v, str) and v:
            return v
    return None


class BrokerDiscovery:
    def __init__(self, config: ProxyConfig, store: MetadataStore | None, refresh_s: float = 2.0) -> None:
        self.config = config
        self.store = store
        self.refresh_s = refresh_s
        self._brokers: list[BrokerEndpoint] = []
        self._read_at = float("-inf")
        self._next = 0
        self._learned: set[str] = set()
        self.source = "static" if store is None else "metadata"

    def _static(self) -> list[BrokerEndpoint]:
        webs = self.config.broker_web_service_urls
        return [
            BrokerEndpoint(url, webs[i] if i < len(webs) else (webs[0] if webs else None))
            for i, url in enumerate(self.config.broker_service_urls)
        ]

    async def brokers(self) -> list[BrokerEndpoint]:
        now = time.monotonic()
        if now - self._read_at >= self.refresh_s:
            self._read_at = now
            try:
                self._brokers = await self._read()
            except Exception as exc:  # keep the last list: a slow store must not stop lookups
                log.warning("reading the broker list failed: %s", exc)
        return self._brokers

    async def _read(self) -> list[BrokerEndpoint]:
        if self.store is None:
            return self._static()
        found = []
        for name in await self.store.children(BROKERS_PATH):
            got = await self.store.get(f"{BROKERS_PATH}/{name}")
            try:
                doc = json.loads(got.value) if got is not None else {}
            except ValueError:
                doc = {}
            if isinstance(doc, dict) and (url := _first(doc, _PULSAR_KEYS)):
                found.append(BrokerEndpoint(url, _first(doc, _WEB_KEYS)))
        if found:
            self.source = "registered brokers"
            return sorted(found, key=lambda b: b.service_url)
        if self.config.broker_service_urls:
            self.source = "brokerServiceURL"
            return self._static()
        if self.config.cluster_name:
            got = await self.store.get(f"/admin/clusters/{self.config.cluster_name}")
            if got is not None:
                doc = json.loads(got.value)
                urls = [f"pulsar://{h}" for h in host_port(doc.get("brokerServiceUrl", "")).split(",") if h]
                web = doc.get("serviceUrl") or None
                if urls:
                    self.source = "cluster record"
                    return [BrokerEndpoint(u, web) for u in urls]
        return self._static()

    async def next_broker(self) -> BrokerEndpoint:
        brokers = await self.brokers()
        if not brokers:
            raise NoBrokerAvailable(f"no broker available ({self.source} discovery found none)")
        self._next = (self._next + 1) % len(brokers)
        return brokers[self._next]

    async def next_web_url(self) -> str:
        for _ in range(len(await self.brokers()) or 1):
            b = await self.next_broker()
            if b.web_url:
                return b.web_url
        if self.config.broker_web_service_urls:
            return self.config.broker_web_service_urls[0]
        raise NoBrokerAvailable("no broker web service URL known (brokerWebServiceURL)")

    def learn(self, url: str) -> None:
        if len(self._learned) < MAX_LEARNED:
            self._learned.add(host_port(url))

    async def is_known(self, url: str) -> bool:
        target = host_port(url)
        if target in self._learned:
            return True
        if any(host_port(b.service_url) == target for b in await self.brokers()):
            return True
        port = target.rsplit(":", 1)[-1]
        return port.isdigit() and int(port) in self.config.allowed_target_ports
