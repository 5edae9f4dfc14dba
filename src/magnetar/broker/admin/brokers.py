"""Broker-level admin: broker list, leader, owned namespaces, dynamic configuration, bookies.

Theory of operation: the broker list, the leader and who owns which bundle
come from the namespace service (``broker.ownership``): in a cluster the
registrations under ``/loadbalance/brokers``, the election on
``/loadbalance/leader`` and the bundle locks under ``/namespace``; in a
standalone this one broker, which owns every bundle and leads.  Dynamic configuration
follows Pulsar: only keys in :data:`DYNAMIC_KEYS` may change at run time;
overrides are stored as one JSON map at ``/admin/configuration`` (the
metadata store, so they survive a restart) and every broker of the cluster
applies them to its live ``BrokerConfig`` (``svc.config``), which the broker
reads for new producers, consumers and topics: the one that took the call at
once, the others when their watch fires (:mod:`.dynamic_config`).  An invalid
value is a 412, as is a key that is not dynamic.  Bookies are read from BookKeeper's
registration path (``/ledgers/available``).
"""

from __future__ import annotations

import json
from typing import Any

from magnetar.bookie.api import AVAILABLE_PATH, RACKS_PATH, READONLY_PATH
from magnetar.bookkeeper.isolation import BOOKIE_GROUPS_PATH
from magnetar.broker import errors
from magnetar.broker.admin.dynamic_config import CONFIG_PATH, DynamicConfigWatcher
from magnetar.broker.loadbalance.config import DYNAMIC_KEYS as LB_DYNAMIC_KEYS
from magnetar.broker.loadbalance.config import LoadBalancerConfig
from magnetar.broker.resources.base import JsonStore
from magnetar.broker.service.api import BrokerServiceView
from magnetar.metadata import api as md

DYNAMIC_KEYS = (
    "maxUnackedMessagesPerConsumer",
    "maxUnackedMessagesPerSubscription",
    "maxProducersPerTopic",
    "maxConsumersPerTopic",
    "maxConsumersPerSubscription",
    "brokerDeleteInactiveTopicsEnabled",
    "allowAutoTopicCreation",
    "allowAutoTopicCreationType",
    "defaultNumPartitions",
    "allowAutoSubscriptionCreation",
    "subscriptionTypesEnabled",
    "maxNumPartitionsPerPartitionedTopic",
    "brokerShutdownTimeoutMs",
    "defaultRetentionTimeInMinutes",
    "defaultRetentionSizeInMB",
)


class BrokerAdmin:
    def __init__(self, svc: BrokerServiceView) -> None:
        self._svc = svc
        self._js = JsonStore(svc.metadata_store)
        self.dynamic = DynamicConfigWatcher(svc, self.dynamic_names, set(LB_DYNAMIC_KEYS))

    def broker_id(self) -> str:
        return self._svc.web_service_url().split("://", 1)[-1]

    async def list_brokers(self, cluster: str | None = None) -> list[str]:
        if cluster is not None and not await self._svc.resources.clusters.exists(cluster):
            raise errors.ClusterNotFoundError("Cluster does not exist")
        return await self._svc.namespace_service.list_brokers()

    async def leader(self) -> dict:
        found = await self._svc.namespace_service.leader()
        if found is None:
            raise errors.TopicNotFoundError("No leader broker elected yet")  # a 404, as Pulsar's
        return found

    async def owned_namespaces(self, cluster: str, broker: str) -> dict:
        if not await self._svc.resources.clusters.exists(cluster):
            raise errors.ClusterNotFoundError("Cluster does not exist")
        if broker not in await self._svc.namespace_service.list_brokers():
            raise errors.PreconditionFailedError(f"Broker {broker} is not a live broker of this cluster")
        out: dict[str, dict] = {}
        for bundle in await self._svc.namespace_service.owned_bundles(broker):
            out[bundle.name] = {"broker_assignment": "primary", "is_controlled": False, "is_active": True}
        return out

    # ------------------------------------------------------------ dynamic configuration
    def dynamic_names(self) -> list[str]:
        props = self._svc.config.as_properties()
        return sorted({k for k in DYNAMIC_KEYS if k in props} | set(LB_DYNAMIC_KEYS))

    async def overrides(self) -> dict[str, str]:
        return dict(await self._js.get(CONFIG_PATH) or {})

    def runtime(self) -> dict[str, str]:
        out = {}
        for k, v in self._svc.config.as_properties().items():
            secret = any(w in k.lower() for w in ("password", "secret", "token"))
            out[k] = "****" if secret and v else ("" if v is None else _text(v))
        return out

    async def update(self, name: str, value: str) -> None:
        if name not in self.dynamic_names():
            raise errors.PreconditionFailedError(f"Can't update non-dynamic configuration {name}")
        try:  # checked before it is stored: every broker would apply it
            new_config = self._svc.config.with_overrides({name: value})
            if name in LB_DYNAMIC_KEYS:  # checked here: the load manager reads them each round
                LoadBalancerConfig.from_properties(new_config.as_properties())
        except (ValueError, TypeError) as exc:
            raise errors.PreconditionFailedError(
                f"Invalid dynamic-config value {value!r} for {name}: {exc}"
            ) from None
        if not await self._js.exists(CONFIG_PATH):
            await self._js.create(CONFIG_PATH, {})
        await self._js.update(CONFIG_PATH, lambda d: {**d, name: value})
        await self.dynamic.refresh()  # here at once; the other brokers through their watch

    async def delete(self, name: str) -> None:
        if name not in self.dynamic_names():
            raise errors.PreconditionFailedError(f"Can't update non-dynamic configuration {name}")
        if await self._js.exists(CONFIG_PATH):
            await self._js.update(CONFIG_PATH, lambda d: {k: v for k, v in d.items() if k != name})
        await self.dynamic.refresh()

    def internal_configuration(self) -> dict:
        url = getattr(self._svc.config, "metadata_store_url", "") or None
        return {
            "zookeeperServers": url,
            "configurationStoreServers": url,
            "ledgersRootPath": "/ledgers",
            "bookkeeperMetadataServiceUri": None,
            "stateStorageServiceUrl": None,
            "metadataStoreUrl": url,
            "configurationMetadataStoreUrl": url,
        }

    # ------------------------------------------------------------ bookies
    async def bookies(self) -> dict:
        """Pulsar's ``{"bookies": [{"bookieId": ...}]}``, each entry also carrying what the bookie
        publishes in its registration node: ``readOnly`` and, once its disk check ran, ``totalSpace``
        and ``freeSpace`` in bytes of its fullest directory (the names of BookKeeper's bookie info)."""
        store = self._svc.metadata_store
        found: dict[str, dict] = {}
        for path, read_only in ((AVAILABLE_PATH, False), (READONLY_PATH, True)):
            for bookie_id in await store.children(path):  # [] before any bookie registered
                if bookie_id == "readonly":
                    continue
                got = await store.get(f"{path}/{bookie_id}")
                if got is None:  # unregistered between the listing and the read
                    continue
                entry: dict[str, Any] = {"bookieId": bookie_id, "readOnly": read_only}
                entry.update(_registration_info(got.value))
                found.setdefault(bookie_id, entry)
        return {"bookies": [found[b] for b in sorted(found)]}

    # ------------------------------------------------------------ bookie racks and groups
    async def racks_info(self) -> dict:
        """Pulsar's BookiesRackConfiguration: ``{group: {bookie: {"rack", "hostname"}}}``."""
        return dict(await self._js.get(BOOKIE_GROUPS_PATH) or {})

    async def rack_info(self, bookie: str) -> dict:
        for members in (await self.racks_info()).values():
            if isinstance(members, dict) and bookie in members:
                return dict(members[bookie])
        raise BookieNotFoundError("Bookie address not found")

    async def set_rack_info(self, bookie: str, group: str | None, info: dict) -> None:
        """Put ``bookie`` in ``group`` (Pulsar's default group: "default") with its rack; the
        rack also feeds rack-aware placement, the group bookie isolation."""
        group = group or "default"
        entry = {"rack": str(info.get("rack") or ""), "hostname": info.get("hostname")}

        def put(doc: dict) -> dict:
            out = _without(doc, bookie)
            out.setdefault(group, {})[bookie] = entry
            return out

        if not await self._js.create(BOOKIE_GROUPS_PATH, put({})):
            await self._js.update(BOOKIE_GROUPS_PATH, put)
        if entry["rack"]:
            await self._svc.metadata_store.put(f"{RACKS_PATH}/{bookie}", entry["rack"].encode())

    async def delete_rack_info(self, bookie: str) -> None:
        if await self._js.exists(BOOKIE_GROUPS_PATH):
            await self._js.update(BOOKIE_GROUPS_PATH, lambda d: _without(d, bookie))
        try:
            await self._svc.metadata_store.delete(f"{RACKS_PATH}/{bookie}")
        except md.NotFound:  # no rack was recorded for it
            pass


class BookieNotFoundError(errors.BrokerError):
    http_status = 404


def _without(doc: dict, bookie: str) -> dict:
    """The groups document with ``bookie`` removed (and groups left empty dropped)."""
    out = {g: {b: i for b, i in m.items() if b != bookie} for g, m in doc.items() if isinstance(m, dict)}
    return {g: m for g, m in out.items() if m}


def _text(v: Any) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, list | tuple | set | frozenset):
        return ",".join(str(x) for x in v)
    return str(v)


def _registration_info(value: bytes) -> dict[str, Any]:
    try:
        data = json.loads(value) if value else {}
    except ValueError:  # a bookie of another make registered with a non-JSON value
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: data[k] for k in ("totalSpace", "freeSpace") if isinstance(data.get(k), int)}
