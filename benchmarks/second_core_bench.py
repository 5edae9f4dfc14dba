"""Which design uses the second core: measured with processes that exist today (issue 15).

Theory of operation: before building a multi-process standalone, run the
shapes it would have with the pieces the project already has, and measure
with the official client what each gains:

* ``standalone``  -- ``magnetar standalone``: broker + in-process bookie, one process;
* ``split``       -- one ``magnetar broker`` + one ``magnetar bookie`` (ZooKeeper
  metadata, E=Qw=Qa=1): the "bookie in its own process" design;
* ``sharded``     -- two ``magnetar broker`` + one ``magnetar bookie``: topics
  (bundles) owned by two broker processes, the "several broker processes" design;
* ``pair``        -- two ``magnetar standalone`` side by side, each a broker with its
  own in-process bookie, the N topics split between them (topic i through
  standalone i mod 2): the "several standalone-like processes" layout, less the
  metadata they would share (which is not on the per-message path).

Each mode runs: one unbatched producer (1,000 outstanding), then N unbatched
producers on N topics at once (``e2e_bench.publish_many``), then a batched
producer, and reports msg/s, the ratio N/1, and the CPU per message of every
process of the mode (broker(s) + bookie; ZooKeeper is left out: it is idle
on the add path).  The bookie's ``journalSyncData`` is false everywhere (the
standalone's default).  Modes alternate round by round; the load average is
printed beside every row.  Figures, never pass/fail.

    .venv/bin/python benchmarks/second_core_bench.py [--rounds 3] [--messages 4000] [--modes standalone,split,sharded,pair]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).parent))
from e2e_bench import _client, publish, publish_many, race_producers  # noqa: E402

from magnetar.testing.standalone import StandaloneProcess  # noqa: E402

SYNC = {"journalSyncData": "false"}
# The admin REST routes are built in the background ~1 s after ready (seconds of CPU on this box):
# off, so that they do not land in a measured row.
NO_PRELOAD = {"magnetarAdminRoutesPreloadDelayMs": "-1"}
ONE_COPY = {
    "managedLedgerDefaultEnsembleSize": "1",
    "managedLedgerDefaultWriteQuorum": "1",
    "managedLedgerDefaultAckQuorum": "1",
}


class Mode:
    """A running set of processes: ``url`` for the client, ``pids`` whose CPU counts."""

    def __init__(self, name: str, tmp: Path) -> None:
        self.name, self.tmp = name, tmp
        self.url = self.web_url = ""
        self.urls: list[str] = []  # one client per URL; topic i is produced through urls[i % n]
        self.pids: list[int] = []
        self._sas: list[StandaloneProcess] = []
        self._cluster = None

    def start(self) -> None:
        if self.name in ("standalone", "pair"):
            for i in range(2 if self.name == "pair" else 1):
                conf = self.tmp / f"standalone-{i}.conf"
                conf.write_text("journalSyncData=false\nmagnetarAdminRoutesPreloadDelayMs=-1\n")
                sa = StandaloneProcess(self.tmp / f"data-{i}", config_file=conf)
                self._sas.append(sa)
                sa.start()
            self.urls = [sa.broker_url for sa in self._sas]
            self.url, self.web_url = self.urls[0], self._sas[0].web_url
            self.pids = [sa.pid for sa in self._sas]
            return
        from magnetar.testing.cluster import ClusterProcesses

        brokers = 2 if self.name == "sharded" else 1
        self._cluster = ClusterProcesses(
            self.tmp / "cluster",
            brokers=brokers,
            bookies=1,
            broker_properties={**ONE_COPY, **NO_PRELOAD, "loadBalancerSheddingEnabled": "false"},
            bookie_properties=SYNC,
        )
        self._cluster.start()
        self.url = self._cluster.service_url
        self.urls = [self.url]
        self.web_url = self._cluster.web_url(0)
        self.pids = [
            self._cluster.pid(n) for n in self._cluster.names("broker") + self._cluster.names("bookie")
        ]

    def cpu(self) -> dict[int, float]:
        out = {}
        for pid in self.pids:
            t = psutil.Process(pid).cpu_times()
            out[pid] = t.user + t.system
        return out

    def stop(self) -> None:
        for sa in self._sas:
            sa.terminate()
        if self._cluster is not None:
            self._cluster.stop()


def publish_pairs(clients: list, topics: list[str], n_each: int) -> float:
    """``e2e_bench.publish_many`` with topic i produced through ``clients[i % len(clients)]``."""
    if len(clients) == 1:
        return publish_many(clients[0], topics, n_each)
    producers = [
        clients[i % len(clients)].create_producer(
            t, batching_enabled=False, max_pending_messages=1000, block_if_queue_full=True
        )
        for i, t in enumerate(topics)
    ]
    return race_producers(producers, n_each)


def _owner(web_url: str, topic: str) -> str:
    """The broker that owns ``topic`` (the lookup REST call); the N-producer row can only use
    several broker processes when its topics are owned by several."""
    path = topic.replace("persistent://", "persistent/")
    with urllib.request.urlopen(f"{web_url}/lookup/v2/topic/{path}", timeout=30) as resp:
        return str(json.loads(resp.read())["brokerUrl"])


def run_mode(name: str, messages: int, producers: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix=f"magnetar-2core-{name}-") as tmp:
        mode = Mode(name, Path(tmp))
        mode.start()
        try:
            time.sleep(1.0)
            clients = [_client(u) for u in mode.urls]
            client = clients[0]
            tag = f"{os.getpid()}-{int(time.time() * 1000)}"
            # warm-up: topic loads, ledger creation, first lookups
            publish_pairs(
                clients, [f"persistent://public/default/warm-{tag}-{i}" for i in range(producers)], 200
            )
            c0 = mode.cpu()
            one = publish(client, f"persistent://public/default/one-{tag}", messages, batching=False)
            c1 = mode.cpu()
            me = psutil.Process().cpu_times()
            topics = [f"persistent://public/default/multi-{tag}-{i}" for i in range(producers)]
            many = publish_pairs(clients, topics, messages)
            c2 = mode.cpu()
            me2 = psutil.Process().cpu_times()
            batched = publish(
                client, f"persistent://public/default/batched-{tag}", messages * 5, batching=True
            )
            for c in clients:
                c.close()
            load = os.getloadavg()[0]
            owners = len(mode.urls) if mode.name == "pair" else len({_owner(mode.web_url, t) for t in topics})
        finally:
            mode.stop()
    one_us = sum(c1.values()) / messages * 1e6 - sum(c0.values()) / messages * 1e6
    many_us = (sum(c2.values()) - sum(c1.values())) / (messages * producers) * 1e6
    # the busiest process's share of the N-producer row: how far from one core per process
    busiest = max(c2[p] - c1[p] for p in c2)
    wall_many = messages * producers / many
    return {
        "one_msg_s": one,
        "many_msg_s": many,
        "ratio": many / one,
        "batched_msg_s": batched,
        "cpu_us_one": one_us,
        "cpu_us_many": many_us,
        "busiest_core_pct": busiest / wall_many * 100,
        # the official client (this process, its C++ threads included) during the N-producer row
        "client_core_pct": (me2.user + me2.system - me.user - me.system) / wall_many * 100,
        "owners": owners,
        "load": load,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--messages", type=int, default=4000, help="per producer, unbatched")
    p.add_argument("--producers", type=int, default=4)
    p.add_argument("--modes", default="standalone,split,sharded,pair")
    args = p.parse_args(argv)
    modes = args.modes.split(",")
    results: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
    for r in range(args.rounds):
        for m in modes:
            res = run_mode(m, args.messages, args.producers)
            results[m].append(res)
            print(f"round {r + 1} {m:10s} " + " ".join(f"{k}={v:.1f}" for k, v in res.items()), flush=True)
    print("medians:")
    for m in modes:
        keys = results[m][0].keys()
        med = {k: statistics.median(x[k] for x in results[m]) for k in keys}
        print(f"  {m:10s} " + " ".join(f"{k}={v:.2f}" for k, v in med.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
