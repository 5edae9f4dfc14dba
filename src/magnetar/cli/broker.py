"""``magnetar broker``: one broker of a cluster (shared metadata store, bookies over TCP).

Theory of operation: the same composition as ``magnetar standalone``
(:class:`~magnetar.app.standalone.Standalone` runs the broker service and the
HTTP server in one loop, prints the ready line, stops cleanly on SIGTERM/SIGINT)
but with a cluster storage stack instead of the embedded one: the metadata
store named by ``--metadata-url`` / ``metadataStoreUrl`` (``zk:host:2181``,
``rocksdb:/path`` for a single node) and bookies reached over the wire, found
through their registrations in that store.  Start bookies with ``magnetar
bookie`` against the same store first.  Several brokers sharing one store is
supported: each broker registers under ``/loadbalance/brokers``, namespaces
are split into bundles, a bundle has one owner at a time (an ephemeral lock),
lookups on any broker redirect to the owner, and a dead broker's bundles are
taken by the others after its session expires (``broker.ownership``).

Defaults are Pulsar's broker.conf, not standalone.conf: entries are written
to two bookies and acknowledged by both
(``managedLedgerDefaultEnsembleSize/WriteQuorum/AckQuorum`` = 2/2/2), ensembles
are placed rack-aware (``bookkeeperClientRackawarePolicyEnabled``, default
true; ``bookkeeperClientRegionawarePolicyEnabled=true`` chooses region-aware),
and ``clusterName`` has no default: a broker without one refuses to start.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from magnetar.cli.standalone import (
    EXIT_BAD_CONFIG,
    EXIT_OK,
    EXIT_START_FAILED,
    cli_overrides,
    run_event_loop,
    tune_gc_for_serving,
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("broker", help="run one broker of a cluster (metadata store + remote bookies)")
    p.add_argument("--config", help="broker.conf-style key=value file (Pulsar key names)")
    p.add_argument(
        "--metadata-url", default=None, help="metadata store, e.g. zk:localhost:2181 (metadataStoreUrl)"
    )
    p.add_argument("--data-dir", default="data", help="local scratch directory (default ./data)")
    p.add_argument(
        "--broker-port", type=int, default=None, help="binary protocol port (default 6650; 0 = any)"
    )
    p.add_argument("--web-port", type=int, default=None, help="HTTP port (default 8080; 0 = any)")
    p.add_argument("-a", "--advertised-address", default=None, help="host name put in lookups")
    p.add_argument("--bind-address", default=None, help="listen address (default 0.0.0.0)")
    p.add_argument("--cluster-name", default=None, help="clusterName (required: flag, file or environment)")
    p.add_argument("--log-level", default="WARNING")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import os

    from magnetar.app.config import BROKER_DEFAULTS, ConfigError, load_standalone_config
    from magnetar.cli.standalone import known_pulsar_keys

    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.WARNING),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    overrides = {
        **cli_overrides(args),
        "metadataStoreUrl": args.metadata_url,
        "clusterName": getattr(args, "cluster_name", None),
    }
    try:
        config = load_standalone_config(
            args.config or os.environ.get("PULSAR_BROKER_CONF") or None,
            data_dir=args.data_dir,
            overrides=overrides,
            env=os.environ,
            known_keys=known_pulsar_keys(),
            defaults=BROKER_DEFAULTS,
        )
    except ConfigError as exc:
        print(f"magnetar broker: {exc}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    if not config.properties.get("clusterName"):
        print(
            "magnetar broker: clusterName is required: the cluster this broker serves "
            "(give --cluster-name, clusterName= in the config file, or the clusterName variable)",
            file=sys.stderr,
        )
        return EXIT_BAD_CONFIG
    url = config.properties.get("metadataStoreUrl", "")
    if not url:
        print("magnetar broker: no metadata store: give --metadata-url or metadataStoreUrl", file=sys.stderr)
        return EXIT_BAD_CONFIG
    return run_event_loop(_serve(config, url))


async def _serve(config: object, metadata_url: str) -> int:
    from magnetar.app.standalone import Standalone
    from magnetar.app.storage import open_cluster_storage
    from magnetar.runtime import RealClock, Rng

    clock, rng = RealClock(), Rng()
    try:
        storage = await open_cluster_storage(metadata_url, config, clock=clock, rng=rng)  # type: ignore[arg-type]
    except Exception as exc:
        print(f"magnetar broker: cannot open storage: {exc}", file=sys.stderr, flush=True)
        return EXIT_START_FAILED
    from magnetar.broker.config import ConfigError
    from magnetar.broker.loadbalance.api import LoadManagerError, load_manager_kind
    from magnetar.broker.loadbalance.config import LoadBalancerConfig
    from magnetar.broker.loadbalance.manager import make_load_manager
    from magnetar.broker.ownership.cluster import ClusterNamespaceService

    def namespace_service(svc: object) -> ClusterNamespaceService:
        """Bundle ownership with the load manager ``loadManagerClassName`` names (broker.loadbalance)."""
        ns = ClusterNamespaceService(svc)  # type: ignore[arg-type]
        ns.load_manager = make_load_manager(svc, ns)
        return ns

    try:  # a bad loadBalancer* value or load manager name stops the start with its reason
        lb = LoadBalancerConfig.from_properties(config.properties)  # type: ignore[attr-defined]
        load_manager_kind(lb.load_manager_class_name, lb.enabled)
    except (LoadManagerError, ConfigError) as exc:
        print(f"magnetar broker: {exc}", file=sys.stderr, flush=True)
        return EXIT_BAD_CONFIG
    broker = Standalone(
        config,  # type: ignore[arg-type]
        clock=clock,
        rng=rng,
        storage=storage,
        owns_storage=True,
        namespace_service=namespace_service,
    )
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, broker.request_stop)
    try:
        await broker.start()
    except Exception as exc:
        print(f"magnetar broker: failed to start: {exc}", file=sys.stderr, flush=True)
        return EXIT_START_FAILED
    _apply_session_expired_policy(config, storage.metadata_store, broker)
    tune_gc_for_serving()
    print(broker.ready_line, flush=True)
    await broker.run_until_stopped()
    return EXIT_OK


def _apply_session_expired_policy(config: object, store: object, broker: object) -> None:
    """Pulsar's ``zookeeperSessionExpiredPolicy``: ``reconnect`` (the default) keeps the process:
    the store opens a new session, the broker registers again and takes bundles on lookup;
    ``shutdown`` stops the broker when its session is lost."""
    from magnetar.metadata.api import SessionEvent

    policy = str(config.properties.get("zookeeperSessionExpiredPolicy") or "reconnect").lower()  # type: ignore[attr-defined]
    if policy != "shutdown":
        return

    def on_event(event: SessionEvent) -> None:
        if event is SessionEvent.SESSION_LOST:
            print(
                "magnetar broker: metadata session lost; shutting down (policy)", file=sys.stderr, flush=True
            )
            broker.request_stop()  # type: ignore[attr-defined]

    store.add_session_listener(on_event)  # type: ignore[attr-defined]
