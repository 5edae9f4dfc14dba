"""Cluster figures: real processes (ZooKeeper, bookies, brokers, proxy) on this machine.

Theory of operation: every cluster is built by :class:`~magnetar.testing.cluster.ClusterProcesses`
(the same config files and command lines as ``magnetar cluster up``) on one
ZooKeeper started once, each cluster in its own chroot.  Figures, never
pass/fail:

* throughput with 1, 2 and 3 brokers (``--brokers-list``): the official
  client publishes ``--messages`` 1 KB messages, batched, spread over
  ``--topics-per-run`` topics (one producer each), through the multi-host
  service URL; msg/s and MB/s, and how many brokers the topics landed on
  (HTTP lookup of each topic);
* lookup latency: binary LOOKUP round trips (one connection, one at a time)
  against a broker and against the proxy, p50 / p99;
* time and memory to load ``--load-topics`` topics (default 10,000) with 1, 2 and 3
  brokers, in a namespace of ``--load-bundles`` bundles: for each topic a binary LOOKUP
  (Redirects followed to the owner, as a client does) then PRODUCER on the owner, pipelined
  (``--window`` topics in flight, ``--connections`` raw connections per broker); seconds,
  topics/s, time waited in lookups and in PRODUCER, each broker's CPU seconds and RSS
  before/after (``--only-load`` runs these alone);
* failover: two brokers with ``metadataStoreSessionTimeoutMillis``
  (``--session-timeout-ms``, printed); a producer on a topic, the topic's
  owner killed with ``kill -9``, time from the kill to the first
  acknowledged send on the broker that took the bundle over;
  ``--failover-runs`` fresh clusters, each figure and the median printed;
* rebalance (the load manager, ``--only-rebalance`` alone): three brokers, a namespace
  pinned to one by an isolation policy under a steady stream; the pin is deleted and
  the leader spreads the bundles: time to rebalance, messages in flight (sent, not yet
  acknowledged) and the slowest send during the moves, burst throughput before/after.

    .venv/bin/python benchmarks/cluster_bench.py [--brokers-list 1,2,3] [--messages 20000]
        [--load-topics 10000] [--load-bundles 64] [--skip-load] [--only-load] [--skip-failover] [--failover-runs 1]
        [--skip-rebalance] [--only-rebalance]
    (``--brokers-list ""`` skips the throughput, lookup and load figures)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import tempfile
import threading
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import psutil
import pulsar

from magnetar.app.zookeeper_server import ZooKeeperServer
from magnetar.protocol import client_commands
from magnetar.protocol.connection import ClientConnection, Connected, PingReceived, ResponseReceived
from magnetar.protocol.enums import CommandType
from magnetar.testing.cluster import ClusterProcesses

SIZE_BYTES = 1024


def _client(url: str) -> pulsar.Client:
    return pulsar.Client(
        url, operation_timeout_seconds=30, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    )


def _owner(web_url: str, topic: str) -> str:
    path = "/lookup/v2/topic/" + topic.replace("://", "/")
    with urllib.request.urlopen(web_url + urllib.parse.quote(path), timeout=30) as r:
        return json.loads(r.read())["brokerUrl"]


# ---------------------------------------------------------------------- throughput
def throughput(cluster: ClusterProcesses, messages: int, topics: int) -> dict[str, float]:
    client = _client(cluster.service_url)
    try:
        names = [f"persistent://public/default/tp-{uuid.uuid4().hex[:8]}-{i}" for i in range(topics)]
        producers = [
            client.create_producer(t, batching_enabled=True, batching_max_publish_delay_ms=5,
                                   max_pending_messages=5000, block_if_queue_full=True)
            for t in names
        ]  # fmt: skip
        owners = {_owner(cluster.web_url(0), t) for t in names}
        payload = b"x" * SIZE_BYTES
        t0 = time.perf_counter()
        for i in range(messages):
            producers[i % topics].send_async(payload, None)
        for p in producers:
            p.flush()
        elapsed = time.perf_counter() - t0
    finally:
        client.close()
    return {"msg_s": messages / elapsed, "mb_s": messages * SIZE_BYTES / elapsed / 1e6, "owners": len(owners)}


# ---------------------------------------------------------------------- raw protocol driver
class RawConnection:
    """One binary connection driven by the sans-IO ClientConnection (for lookups and PRODUCERs)."""

    def __init__(self) -> None:
        self.conn = ClientConnection()
        self.pending: dict[int, asyncio.Future[ResponseReceived]] = {}
        self.connected = asyncio.Event()

    async def open(self, url: str) -> None:
        host, port = url[len("pulsar://") :].split(",")[0].rsplit(":", 1)
        self.reader, self.writer = await asyncio.open_connection(host, int(port))
        self.writer.write(self.conn.connect())
        self.task = asyncio.get_running_loop().create_task(self._read())
        await asyncio.wait_for(self.connected.wait(), 30)

    async def _read(self) -> None:
        while data := await self.reader.read(1 << 16):
            self.conn.receive_data(data)
            while (ev := self.conn.next_event()) is not None:
                if isinstance(ev, Connected):
                    self.connected.set()
                elif isinstance(ev, PingReceived):
                    self.writer.write(ev.reply)
                elif isinstance(ev, ResponseReceived) and ev.final:
                    fut = self.pending.pop(ev.request_id, None)
                    if fut is not None and not fut.done():
                        fut.set_result(ev)

    async def request(self, kind: CommandType, build) -> ResponseReceived:  # type: ignore[no-untyped-def]
        rid = self.conn.new_request_id()
        fut = asyncio.get_running_loop().create_future()
        self.pending[rid] = fut
        self.writer.write(self.conn.send_request(kind, rid, build(rid)))
        return await asyncio.wait_for(fut, 120)

    async def close(self) -> None:
        self.writer.close()
        self.task.cancel()


async def lookup_latency(url: str, n: int) -> dict[str, float]:
    raw = RawConnection()
    await raw.open(url)
    samples = []
    try:
        for i in range(n):
            topic = f"persistent://public/default/lk-{i}"
            t0 = time.perf_counter()
            ev = await raw.request(CommandType.LOOKUP, lambda rid, t=topic: client_commands.lookup(t, rid))
            samples.append((time.perf_counter() - t0) * 1000)
            assert not ev.is_error, ev.frame.command
    finally:
        await raw.close()
    samples.sort()
    return {"p50_ms": statistics.median(samples), "p99_ms": samples[int(len(samples) * 0.99) - 1]}


async def load_topics(urls: list[str], namespace: str, n: int, window: int, connections: int) -> dict:
    """``n`` new topics of ``namespace`` loaded the way a client loads one: LOOKUP on one of
    ``urls`` (round-robin), following Redirects (with ``authoritative``) to the owner, then
    PRODUCER there; pipelined, ``window`` topics in flight, ``connections`` connections per
    broker (a broker handles one connection's commands in order).  Seconds in all, and the
    time spent waiting for lookups and for PRODUCER answers (summed over topics)."""
    raws: dict[str, list[RawConnection]] = {}
    for url in urls:
        raws[url] = [RawConnection() for _ in range(connections)]
        for raw in raws[url]:
            await raw.open(url)
    sem = asyncio.Semaphore(window)
    failures: list[str] = []
    spent = {"lookup_s": 0.0, "producer_s": 0.0}

    async def one(i: int) -> None:
        async with sem:
            topic = f"persistent://{namespace}/load-{i}"
            url, authoritative = urls[i % len(urls)], False
            t0 = time.perf_counter()
            for _ in range(8):
                raw = raws[url][i % connections]
                ev = await raw.request(
                    CommandType.LOOKUP,
                    lambda rid, a=authoritative: client_commands.lookup(topic, rid, authoritative=a),
                )
                resp = ev.frame.command  # CommandLookupTopicResponse
                if ev.is_error or resp.response not in (0, 1):
                    failures.append(f"lookup {topic}: {resp.message}")
                    return
                if resp.response == 1:  # Connect
                    break
                url, authoritative = resp.brokerServiceUrl, resp.authoritative
            t1 = time.perf_counter()
            ev = await raws[url][i % connections].request(
                CommandType.PRODUCER, lambda rid: client_commands.producer(topic, i, rid)
            )
            spent["lookup_s"] += t1 - t0
            spent["producer_s"] += time.perf_counter() - t1
            if ev.is_error:
                failures.append(f"producer {topic}: {ev.frame.command}")

    t0 = time.perf_counter()
    try:
        await asyncio.gather(*(one(i) for i in range(n)))
    finally:
        for conns in raws.values():
            for raw in conns:
                await raw.close()
    if failures:
        print(f"    ({len(failures)} topics failed, e.g. {failures[0][:200]})")
    return {"took_s": time.perf_counter() - t0, **spent}


def load_figures(cluster: ClusterProcesses, n_brokers: int, args: argparse.Namespace) -> None:
    """Time and memory to load ``--load-topics`` topics over the cluster's brokers."""
    ns = f"public/load-{uuid.uuid4().hex[:6]}"
    _http(
        "PUT",
        f"{cluster.web_url(0)}/admin/v2/namespaces/{ns}",
        {"bundles": {"numBundles": args.load_bundles}},
    )
    pids = [cluster.pid(f"broker-{i}") for i in range(n_brokers)]
    before = [_rss_mb(p) for p in pids]
    cpu0 = [sum(psutil.Process(p).cpu_times()[:2]) for p in pids]
    urls = [cluster.broker_url(i) for i in range(n_brokers)]
    r = asyncio.run(load_topics(urls, ns, args.load_topics, args.window, args.connections))
    after = [_rss_mb(p) for p in pids]
    cpu = [sum(psutil.Process(p).cpu_times()[:2]) - c for p, c in zip(pids, cpu0, strict=True)]
    per_topic_kb = (sum(after) - sum(before)) * 1e3 / args.load_topics
    print(f"  load {args.load_topics:,} topics on {n_brokers} broker(s) ({args.load_bundles} bundles): "
          f"{r['took_s']:.1f} s ({args.load_topics / r['took_s']:,.0f} topics/s); waited in lookups "
          f"{r['lookup_s'] / args.load_topics * 1e3:.0f} ms/topic, in PRODUCER "
          f"{r['producer_s'] / args.load_topics * 1e3:.0f} ms/topic; broker CPU "
          f"{' + '.join(f'{c:.0f}' for c in cpu)} s; broker RSS "
          f"{' + '.join(f'{b:.0f}->{a:.0f}' for b, a in zip(before, after, strict=True))} MB "
          f"(+{per_topic_kb:.1f} KB/topic)")  # fmt: skip


# ---------------------------------------------------------------------- failover
def failover(cluster: ClusterProcesses, session_timeout_ms: int) -> float | None:
    topic = f"persistent://public/default/fo-{uuid.uuid4().hex[:8]}"
    client = pulsar.Client(
        cluster.service_url, operation_timeout_seconds=30,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
    )  # fmt: skip
    try:
        producer = client.create_producer(topic, batching_enabled=False, send_timeout_millis=30_000)
        producer.send(b"before")
        owner_url = _owner(cluster.web_url(0), topic)
        owner = next(
            n for n in cluster.names("broker") if cluster.broker_url(int(n.split("-")[1])) == owner_url
        )
        acked = threading.Event()
        first_ack: list[float] = []

        def on_sent(res, _msg_id) -> None:  # type: ignore[no-untyped-def]
            if res == pulsar.Result.Ok and not first_ack:
                first_ack.append(time.perf_counter())
                acked.set()

        t_kill = time.perf_counter()
        cluster.kill(owner)
        deadline = t_kill + 60
        while not acked.is_set() and time.perf_counter() < deadline:
            producer.send_async(b"after", on_sent)
            acked.wait(0.05)
        new_owner = _owner(cluster.web_url(1 - int(owner.split("-")[1])), topic)
        if first_ack:
            took = first_ack[0] - t_kill
            print(f"  failover: kill -9 {owner} -> first acknowledged send {took:.2f} s "
                  f"(metadataStoreSessionTimeoutMillis={session_timeout_ms}; now served by {new_owner})")  # fmt: skip
            return took
        print(f"  failover: no acknowledged send within 60 s of kill -9 {owner}")
        return None
    finally:
        client.close()


# ---------------------------------------------------------------------- rebalance (load manager)
LB_PROPS = {
    "loadBalancerSheddingIntervalMinutes": "0.02",  # a round every 1.2 s
    "loadBalancerReportUpdateMinIntervalMillis": "500",
    "loadBalancerSheddingGracePeriodMinutes": "1",
    "loadBalancerBundleUnloadMinThroughputThreshold": "0",
    "loadBalancerOverrideBrokerNicSpeedGbps": "0.001",  # 125 KB/s: the steady stream is real load
    "loadBalancerHistoryResourcePercentage": "0.3",
    "loadBalancerCPUResourceWeight": "0",
    "loadBalancerMemoryResourceWeight": "0",
    "loadBalancerAutoBundleSplitEnabled": "false",
}


def _http(method: str, url: str, body: object = None) -> object:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        raw = r.read()
        return json.loads(raw) if raw[:1] in (b"[", b"{") else None


def _owned(cluster: ClusterProcesses, cluster_name: str, namespace: str) -> list[int]:
    out = []
    for i in range(len(cluster.names("broker"))):
        me = cluster.web_url(i).split("://", 1)[-1]
        got = _http("GET", f"{cluster.web_url(0)}/admin/v2/brokers/{cluster_name}/{me}/ownedNamespaces")
        out.append(sum(1 for k in got if k.startswith(namespace + "/")))  # type: ignore[union-attr]
    return out


def _burst(producers: list, n: int) -> float:  # type: ignore[type-arg]
    """Unthrottled sends over every producer; acknowledged msg/s."""
    t0 = time.perf_counter()
    for i in range(n):
        producers[i % len(producers)].send_async(b"b" * SIZE_BYTES, None)
    for p in producers:
        p.flush()
    return n / (time.perf_counter() - t0)


QUIET_S = 15.0


def rebalance(base: Path, zk_url: str, bookies: int, topics: int, burst: int, rate: int) -> None:
    """Three brokers; a namespace pinned to broker-0 by an isolation policy carries a steady
    stream; the pin is deleted and the leader spreads the bundles.  Figures: time from the
    policy deletion until no broker owns more than ``ceil(bundles / 3) + 1`` of them, the peak
    of messages in flight (sent, not yet acknowledged) and the slowest send during the moves
    against the steady state, and an unthrottled burst's throughput before and after."""
    name = "lbbench"
    with ClusterProcesses(base / "rebalance", brokers=3, bookies=bookies, zookeeper_url=zk_url,
                          cluster_name=name, broker_properties=LB_PROPS) as cluster:  # fmt: skip
        web = cluster.web_url(0)
        pin = f"{web}/admin/v2/clusters/{name}/namespaceIsolationPolicies/bench-pin"
        _http("PUT", f"{web}/admin/v2/namespaces/public/lb", {"bundles": {"numBundles": topics}})
        broker0 = web.split("://", 1)[-1]
        _http("POST", pin, {"namespaces": ["public/lb"], "primary": [broker0], "secondary": []})
        client = _client(cluster.broker_url(0))
        names = [f"persistent://public/lb/t-{uuid.uuid4().hex[:8]}-{i}" for i in range(topics)]
        producers = [client.create_producer(t, batching_enabled=True, batching_max_publish_delay_ms=2,
                                            max_pending_messages=2000, block_if_queue_full=True,
                                            send_timeout_millis=120_000) for t in names]  # fmt: skip
        consumers = [
            client.subscribe(t, "bench", message_listener=lambda c, m: c.acknowledge(m)) for t in names
        ]
        lock = threading.Lock()
        pending: dict[int, float] = {}
        latencies: list[tuple[float, float]] = []  # (sent at, latency)
        stop = threading.Event()

        def stream() -> None:
            seq = 0
            while not stop.is_set():
                t0 = time.perf_counter()
                for p in producers:
                    k = seq
                    seq += 1
                    with lock:
                        pending[k] = time.perf_counter()

                    def done(res, _mid, k=k) -> None:  # type: ignore[no-untyped-def]
                        with lock:
                            sent = pending.pop(k, None)
                            if sent is not None and res == pulsar.Result.Ok:
                                latencies.append((sent, time.perf_counter() - sent))

                    p.send_async(b"s" * SIZE_BYTES, done)
                time.sleep(max(0.0, topics / rate - (time.perf_counter() - t0)))

        try:
            print(f"  rebalance: 3 brokers, {topics} topics in {topics} bundles pinned to broker-0, "
                  f"steady stream {rate} msg/s; shedding every 1.2 s")  # fmt: skip
            before = _burst(producers, burst)
            worker = threading.Thread(target=stream, daemon=True)
            worker.start()
            time.sleep(5)  # steady state, reports published
            samples: list[int] = []
            t_steady = time.perf_counter()
            while time.perf_counter() - t_steady < 3:
                with lock:
                    samples.append(len(pending))
                time.sleep(0.02)
            steady_peak = max(samples)
            owned0 = _owned(cluster, name, "public/lb")
            t0 = time.perf_counter()
            _http("DELETE", pin)
            target = -(-sum(owned0) // 3) + 1
            peak, owned, took = 0, owned0, None
            # Settled: every broker owns some, and no bundle moved for QUIET_S.  (ThresholdShedder
            # stops once no broker is above the average + loadBalancerBrokerThresholdShedderPercentage,
            # which can leave one broker a bundle or two above an even split.)
            last_change, settled = t0, None
            while time.perf_counter() - t0 < 90:
                with lock:
                    peak = max(peak, len(pending))
                if int((time.perf_counter() - t0) * 50) % 25 == 0:  # ownership every ~0.5 s
                    now_owned = _owned(cluster, name, "public/lb")
                    if now_owned != owned:
                        owned, last_change = now_owned, time.perf_counter()
                    if took is None and max(owned) <= target and min(owned) > 0:
                        took = time.perf_counter() - t0
                    if min(owned) > 0 and time.perf_counter() - last_change >= QUIET_S:
                        settled = last_change - t0
                        break
                time.sleep(0.02)
            t_end = time.perf_counter() + 2
            while time.perf_counter() < t_end:
                with lock:
                    peak = max(peak, len(pending))
                time.sleep(0.02)
            stop.set()
            worker.join(30)
            for p in producers:
                p.flush()
            during = [lat for sent, lat in latencies if sent >= t0]
            steady = [lat for sent, lat in latencies if t_steady <= sent < t0]
            after = _burst(producers, burst)
            stats = _http("GET", f"{web}/admin/v2/brokers/leaderBroker")
            leader = stats["serviceUrl"]  # type: ignore[index]
            moved = _http("GET", f"{leader}/admin/v2/broker-stats/load-decisions")["counters"]  # type: ignore[index]
            unloads = moved.get("bundles_unloaded", 0)
            even = f"{took:.1f} s" if took is not None else "never (threshold shedding left it there)"
            if settled is None:
                print(f"  rebalance: not settled within 90 s (bundles per broker {owned0} -> {owned}; "
                      f"{unloads} unloads by the leader)")  # fmt: skip
            else:
                print(f"  time to rebalance: settled {settled:.1f} s after the pin was lifted (no move in the "
                      f"next {QUIET_S:.0f} s; bundles per broker {owned0} -> {owned}; {unloads} unloads by the "
                      f"leader); no broker above ceil(n/3)+1 after "
                      f"{even}")  # fmt: skip
            print(f"  messages in flight: steady peak {steady_peak}, peak during the moves {peak}; "
                  f"slowest send: steady {max(steady, default=0) * 1e3:.0f} ms, "
                  f"during the moves {max(during, default=0) * 1e3:.0f} ms")  # fmt: skip
            print(f"  throughput (unthrottled burst of {burst}): before {before:,.0f} msg/s on one broker, "
                  f"after {after:,.0f} msg/s spread")  # fmt: skip
            for c in consumers:
                c.close()
        finally:
            stop.set()
            client.close()


def _rss_mb(pid: int) -> float:
    return psutil.Process(pid).memory_info().rss / 1e6


def settle(cluster: ClusterProcesses, limit_s: float = 30.0, busy: float = 0.15) -> float:
    """Waits until every broker process is idle (< ``busy`` of a core over 0.5 s): right after
    ready each broker still preloads its admin routes (``magnetarAdminRoutesPreloadDelayMs``),
    seconds of CPU on a busy box, which the first figure would otherwise pay.  The wait."""
    procs = [psutil.Process(cluster.pid(name)) for name in cluster.names("broker")]
    t0 = time.perf_counter()
    time.sleep(1.5)  # past the preload's delay (1 s by default)
    quiet = 0
    while quiet < 2 and time.perf_counter() - t0 < limit_s:  # two idle half-seconds in a row
        cpu0 = [sum(p.cpu_times()[:2]) for p in procs]
        time.sleep(0.5)
        idle = all(sum(p.cpu_times()[:2]) - c < busy * 0.5 for p, c in zip(procs, cpu0, strict=True))
        quiet = quiet + 1 if idle else 0
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--brokers-list", default="1,2,3")
    ap.add_argument("--bookies", type=int, default=2)
    ap.add_argument("--messages", type=int, default=20_000)
    ap.add_argument("--topics-per-run", type=int, default=6)
    ap.add_argument("--throughput-runs", type=int, default=3, help="new topics each; the median is printed")
    ap.add_argument("--lookups", type=int, default=500)
    ap.add_argument("--load-topics", type=int, default=10_000)
    ap.add_argument("--window", type=int, default=200)
    ap.add_argument("--connections", type=int, default=4, help="per broker, for the topic load")
    ap.add_argument("--load-bundles", type=int, default=64, help="bundles of the loaded namespace")
    ap.add_argument(
        "--only-load", action="store_true", help="only the topic-load figures (implies --skip-rebalance)"
    )
    ap.add_argument("--session-timeout-ms", type=int, default=1000)
    ap.add_argument("--skip-load", action="store_true")
    ap.add_argument("--skip-failover", action="store_true")
    ap.add_argument("--failover-runs", type=int, default=1)
    ap.add_argument("--skip-rebalance", action="store_true")
    ap.add_argument("--only-rebalance", action="store_true", help="run the load-manager figures alone")
    ap.add_argument("--rebalance-topics", type=int, default=16)
    ap.add_argument("--rebalance-burst", type=int, default=20_000)
    ap.add_argument("--rebalance-rate", type=int, default=100, help="steady stream, msg/s")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="magnetar-cluster-bench-"))
    zk = ZooKeeperServer(str(base / "zookeeper"))
    zk.start()
    print(f"cluster bench: {psutil.cpu_count()} CPUs, {args.bookies} bookies (E/Qw/Qa {min(2, args.bookies)}), "
          f"1 KB messages; data in {base}")  # fmt: skip
    try:
        if not args.skip_rebalance and not args.only_load:
            rebalance(
                base, zk.url, args.bookies, args.rebalance_topics, args.rebalance_burst, args.rebalance_rate
            )
        if args.only_rebalance:
            return
        for n in [int(x) for x in args.brokers_list.split(",") if x.strip()]:
            with ClusterProcesses(base / f"b{n}", brokers=n, bookies=args.bookies, zookeeper_url=zk.url,
                                  proxy=(n == 1)) as cluster:  # fmt: skip
                if args.only_load:
                    load_figures(cluster, n, args)
                    continue
                settled = settle(cluster)
                runs = [
                    throughput(cluster, args.messages, args.topics_per_run)
                    for _ in range(args.throughput_runs)
                ]
                r = sorted(runs, key=lambda x: x["msg_s"])[len(runs) // 2]  # the median run
                each = ", ".join(f"{x['msg_s']:,.0f}" for x in runs)
                print(f"  throughput, {n} broker(s): {r['msg_s']:,.0f} msg/s, {r['mb_s']:.1f} MB/s "
                      f"({args.topics_per_run} topics on {r['owners']} broker(s); brokers idle {settled:.1f} s after ready; median of {len(runs)}: {each})")  # fmt: skip
                if n == 1:
                    for what, url in (("broker", cluster.broker_url(0)), ("proxy", cluster.proxy_url)):
                        lat = asyncio.run(lookup_latency(url, args.lookups))
                        print(f"  lookup latency via {what}: p50 {lat['p50_ms']:.2f} ms, "
                              f"p99 {lat['p99_ms']:.2f} ms ({args.lookups} lookups)")  # fmt: skip
                if not args.skip_load:
                    load_figures(cluster, n, args)
        if not args.skip_failover and not args.only_load:
            props = {"metadataStoreSessionTimeoutMillis": str(args.session_timeout_ms)}
            took = []
            for run in range(args.failover_runs):
                with ClusterProcesses(base / f"failover{run}", brokers=2, bookies=args.bookies,
                                      zookeeper_url=zk.url, broker_properties=props) as cluster:  # fmt: skip
                    took.append(failover(cluster, args.session_timeout_ms))
            done = [t for t in took if t is not None]
            if len(took) > 1 and done:
                print(f"  failover over {len(took)} runs: median {statistics.median(done):.2f} s, "
                      f"max {max(done):.2f} s, {len(took) - len(done)} without an acknowledged send")  # fmt: skip
    finally:
        zk.close()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
