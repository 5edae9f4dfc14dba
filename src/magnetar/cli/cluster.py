"""``magnetar cluster up | down | status``: a whole cluster on this machine, as separate processes.

Theory of operation: ``up`` does what an operator does by hand, in order:
start ZooKeeper (Debian's ``zookeeper`` package, detached, data under
``<data-dir>/zookeeper``) unless ``--zookeeper`` names one; run
initialize-cluster-metadata; start M ``magnetar bookie``, N ``magnetar
broker`` (and ``magnetar autorecovery``, and ``magnetar proxy`` with
``--proxy``), each from its own Pulsar-style config file written into the data
dir by :func:`~magnetar.app.cluster_launch.plan_cluster`, each in its own
session so it outlives this command; wait for every ready line; print the
service URLs.  Ports are free loopback ports chosen at ``up``.

The state file ``<data-dir>/cluster.json`` records every process (pid, config
file, log, ports) and the metadata URL.  ``down`` stops them in reverse order
(proxy, brokers, auto-recovery, bookies, ZooKeeper if we started it) with
SIGTERM, then SIGKILL after ``--timeout``; a pid is only signalled while its
command line still names its config file, so a recycled pid is never hit;
the processes of one role stop together (the brokers in parallel).
``status`` prints each process (running or not, and for brokers and the
proxy whether the HTTP port answers), then what the metadata store says: the
bookies under ``/ledgers/available``, the brokers registered under
``/loadbalance/brokers``, the leader at ``/loadbalance/leader`` and the
bundle owners under ``/namespace`` -- whatever of those exists.
Geo-replication: several clusters form one instance when they share a
configuration store (Pulsar's ``configurationMetadataStoreUrl``):
``--configuration-metadata-store zk:host:port[/chroot]`` puts it in every
broker's config, and initialize-cluster-metadata registers the cluster there
with every broker's URLs (multi-host ``pulsar://h:p1,h:p2``), so the other
clusters' replicators find it; without the flag the cluster's own store is
its configuration store.
If ``up`` fails half-way, what it started is stopped again.  ``up`` again on
the same data dir (after ``down``) restarts the same cluster: the config
files keep their ports, so bookies keep their ids and the data is served
again.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

STATE_FILE = "cluster.json"
ROLE_ORDER_DOWN = ("proxy", "broker", "autorecovery", "bookie", "zookeeper")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cluster", help="start, stop and inspect a local multi-process cluster")
    csub = p.add_subparsers(dest="cluster_command", metavar="{up,down,status}")
    up = csub.add_parser("up", help="start ZooKeeper, bookies, brokers (and proxy) as processes")
    up.add_argument("--brokers", type=int, default=2)
    up.add_argument("--bookies", type=int, default=2)
    up.add_argument("--zookeeper", default=None, help="use this ZooKeeper (host:port or zk:host:port)")
    up.add_argument("--data-dir", default="cluster-data")
    up.add_argument("--cluster-name", default="magnetar-cluster")
    up.add_argument(
        "--configuration-metadata-store",
        "--configuration-store",
        dest="configuration_store",
        default=None,
        help="the instance's configuration store (zk:host:port[/chroot]) shared with other clusters "
        "for geo-replication (configurationMetadataStoreUrl); default: this cluster's own store",
    )
    up.add_argument(
        "--broker-property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker.conf setting (Pulsar key name) for every broker; repeatable",
    )
    up.add_argument("--proxy", action="store_true", help="also start a magnetar proxy")
    up.add_argument("--no-autorecovery", action="store_true", help="do not start magnetar autorecovery")
    up.add_argument("--timeout", type=float, default=120.0, help="seconds each process may take to start")
    up.set_defaults(func=run_up)
    down = csub.add_parser("down", help="stop every process of the cluster (SIGTERM, then kill)")
    down.add_argument("--data-dir", default="cluster-data")
    down.add_argument("--timeout", type=float, default=20.0, help="seconds to wait after SIGTERM")
    down.set_defaults(func=run_down)
    status = csub.add_parser("status", help="processes, health, registered brokers, bundle owners")
    status.add_argument("--data-dir", default="cluster-data")
    status.add_argument("--json", action="store_true", help="print the status as JSON")
    status.set_defaults(func=run_status)
    p.set_defaults(func=lambda _a: (p.print_help(), 2)[1])


def _err(msg: str) -> None:
    print(f"magnetar cluster: {msg}", file=sys.stderr, flush=True)


def read_state(data_dir: Path) -> dict[str, Any] | None:
    try:
        return json.loads((data_dir / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None


def _write_state(data_dir: Path, state: dict[str, Any]) -> None:
    tmp = data_dir / (STATE_FILE + ".tmp")
    tmp.write_text(json.dumps(state, indent=2))
    tmp.replace(data_dir / STATE_FILE)


def _ours(entry: dict[str, Any]) -> bool:
    """The pid still runs the process we started (its command line names its config/dir)."""
    from magnetar.app.cluster_launch import pid_alive, pid_cmdline

    pid = entry.get("pid")
    return bool(pid) and pid_alive(pid) and entry["match"] in pid_cmdline(pid)


# ---------------------------------------------------------------------- up
def run_up(args: argparse.Namespace) -> int:
    from magnetar.app.cluster_launch import LaunchError, plan_cluster
    from magnetar.cli.cluster_metadata import store_url
    from magnetar.metadata.factory import parse_metadata_url

    logging.getLogger("kazoo").setLevel(logging.CRITICAL)  # its reconnect chatter
    data_dir = Path(args.data_dir).resolve()
    state = read_state(data_dir)
    if state and any(_ours(e) for e in state["processes"]):
        _err(
            f"a cluster is already running from {data_dir} (magnetar cluster down --data-dir {args.data_dir})"
        )
        return 1
    if args.brokers < 1 or args.bookies < 1:
        _err("--brokers and --bookies must be at least 1")
        return 2
    broker_properties = {}
    for item in args.broker_property:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            _err(f"--broker-property {item!r}: expected KEY=VALUE (a broker.conf key)")
            return 2
        broker_properties[key.strip()] = value.strip()
    config_url = store_url(args.configuration_store)
    if config_url is not None:
        try:
            parse_metadata_url(config_url)
        except ValueError as exc:
            _err(f"--configuration-metadata-store: {exc}")
            return 2
    data_dir.mkdir(parents=True, exist_ok=True)
    state = {"cluster": args.cluster_name, "data_dir": str(data_dir), "processes": []}
    try:
        metadata_url = _zookeeper(args, data_dir, state)
        state["metadata_url"] = metadata_url
        state["configuration_store_url"] = config_url or metadata_url
        specs = plan_cluster(
            data_dir,
            metadata_url=metadata_url,
            cluster_name=args.cluster_name,
            brokers=args.brokers,
            bookies=args.bookies,
            configuration_store_url=config_url,
            broker_properties=broker_properties,
            autorecovery=not args.no_autorecovery,
            proxy=args.proxy,
        )
        _initialize(args, specs, metadata_url, config_url or metadata_url)
        for role in ("bookie", "broker", "autorecovery", "proxy"):
            _start_role(state, data_dir, [s for s in specs if s.role == role], args.timeout)
    except (LaunchError, OSError, RuntimeError, ValueError) as exc:
        _err(f"start failed: {exc}")
        _write_state(data_dir, state)
        _stop_all(state, 10.0)
        return 1
    brokers = [e for e in state["processes"] if e["role"] == "broker"]
    state["service_url"] = "pulsar://" + ",".join(e["urls"]["serviceUrl"][9:] for e in brokers)
    state["web_service_url"] = brokers[0]["urls"]["webServiceUrl"]
    _write_state(data_dir, state)
    _print_urls(state)
    return 0


def _zookeeper(args: argparse.Namespace, data_dir: Path, state: dict[str, Any]) -> str:
    if args.zookeeper:
        url = args.zookeeper if args.zookeeper.startswith("zk:") else f"zk:{args.zookeeper}"
        return url
    from magnetar.app.zookeeper_server import ZooKeeperServer

    zk = ZooKeeperServer(str(data_dir / "zookeeper"), detach=True)
    zk.start()
    state["processes"].append(
        {
            "name": "zookeeper",
            "role": "zookeeper",
            "pid": zk.pid,
            "match": str(zk.workdir / "zoo.cfg"),
            "log": str(zk.workdir / "zookeeper.log"),
            "urls": {"zookeeper": zk.hosts},
        }
    )
    _write_state(data_dir, state)
    return zk.url


def _initialize(args: argparse.Namespace, specs: list[Any], metadata_url: str, config_url: str) -> None:
    """initialize-cluster-metadata: the cluster registered (in the configuration store) with
    every broker's URLs, the ledger layout formatted in its own store."""
    import asyncio

    from magnetar.app.cluster_launch import cluster_service_urls
    from magnetar.cli.cluster_metadata import initialize

    web, binary = cluster_service_urls(specs)
    ns = argparse.Namespace(
        cluster=args.cluster_name,
        web_service_url=web,
        broker_service_url=binary,
        web_service_url_tls=None,
        broker_service_url_tls=None,
        default_namespace_bundle_number=4,
        timeout=30.0,
    )
    asyncio.run(initialize(ns, metadata_url, config_url))


def _start_role(state: dict[str, Any], data_dir: Path, specs: list[Any], timeout_s: float) -> None:
    from magnetar.app.cluster_launch import log_size, spawn, wait_ready

    started = []
    for spec in specs:
        mark = log_size(spec.log_path)
        proc = spawn(spec, detach=True)
        entry = {
            "name": spec.name,
            "role": spec.role,
            "pid": proc.pid,
            "match": str(spec.config_path),
            "config": str(spec.config_path),
            "log": str(spec.log_path),
            "ports": spec.ports,
            "urls": spec.urls(),
        }
        state["processes"].append(entry)
        started.append((spec, proc, mark))
    _write_state(data_dir, state)
    for spec, proc, mark in started:
        wait_ready(spec, proc, since=mark, timeout_s=timeout_s)
        print(f"  {spec.name:<14} ready (pid {proc.pid})", flush=True)


def _print_urls(state: dict[str, Any]) -> None:
    print(f"cluster {state['cluster']} is up ({state['data_dir']})")
    print(f"  metadata store:    {state['metadata_url']}")
    if state.get("configuration_store_url", state["metadata_url"]) != state["metadata_url"]:
        print(f"  configuration store: {state['configuration_store_url']}")
    print(f"  service URL:       {state['service_url']}")
    print(f"  web service URL:   {state['web_service_url']}")
    for e in state["processes"]:
        if e["role"] == "proxy":
            print(f"  proxy service URL: {e['urls']['serviceUrl']}   (admin: {e['urls']['webServiceUrl']})")
    print(f"stop it with: magnetar cluster down --data-dir {state['data_dir']}", flush=True)


# ---------------------------------------------------------------------- down
def run_down(args: argparse.Namespace) -> int:
    data_dir = Path(args.data_dir).resolve()
    state = read_state(data_dir)
    if state is None:
        _err(f"no cluster state in {data_dir / STATE_FILE}")
        return 1
    _stop_all(state, args.timeout)
    return 0


def _stop_all(state: dict[str, Any], timeout_s: float) -> None:
    """Role by role (proxy, brokers, ...): the processes of one role are stopped together
    (SIGTERM to each at once, then each waited for), so a cluster's brokers shut down in
    parallel rather than one after the other."""
    from concurrent.futures import ThreadPoolExecutor

    from magnetar.app.cluster_launch import stop_pid

    for role in ROLE_ORDER_DOWN:
        group = list(reversed([e for e in state["processes"] if e["role"] == role]))
        running = [e for e in group if _ours(e)]
        for e in group:
            if e not in running:
                print(f"  {e['name']:<14} not running", flush=True)
        if not running:
            continue
        with ThreadPoolExecutor(max_workers=len(running)) as pool:
            results = list(pool.map(lambda e: stop_pid(e["pid"], timeout_s), running))
        for e, how in zip(running, results, strict=True):
            print(f"  {e['name']:<14} {how} (pid {e['pid']})", flush=True)


# ---------------------------------------------------------------------- status
def run_status(args: argparse.Namespace) -> int:
    data_dir = Path(args.data_dir).resolve()
    state = read_state(data_dir)
    if state is None:
        _err(f"no cluster state in {data_dir / STATE_FILE}")
        return 1
    report: dict[str, Any] = {"cluster": state.get("cluster"), "processes": []}
    for e in state["processes"]:
        running = _ours(e)
        row = {"name": e["name"], "role": e["role"], "pid": e["pid"], "running": running}
        web = e.get("urls", {}).get("webServiceUrl")
        if running and web:
            row["healthy"] = _http_ok(
                web + ("/status.html" if e["role"] == "proxy" else "/admin/v2/brokers/ready")
            )
        report["processes"].append(row)
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)  # its reconnect chatter
    zk = next((p for p in report["processes"] if p["role"] == "zookeeper"), None)
    if zk is not None and not zk["running"]:
        report["metadata"] = {"error": "the cluster's ZooKeeper is not running"}
    else:
        report["metadata"] = _metadata_or_error(state["metadata_url"])
    registered = set(report["metadata"].get("bookies", ()))
    for row, e in zip(report["processes"], state["processes"], strict=True):
        if row["running"] and e["role"] == "bookie" and "error" not in report["metadata"]:
            row["healthy"] = e["urls"].get("bookieId") in registered  # writable and registered
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print_status(report)
    return 0 if all(p["running"] for p in report["processes"]) else 3


def _metadata_or_error(url: str) -> dict[str, Any]:
    import asyncio

    try:
        return asyncio.run(read_cluster_metadata(url))
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}


def _http_ok(url: str) -> bool:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=3) as r:
            return 200 <= r.status < 300
    except urllib.error.HTTPError as exc:
        return exc.code in (401, 403)  # it answers; it just wants credentials
    except OSError:
        return False


async def read_cluster_metadata(url: str, timeout_s: float = 10.0) -> dict[str, Any]:
    """What the store says about the cluster: bookies, brokers, leader, bundle owners."""
    import asyncio

    from magnetar.metadata.factory import create_metadata_store
    from magnetar.runtime import RealClock

    store = await asyncio.wait_for(
        create_metadata_store(url, clock=RealClock(), operation_timeout_ms=int(timeout_s * 1000)),
        timeout_s + 1,
    )
    try:
        return await collect_cluster_metadata(store)
    finally:
        await store.aclose()


async def collect_cluster_metadata(store: Any) -> dict[str, Any]:
    """Bookies, registered brokers, the leader and the bundle owners, read from an open store."""
    out: dict[str, Any] = {
        "bookies": await store.children("/ledgers/available"),
        "readonly_bookies": await store.children("/ledgers/available/readonly"),
    }
    out["bookies"] = [b for b in out["bookies"] if b != "readonly"]
    brokers = {}
    for b in await store.children("/loadbalance/brokers"):
        got = await store.get(f"/loadbalance/brokers/{b}")
        brokers[b] = _json_or_text(got.value if got else b"")
    out["brokers"] = brokers
    leader = await store.get("/loadbalance/leader")
    out["leader"] = _json_or_text(leader.value) if leader else None
    out["bundles"] = await _bundle_owners(store)
    return out


async def _bundle_owners(store: Any) -> dict[str, Any]:
    """``/namespace/{tenant}/{ns}/{bundle}`` -> owner (depth-first, bounded)."""
    owners: dict[str, Any] = {}
    stack = ["/namespace"]
    while stack and len(owners) < 10_000:
        path = stack.pop()
        kids = await store.children(path)
        if not kids and path != "/namespace":
            got = await store.get(path)
            if got is not None and got.value:  # an empty tenant/namespace node is no bundle
                owners[path.removeprefix("/namespace/")] = _json_or_text(got.value)
        stack.extend(f"{path}/{k}" for k in reversed(kids))
    return owners


def _json_or_text(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")


def _owner_of(value: Any) -> str:
    if isinstance(value, dict):
        return str(value.get("nativeUrl") or value.get("serviceUrl") or value.get("httpUrl") or value)
    return str(value)


def _print_status(report: dict[str, Any]) -> None:
    print(f"cluster {report['cluster']}")
    for p in report["processes"]:
        health = "" if "healthy" not in p else ("  healthy" if p["healthy"] else "  NOT answering HTTP")
        print(f"  {p['name']:<14} pid {p['pid']:<8} {'running' if p['running'] else 'STOPPED'}{health}")
    md = report["metadata"]
    if "error" in md:
        print(f"metadata store unreachable: {md['error']}")
        return
    print(f"bookies available: {', '.join(md['bookies']) or '(none)'}")
    if md["readonly_bookies"]:
        print(f"bookies read-only: {', '.join(md['readonly_bookies'])}")
    print(f"brokers registered under /loadbalance/brokers: {', '.join(md['brokers']) or '(none yet)'}")
    if md["leader"] is not None:
        print(f"leader: {_owner_of(md['leader'])}")
    if md["bundles"]:
        print("bundle owners:")
        for bundle, owner in sorted(md["bundles"].items()):
            print(f"  {bundle:<48} {_owner_of(owner)}")
    else:
        print("bundle owners: (no ownership nodes under /namespace)")
