"""``magnetar initialize-cluster-metadata``: the first step of a new cluster, as Pulsar's.

Theory of operation: before the first broker starts, Pulsar's
``bin/pulsar initialize-cluster-metadata`` writes what every broker and
bookie of the cluster expects to find in the metadata store:

* ``/admin/clusters/{cluster}`` -- ClusterData with the service URLs
  (``--web-service-url``, ``--broker-service-url`` and their ``-tls`` forms);
* tenants ``public`` and ``pulsar`` with namespaces ``public/default`` and
  ``pulsar/system`` (the same create-if-absent helper the broker runs on
  start-up, :func:`~magnetar.broker.resources.initialize_cluster`, so the
  facts have one owner);
* BookKeeper's ledger layout under ``/ledgers`` (``LAYOUT``, ``INSTANCEID``,
  ``available``, ``available/readonly``), so bookies and auto-recovery start
  against a formatted metadata service.

Everything is create-if-absent: running it twice, or after the brokers
started, changes nothing an operator edited (the cluster's URLs are refreshed
to the ones given).  ``--metadata-store`` (or Pulsar's older ``--zookeeper``)
names the local store, ``--configuration-metadata-store`` (older
``--configuration-store`` / ``--global-zookeeper``) the configuration store;
Magnetar keeps both kinds of data in the first when the second is the same
URL or absent, and writes the cluster, tenants and namespaces to the
configuration store when it differs.  A bad URL or an unreachable store is a
one-line error and exit status 2 or 1, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
CONNECT_TIMEOUT_S = 15.0

# BookKeeper's LAYOUT node: layout format version, then the ledger manager factory and its
# version.  Magnetar's ledger client keeps one flat node per ledger (bookie.api).
LEDGER_LAYOUT = b"2\nmagnetar.FlatLedgerManagerFactory:1\n"
LEDGERS_ROOT = "/ledgers"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "initialize-cluster-metadata",
        help="create a cluster's metadata (cluster, default namespaces, ledger layout)",
    )
    p.add_argument("-c", "--cluster", required=True, help="cluster name")
    p.add_argument("-md", "--metadata-store", default=None, help="metadata store URL, e.g. zk:host:2181")
    p.add_argument("-zk", "--zookeeper", default=None, help="ZooKeeper host:port (older form of -md)")
    p.add_argument(
        "-cms",
        "--configuration-metadata-store",
        "--configuration-store",
        "--global-zookeeper",
        dest="configuration_metadata_store",
        default=None,
        help="configuration metadata store URL (default: the metadata store)",
    )
    p.add_argument("-uw", "--web-service-url", required=True, help="e.g. http://broker:8080")
    p.add_argument("-tw", "--web-service-url-tls", default=None, help="e.g. https://broker:8443")
    p.add_argument("-ub", "--broker-service-url", required=True, help="e.g. pulsar://broker:6650")
    p.add_argument("-tb", "--broker-service-url-tls", default=None, help="e.g. pulsar+ssl://broker:6651")
    p.add_argument(
        "--default-namespace-bundle-number",
        type=int,
        default=4,
        help="bundles of the namespaces created here (defaultNumberOfNamespaceBundles)",
    )
    p.add_argument("--timeout", type=float, default=CONNECT_TIMEOUT_S, help="seconds to reach the store")
    p.set_defaults(func=run)


def store_url(value: str | None) -> str | None:
    """A metadata URL from Pulsar's forms: ``zk:h:p``, ``zk://h:p``, a bare ``h:p`` (ZooKeeper),
    ``rocksdb:/path``, ``memory:``.  None stays None."""
    if value is None:
        return None
    value = value.strip()
    if value and ":" in value and value.split(":", 1)[0] not in ("zk", "rocksdb", "memory"):
        return f"zk:{value.removeprefix('zookeeper://')}"  # Pulsar's --zookeeper takes host:port
    return value


def run(args: argparse.Namespace) -> int:
    import logging

    from magnetar.metadata.factory import parse_metadata_url

    logging.getLogger("kazoo").setLevel(logging.CRITICAL)  # its retry chatter; our error says it once

    local = store_url(args.metadata_store) or store_url(args.zookeeper)
    if not local:
        print("magnetar initialize-cluster-metadata: give --metadata-store (or --zookeeper)", file=sys.stderr)
        return EXIT_USAGE
    config = store_url(args.configuration_metadata_store) or local
    for url in {local, config}:
        try:
            parse_metadata_url(url)
        except ValueError as exc:
            print(f"magnetar initialize-cluster-metadata: {exc}", file=sys.stderr)
            return EXIT_USAGE
        if url.startswith("memory"):
            print(
                f"magnetar initialize-cluster-metadata: {url} lives only in this process; "
                "use zk:host:port or rocksdb:/path",
                file=sys.stderr,
            )
            return EXIT_USAGE
    for name, value in (
        ("web-service-url", args.web_service_url),
        ("broker-service-url", args.broker_service_url),
    ):
        if "://" not in value:
            print(f"magnetar initialize-cluster-metadata: --{name} {value!r} is not a URL", file=sys.stderr)
            return EXIT_USAGE
    try:
        asyncio.run(initialize(args, local, config))
    except Exception as exc:  # one line for the operator, not a traceback
        print(f"magnetar initialize-cluster-metadata: failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(f"Cluster metadata for '{args.cluster}' setup correctly ({local})", flush=True)
    return EXIT_OK


async def _open(url: str, timeout_s: float):  # type: ignore[no-untyped-def]
    from magnetar.metadata.factory import create_metadata_store
    from magnetar.runtime import RealClock

    ms = int(timeout_s * 1000)
    try:
        return await asyncio.wait_for(
            create_metadata_store(url, clock=RealClock(), operation_timeout_ms=ms), timeout_s + 1
        )
    except TimeoutError:
        raise ConnectionError(f"metadata store {url} did not answer within {timeout_s:.0f} s") from None


async def initialize(args: argparse.Namespace, local_url: str, config_url: str) -> None:
    local = await _open(local_url, args.timeout)
    try:
        config = local if config_url == local_url else await _open(config_url, args.timeout)
        try:
            await initialize_stores(
                local,
                config,
                cluster=args.cluster,
                web_service_url=args.web_service_url,
                broker_service_url=args.broker_service_url,
                web_service_url_tls=args.web_service_url_tls,
                broker_service_url_tls=args.broker_service_url_tls,
                num_bundles=args.default_namespace_bundle_number,
            )
        finally:
            if config is not local:
                await config.aclose()
    finally:
        await local.aclose()


async def initialize_stores(
    local: object,
    config: object,
    *,
    cluster: str,
    web_service_url: str,
    broker_service_url: str,
    web_service_url_tls: str | None = None,
    broker_service_url_tls: str | None = None,
    num_bundles: int = 4,
) -> None:
    """The writes themselves, on open stores (``magnetar cluster up`` calls this too)."""
    from magnetar.broker.resources import BrokerResources, cluster_data, initialize_cluster

    resources = BrokerResources(config)  # type: ignore[arg-type]
    await initialize_cluster(resources, cluster, web_service_url, broker_service_url, num_bundles)
    if web_service_url_tls or broker_service_url_tls:
        current = await resources.clusters.get(cluster) or {}
        tls = cluster_data(web_service_url, broker_service_url, web_service_url_tls, broker_service_url_tls)
        await resources.clusters.put(cluster, {**current, **tls})
    await format_ledger_layout(local)


async def format_ledger_layout(store: object) -> None:
    from magnetar.metadata.api import AlreadyExists, BadVersion

    nodes = [
        (LEDGERS_ROOT, b""),
        (f"{LEDGERS_ROOT}/LAYOUT", LEDGER_LAYOUT),
        (f"{LEDGERS_ROOT}/INSTANCEID", str(uuid.uuid4()).encode()),
        (f"{LEDGERS_ROOT}/available", b""),
        (f"{LEDGERS_ROOT}/available/readonly", b""),
    ]
    for path, value in nodes:
        try:
            await store.put(path, value, -1)  # type: ignore[attr-defined]  # create only
        except (AlreadyExists, BadVersion):
            pass  # exists already: keep it (INSTANCEID must never change)
