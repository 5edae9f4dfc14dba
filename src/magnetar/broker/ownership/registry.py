"""Broker registration and the leader broker, in the metadata store (Pulsar's layout).

Theory of operation: a live broker is an ephemeral node
``/loadbalance/brokers/{host}:{webPort}`` (Pulsar's broker id, its
"lookupServiceAddress") whose value is a JSON document in Pulsar's
LocalBrokerData field names: ``webServiceUrl``, ``webServiceUrlTls``,
``pulsarServiceUrl``, ``pulsarServiceUrlTls`` (every listener a client may
use), ``brokerVersionString``, ``lastUpdate`` and ``numBundles`` (how many
bundles it owns: the load placement reads, see :mod:`.placement`).  The node
lives as long as the broker's metadata session: a killed broker disappears
from the list at session expiry.

The leader is elected on ``/loadbalance/leader`` with
:class:`~magnetar.metadata.coordination.election.LeaderElection`; its value is
Pulsar's LeaderBroker ``{"serviceUrl": "http://host:port"}``.

Session loss (``zookeeperSessionExpiredPolicy=reconnect``): the store opens a
fresh session by itself and emits CONNECTED; we then write our registration
again (the election re-runs by itself).  A registration node left by an
earlier incarnation with the same id (a restart within the session timeout)
is waited out in the background: ``register`` retries every
``REGISTER_RETRY_S`` until the old session's node is gone.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass

from magnetar.metadata.api import (
    AlreadyExists,
    BadVersion,
    MetadataError,
    MetadataStore,
    NotFound,
    SessionEvent,
)
from magnetar.metadata.coordination.election import LeaderElection
from magnetar.runtime import Clock, TaskSupervisor

log = logging.getLogger(__name__)

BROKERS_PATH = "/loadbalance/brokers"
LEADER_PATH = "/loadbalance/leader"
REGISTER_RETRY_S = 0.5


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """One broker's registration (LocalBrokerData's field names on the wire)."""

    broker_id: str
    web_service_url: str
    web_service_url_tls: str | None = None
    pulsar_service_url: str | None = None
    pulsar_service_url_tls: str | None = None
    num_bundles: int = 0
    version: str = ""
    load: dict | None = None  # the published load report (LocalBrokerData's load fields; loadbalance)

    def to_json(self, now_ms: int) -> bytes:
        return json.dumps(
            {
                **(self.load or {}),
                "webServiceUrl": self.web_service_url,
                "webServiceUrlTls": self.web_service_url_tls,
                "pulsarServiceUrl": self.pulsar_service_url,
                "pulsarServiceUrlTls": self.pulsar_service_url_tls,
                "persistentTopicsEnabled": True,
                "nonPersistentTopicsEnabled": True,
                "brokerVersionString": self.version,
                "numBundles": self.num_bundles,
                "lastUpdate": now_ms,
            }
        ).encode()

    @classmethod
    def from_json(cls, broker_id: str, raw: bytes) -> BrokerInfo | None:
        try:
            doc = json.loads(raw)
        except ValueError:
            return None
        if not isinstance(doc, dict) or not doc.get("webServiceUrl"):
            return None
        return cls(
            broker_id=broker_id,
            web_service_url=doc["webServiceUrl"],
            web_service_url_tls=doc.get("webServiceUrlTls"),
            pulsar_service_url=doc.get("pulsarServiceUrl"),
            pulsar_service_url_tls=doc.get("pulsarServiceUrlTls"),
            num_bundles=int(doc.get("numBundles") or 0),
            version=str(doc.get("brokerVersionString") or ""),
            load=doc,
        )


class BrokerRegistry:
    def __init__(
        self,
        store: MetadataStore,
        info: Callable[[], BrokerInfo],
        *,
        clock: Clock,
        supervisor: TaskSupervisor,
    ) -> None:
        self._store = store
        self._info = info
        self._clock = clock
        self._supervisor = supervisor
        self._version: int | None = None  # of our node, when we hold it
        self._registering = False
        self._closed = False
        self.registrations = 0  # how many times we (re)wrote our node: tests and stats
        self.election = LeaderElection(
            store,
            LEADER_PATH,
            b"",  # set in start(): the web port is bound by then
            clock=clock,
            supervisor=supervisor,
        )

    @property
    def broker_id(self) -> str:
        return self._info().broker_id

    @property
    def path(self) -> str:
        return f"{BROKERS_PATH}/{self.broker_id}"

    async def start(self) -> None:
        self._store.add_session_listener(self._on_session_event)
        if not await self._register_once():
            self._spawn_register()
        self.election.value = json.dumps({"serviceUrl": self._info().web_service_url}).encode()
        await self.election.start()

    def _on_session_event(self, event: SessionEvent) -> None:
        if self._closed:
            return
        if event is SessionEvent.SESSION_LOST:
            self._version = None
        elif event in (SessionEvent.CONNECTED, SessionEvent.RECONNECTED):
            self._spawn_register()  # a fresh session: our ephemeral node is gone (or verify it is ours)

    def _spawn_register(self) -> None:
        if self._registering or self._closed or self._supervisor.closed:
            return
        self._registering = True
        self._supervisor.spawn(self._register_until_done(), name="broker-register")

    async def _register_until_done(self) -> None:
        try:
            while not self._closed:
                try:
                    if await self._register_once():
                        return
                except MetadataError as e:
                    log.info("broker registration failed (%s); retrying", e)
                await self._clock.sleep(REGISTER_RETRY_S)
        finally:
            self._registering = False

    async def _register_once(self) -> bool:
        """Writes our node; False while another session (an earlier incarnation) holds it."""
        value = self._info().to_json(self._clock.time_ms())
        try:
            stat = await self._store.put(self.path, value, -1, ephemeral=True)
        except AlreadyExists:
            got = await self._store.get(self.path)
            if got is None:
                return False
            if got.stat.ephemeral_owner != self._store.session_id:
                log.warning(
                    "broker id %s is still registered by session %s; waiting for it to expire",
                    self.broker_id,
                    got.stat.ephemeral_owner,
                )
                return False
            stat = await self._store.put(self.path, value, got.stat.version)
        self._version = stat.version
        self.registrations += 1
        return True

    async def update(self) -> None:
        """Rewrites our registration (bundle count, TLS URLs known later); no-op when not registered."""
        if self._version is None or self._closed:
            return
        value = self._info().to_json(self._clock.time_ms())
        try:
            self._version = (await self._store.put(self.path, value, self._version)).version
        except (BadVersion, NotFound):
            self._version = None
            self._spawn_register()

    async def live_brokers(self) -> list[BrokerInfo]:
        out = []
        for broker_id in await self._store.children(BROKERS_PATH):
            got = await self._store.get(f"{BROKERS_PATH}/{broker_id}")
            info = BrokerInfo.from_json(broker_id, got.value) if got is not None else None
            if info is not None:
                out.append(info)
        return out

    async def leader(self) -> dict | None:
        raw = await self.election.leader_value()
        if raw is None:
            return None
        try:
            url = json.loads(raw).get("serviceUrl")
        except (ValueError, AttributeError):
            return None
        return {"serviceUrl": url, "brokerId": str(url).split("://", 1)[-1]} if url else None

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._store.remove_session_listener(self._on_session_event)
        await self.election.close()
        if self._version is not None:
            try:
                await self._store.delete(self.path, self._version)
            except MetadataError:
                pass  # gone already, or the session's end removes it
