"""The cluster namespace service over an in-memory metadata service shared by three brokers.

Lookup answers (Connect / Redirect with authoritative, to the owner or the chosen broker),
ownership checks before a topic loads, unload (topics closed, lock released, the next
placement moves the bundle), loss of the session (topics closed, registered again), the leader.
"""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest

from magnetar.broker import errors
from magnetar.broker.ownership.api import NotOwnedHere, find_bundle
from magnetar.broker.ownership.bundles import even_boundaries, to_hex, topic_hash
from magnetar.broker.ownership.cluster import ClusterNamespaceService
from magnetar.broker.ownership.ownership import ownership_path
from magnetar.broker.ownership.registry import BROKERS_PATH
from magnetar.broker.service.names import parse_topic
from magnetar.metadata.memory import MemoryMetadataServer
from magnetar.runtime import RealClock, TaskSupervisor

NS = "t/ns"


class FakeTopics:
    def __init__(self) -> None:
        self.open: dict[str, object] = {}
        self.unloaded: list[str] = []

    def loaded(self) -> list[object]:
        return [SimpleNamespace(ref=parse_topic(n)) for n in self.open]

    async def unload(self, ref: object) -> bool:
        self.unloaded.append(ref.full_name)
        return self.open.pop(ref.full_name, None) is not None


class FakeBroker:
    def __init__(self, server: MemoryMetadataServer, name: str, bundles: int = 4) -> None:
        self.name = name
        self.clock = RealClock()
        self.config = SimpleNamespace(default_number_of_namespace_bundles=bundles, advertised_address=name)
        self.policies = {"bundles": {"boundaries": to_hex(even_boundaries(bundles)), "numBundles": bundles}}
        self.cached: dict | None = None  # a stale copy the namespace cache still serves (None: current)

        async def get(ns: str, *, fresh: bool = False) -> dict | None:
            if ns != NS:
                return None
            return self.policies if fresh or self.cached is None else self.cached

        self.resources = SimpleNamespace(namespaces=SimpleNamespace(get=get))
        self.metadata_store = server.session()
        self.supervisor = TaskSupervisor(name)
        self.topics = FakeTopics()
        self.transactions = None  # BrokerFace: no transaction coordinators here
        self.ns = ClusterNamespaceService(self)
        self.dead = False  # killed: refuses connections (the dead-owner probe, .dead_owner)
        self.ns.dead_owners.probe = self._accepts

    async def _accepts(self, url: str) -> bool:
        return not self.dead

    def broker_service_url(self, listener: str | None = None) -> str:
        return f"pulsar://{self.name}:6650"

    def broker_service_url_tls(self) -> str | None:
        return f"pulsar+ssl://{self.name}:6651"

    def web_service_url(self) -> str:
        return f"http://{self.name}:8080"

    def web_service_url_tls(self) -> str | None:
        return None


@pytest.fixture
async def brokers():
    server = MemoryMetadataServer()
    bs = [FakeBroker(server, f"b{i}") for i in range(3)]
    for b in bs:
        await b.ns.start()
    yield bs
    for b in bs:
        await b.ns.aclose()
        await b.supervisor.aclose()
    await server.aclose()


def by_url(bs: list[FakeBroker], url: str) -> FakeBroker:
    return next(b for b in bs if b.web_service_url() == url)


async def settle(bs: list[FakeBroker], topic: str) -> FakeBroker:
    """Follows lookups from the first broker as a client does; returns the owner."""
    ref = parse_topic(topic)
    b, auth = bs[0], False
    for _ in range(3):
        answer = await b.ns.lookup(ref, auth)
        if not answer.redirect:
            return b
        assert answer.authoritative
        b, auth = by_url(bs, answer.owner.http_url), answer.authoritative
    raise AssertionError("no owner after 3 hops")


async def test_registration_with_every_listener_and_one_leader(brokers):
    store = brokers[0].metadata_store
    assert await store.children(BROKERS_PATH) == ["b0:8080", "b1:8080", "b2:8080"]
    doc = json.loads((await store.get(f"{BROKERS_PATH}/b1:8080")).value)
    assert (
        doc["pulsarServiceUrl"] == "pulsar://b1:6650" and doc["pulsarServiceUrlTls"] == "pulsar+ssl://b1:6651"
    )
    assert doc["webServiceUrl"] == "http://b1:8080"
    assert await brokers[2].ns.list_brokers() == ["b0:8080", "b1:8080", "b2:8080"]
    leaders = {(await b.ns.leader())["brokerId"] for b in brokers}
    assert leaders == {"b0:8080"}
    await brokers[0].ns.aclose()
    for _ in range(100):
        if (await brokers[1].ns.leader() or {}).get("brokerId") in ("b1:8080", "b2:8080"):
            break
        await asyncio.sleep(0.01)
    assert (await brokers[1].ns.leader())["brokerId"] in ("b1:8080", "b2:8080")
    assert await brokers[1].ns.list_brokers() == ["b1:8080", "b2:8080"]


async def test_lookup_connects_on_the_owner_and_redirects_elsewhere(brokers):
    topics = [f"persistent://{NS}/t{i}" for i in range(16)]
    owners = {t: await settle(brokers, t) for t in topics}
    assert len({o.name for o in owners.values()}) >= 2  # the bundles spread
    for t, owner in owners.items():
        ref = parse_topic(t)
        bundle = await owner.ns.bundle_of(ref)
        assert [b.name for b in brokers if b.ns.ownership.is_owned(bundle)] == [owner.name]
        for other in brokers:
            answer = await other.ns.lookup(ref)
            if other is owner:
                assert not answer.redirect
            else:
                assert answer.redirect and answer.authoritative
                assert answer.owner.native_url == owner.broker_service_url()
                assert answer.owner.native_url_tls == owner.broker_service_url_tls()
                with pytest.raises(errors.ServiceNotReadyError, match="not owned by this broker"):
                    await other.ns.check_owned(ref)
        await owner.ns.check_owned(ref)
        lock = await owner.metadata_store.get(ownership_path(bundle))
        assert json.loads(lock.value)["nativeUrl"] == owner.broker_service_url()


async def test_unknown_namespace_is_not_found(brokers):
    with pytest.raises(errors.NamespaceNotFoundError):
        await brokers[0].ns.lookup(parse_topic("persistent://t/nope/x"))


async def test_unload_closes_topics_releases_and_moves_the_bundle(brokers):
    topic = f"persistent://{NS}/moving"
    owner = await settle(brokers, topic)
    owner.topics.open[topic] = object()
    bundle = await owner.ns.bundle_of(parse_topic(topic))
    other = next(b for b in brokers if b is not owner)
    with pytest.raises(NotOwnedHere) as info:
        await other.ns.unload_bundle(bundle)
    assert info.value.owner.http_url == owner.web_service_url()
    assert await owner.ns.unload_bundle(bundle) == 1
    assert owner.topics.unloaded == [topic] and not owner.ns.ownership.is_owned(bundle)
    assert await owner.metadata_store.get(ownership_path(bundle)) is None
    for _ in range(5):  # whoever places it next avoids the broker that unloaded it
        assert (await settle(brokers, topic)) is not owner
        new = next(b for b in brokers if b.ns.ownership.is_owned(bundle))
        await new.ns.unload_bundle(bundle, destination=owner.name + ":8080")
        assert (await settle(brokers, topic)) is owner  # destinationBroker honoured
        await owner.ns.unload_bundle(bundle)


async def test_session_loss_closes_the_bundles_topics_and_registers_again(brokers):
    topic = f"persistent://{NS}/lost"
    owner = await settle(brokers, topic)
    owner.topics.open[topic] = object()
    bundle = await owner.ns.bundle_of(parse_topic(topic))
    registrations = owner.ns.registry.registrations
    store = owner.metadata_store
    store._server.expire_session(store.session_id)
    for _ in range(200):
        if owner.topics.unloaded and owner.ns.registry.registrations > registrations:
            break
        await asyncio.sleep(0.01)
    assert owner.topics.unloaded == [topic]
    assert not owner.ns.ownership.is_owned(bundle)
    assert owner.ns.registry.registrations > registrations  # same process, a new session
    assert owner.name + ":8080" in await brokers[1].ns.list_brokers()
    again = await settle(brokers, topic)
    assert [b.name for b in brokers if b.ns.ownership.is_owned(bundle)] == [again.name]


async def test_health_topic_of_the_broker_itself_needs_no_lock(brokers):
    b = brokers[1]
    ref = parse_topic("persistent://pulsar/system/healthcheck-b1-6650")
    answer = await b.ns.lookup(ref)
    assert not answer.redirect
    await b.ns.check_owned(ref)


async def test_graceful_shutdown_hands_every_bundle_over(brokers):
    topics = [f"persistent://{NS}/g{i}" for i in range(12)]
    owners = {t: await settle(brokers, t) for t in topics}
    leaving = next(iter(owners.values()))
    for t, o in owners.items():
        if o is leaving:
            leaving.topics.open[t] = object()
    await leaving.ns.prepare_shutdown()
    assert leaving.ns.ownership.owned() == []
    assert sorted(leaving.topics.unloaded) == sorted(t for t, o in owners.items() if o is leaving)
    assert leaving.name + ":8080" not in await brokers[0].ns.list_brokers()
    for t in topics:
        ref = parse_topic(t)
        answer = await leaving.ns.lookup(ref)  # it never takes a bundle again: it redirects
        assert answer.redirect and answer.owner.http_url != leaving.web_service_url()
        with pytest.raises(errors.ServiceNotReadyError):
            await leaving.ns.check_owned(ref)


async def test_lookup_of_a_dead_owners_bundle_waits_for_its_lock_then_settles_elsewhere(brokers):
    """kill -9: the owner refuses connections but its lock lives until its session expires.
    A lookup meanwhile is held (not redirected to the dead broker, which would send the client
    into its reconnect back-off) and answered with a live owner as soon as the lock goes."""
    topic = f"persistent://{NS}/dead"
    ref = parse_topic(topic)
    owner = await settle(brokers, topic)
    bundle = await owner.ns.bundle_of(ref)
    other = next(b for b in brokers if b is not owner)
    for b in brokers:  # every broker's probe sees the owner dead
        b.ns.dead_owners.probe = lambda url, dead=owner.broker_service_url(): asyncio.sleep(0, url != dead)
    lookup = asyncio.ensure_future(other.ns.lookup(ref))
    await asyncio.sleep(0.3)
    assert not lookup.done(), "held while the dead owner's lock is there"
    store = owner.metadata_store
    store._server.suspend_session(store.session_id)  # dead: it never registers again
    store._server.expire_session(store.session_id)  # ZooKeeper expires the dead broker's session
    answer = await asyncio.wait_for(lookup, 5)
    assert answer.owner.http_url != owner.web_service_url()
    new_owner = other if not answer.redirect else by_url(brokers, answer.owner.http_url)
    if answer.redirect:
        assert answer.authoritative and not (await new_owner.ns.lookup(ref, True)).redirect
    assert new_owner.ns.ownership.is_owned(bundle)


async def test_lookup_redirects_to_an_unreachable_owner_whose_lock_stays(brokers):
    """Unreachable from here but alive (its session holds): after the hold, the usual redirect."""
    topic = f"persistent://{NS}/partitioned-away"
    ref = parse_topic(topic)
    owner = await settle(brokers, topic)
    other = next(b for b in brokers if b is not owner)
    other.ns.dead_owners.hold_s = 0.3
    other.ns.dead_owners.probe = lambda url: asyncio.sleep(0, False)
    answer = await asyncio.wait_for(other.ns.lookup(ref), 5)
    assert answer.redirect and answer.owner.http_url == owner.web_service_url()


async def test_concurrent_lookups_while_this_broker_takes_the_bundle_all_connect(brokers, monkeypatch):
    """The lock node exists (with our data) before the acquisition completes: a lookup or a
    topic load reading it meanwhile waits for the acquisition instead of answering
    ServiceNotReady ("held by an old session"), which sent clients into their back-off."""
    b = brokers[0]
    store = b.metadata_store
    real_put = store.put

    async def late_answer(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        stat = await real_put(*args, **kwargs)
        await asyncio.sleep(0.05)  # ZooKeeper's answer arrives after the node is visible
        return stat

    monkeypatch.setattr(store, "put", late_answer)
    refs = [parse_topic(f"persistent://{NS}/c{i}") for i in range(40)]
    bundle = await b.ns.bundle_of(refs[0])
    same = [r for r in refs if await b.ns.bundle_of(r) == bundle]
    answers = await asyncio.gather(
        *(b.ns.lookup(r, True) for r in same), *(b.ns.check_owned(r) for r in same), return_exceptions=True
    )
    assert [a for a in answers if isinstance(a, BaseException)] == []
    assert all(not a.redirect for a in answers[: len(same)])


async def test_a_lookup_on_stale_boundaries_never_owns_the_split_parent(brokers):
    """Another broker split bundle P (new boundaries written, P's lock released); this broker's
    namespace cache still has the old boundaries. Its lookup computes P, wins P's free lock --
    and must give it back (the store's boundaries no longer have P) and take the child instead;
    a topic load there (check_owned) is allowed on the child, never on P."""
    b = brokers[0]
    ref = parse_topic(f"persistent://{NS}/split-race")
    parent = await b.ns.bundle_of(ref)
    lo, hi = parent.range.lower, parent.range.upper
    split = sorted({*even_boundaries(4), (lo + hi) // 2})
    b.cached = b.policies
    for x in brokers:
        x.policies = {"bundles": {"boundaries": to_hex(split), "numBundles": 5}}
    assert await b.ns.bundle_of(ref) == parent  # the stale view
    child = await find_bundle(b, ref, fresh=True)
    assert child != parent and parent.range.contains(topic_hash(ref.full_name))

    answer = await b.ns.lookup(ref, True)  # authoritative: take it here
    assert not answer.redirect
    assert not b.ns.ownership.is_owned(parent)
    assert b.ns.ownership.is_owned(child)
    assert b.ns.ownership.counters["stale"] == 1
    assert await b.metadata_store.get(ownership_path(parent)) is None  # the parent's lock given back
    await b.ns.check_owned(ref)  # the stale cache does not refuse the load on the child's owner

    # Another broker, also stale, is refused on the topic (the child is b's) and takes nothing.
    other = brokers[1]
    other.cached = b.cached
    with pytest.raises(errors.ServiceNotReadyError, match="not owned by this broker"):
        await other.ns.check_owned(ref)
    assert not other.ns.ownership.is_owned(parent)
    assert await other.metadata_store.get(ownership_path(parent)) is None
