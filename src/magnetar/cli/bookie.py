"""``magnetar bookie``: run one bookie (storage server) process.

Configuration comes from a BookKeeper-style ``key=value`` file (``--config``,
BK key names such as journalDirectory, ledgerDirectories, bookiePort,
journalSyncData, diskUsageThreshold) with the flags on top: ``--data-dir``
puts the journal and ledgers under one directory, ``--port`` sets bookiePort,
``--metadata-url`` chooses the metadata store (memory:, rocksdb:/path,
zk:host:port).  Prints ``magnetar bookie ready: <bookie_id>`` once it serves;
SIGTERM or SIGINT shut it down cleanly (journal drained, final checkpoint,
registration removed).  A cookie mismatch exits with status 3 and says why.
``autoRecoveryDaemonEnabled=true`` also runs auto-recovery (auditor candidate +
replication worker, see ``magnetar autorecovery``) in this process; its keys
(``lostBookieRecoveryDelay``...) come from the same file.  ``zkTimeout`` (ms,
default 10000) is the metadata session timeout: how long a dead bookie stays
registered.  ``journalSyncData`` is true by default here (fsync before an add
is acknowledged); ``magnetar standalone``'s embedded bookie defaults to false.

``magnetar bookie decommission --bookie-id ID --metadata-url zk:...`` is BookKeeper's
``bookkeeper shell decommissionbookie``: with the bookie stopped and auto-recovery
running, its ledgers are re-replicated until no ledger names it, then its cookie is
deleted (see :mod:`magnetar.bookkeeper.decommission`).  Exit status 0 when done, 1 when
refused or timed out (the reason on stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bookie", help="run a bookie (BookKeeper storage server)")
    p.add_argument("--config", help="BookKeeper-style key=value configuration file")
    p.add_argument("--data-dir", help="journal and ledger directories under this directory")
    p.add_argument("--port", type=int, help="bookiePort (0 = any free port)")
    p.add_argument("--advertised-address", help="advertisedAddress (bookie id is address:port)")
    p.add_argument("--bookie-id", help="bookieId (default address:port)")
    p.add_argument(
        "--metadata-url", default="memory:", help="memory:, rocksdb:/path or zk:host:port[/chroot]"
    )
    p.add_argument("--journal-sync-data", choices=["true", "false"], help="journalSyncData")
    p.add_argument("--log-level", default="INFO")
    p.set_defaults(func=run)
    actions = p.add_subparsers(dest="bookie_action", metavar="ACTION")
    d = actions.add_parser(
        "decommission",
        help="re-replicate a stopped bookie's ledgers to other bookies, then remove its cookie",
    )
    d.add_argument("--bookie-id", required=True, help="the bookie to decommission (host:port)")
    d.add_argument(
        "--metadata-url", required=True, help="the bookies' metadata store, e.g. zk:host:2181/chroot"
    )
    d.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for re-replication")
    d.add_argument("--poll-interval", type=float, default=1.0, help="seconds between checks")
    d.set_defaults(func=run_decommission)


def build_config(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from magnetar.bookie.config import BookieConfig

    cfg = BookieConfig.from_file(args.config) if args.config else BookieConfig()
    if args.data_dir:
        cfg = cfg.with_overrides(
            journal_directory=f"{args.data_dir}/journal", ledger_directories=(f"{args.data_dir}/ledgers",)
        )
    sync = None if args.journal_sync_data is None else args.journal_sync_data == "true"
    return cfg.with_overrides(
        bookie_port=args.port,
        advertised_address=args.advertised_address,
        bookie_id=args.bookie_id,
        journal_sync_data=sync,
    )


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        cfg = build_config(args)
    except (OSError, ValueError) as exc:
        print(f"magnetar bookie: bad configuration: {exc}", file=sys.stderr)
        return 2
    from magnetar.bookkeeper.config import KNOWN_KEYS as CLIENT_KEYS

    # The ledger client's keys (auto-recovery, placement) are read by the auto-recovery service.
    unknown = [k for k in cfg.unknown_keys() if k not in CLIENT_KEYS]
    if unknown:
        logging.getLogger("magnetar.bookie").warning(
            "%d configuration keys are not used by the bookie: %s", len(unknown), ", ".join(unknown)
        )
    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        return runner.run(_serve(cfg, args.metadata_url))


def _loop_factory():  # type: ignore[no-untyped-def]
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


async def _serve(cfg, metadata_url: str) -> int:  # type: ignore[no-untyped-def]
    from magnetar.bookie.app import Bookie
    from magnetar.bookie.registration import CookieMismatchError
    from magnetar.metadata.factory import create_metadata_store
    from magnetar.runtime import RealClock

    clock = RealClock()
    if metadata_url.startswith("memory"):
        logging.getLogger("magnetar.bookie").warning(
            "metadata store %s is private to this process: no broker will find this bookie "
            "and its cookie does not survive a restart (use rocksdb:/path or zk:host:port)",
            metadata_url,
        )
    store = await create_metadata_store(metadata_url, clock=clock, session_timeout_ms=cfg.zk_timeout_ms)
    bookie = Bookie(cfg, store, clock=clock)
    stop_autorecovery = None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        try:
            bookie_id = await bookie.start()
        except CookieMismatchError as exc:
            print(f"magnetar bookie: refusing to start: {exc}", file=sys.stderr, flush=True)
            return 3
        except OSError as exc:
            print(f"magnetar bookie: cannot start: {exc}", file=sys.stderr, flush=True)
            return 2
        if cfg.auto_recovery_daemon_enabled:
            from magnetar.cli.autorecovery import start_autorecovery

            stop_autorecovery = await start_autorecovery(store, cfg.extra, bookie_id, clock)
        print(f"magnetar bookie ready: {bookie_id}", flush=True)
        await stop.wait()
        print(f"magnetar bookie stopping: {bookie_id}", flush=True)
        return 0
    finally:
        if stop_autorecovery is not None:
            await stop_autorecovery()
        await bookie.stop()
        await store.aclose()


def run_decommission(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return asyncio.run(_decommission(args))


async def _decommission(args: argparse.Namespace) -> int:
    from magnetar.bookkeeper.decommission import DecommissionError, decommission_bookie
    from magnetar.metadata.api import MetadataError
    from magnetar.metadata.factory import create_metadata_store
    from magnetar.runtime import RealClock

    def progress(left: list[int]) -> None:
        print(f"decommission {args.bookie_id}: {len(left)} ledgers still name it", flush=True)

    try:
        store = await create_metadata_store(args.metadata_url, clock=RealClock())
    except (MetadataError, OSError, ValueError) as exc:
        print(f"magnetar bookie decommission: cannot reach {args.metadata_url}: {exc}", file=sys.stderr)
        return 1
    try:
        done = await decommission_bookie(
            store, args.bookie_id, timeout_s=args.timeout, poll_s=args.poll_interval, progress=progress
        )
    except DecommissionError as exc:
        print(f"magnetar bookie decommission: {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        await store.aclose()
    print(
        f"bookie {done.bookie_id} decommissioned: {len(done.ledgers_rereplicated)} ledgers re-replicated "
        f"in {done.seconds:.1f} s; cookie removed",
        flush=True,
    )
    return 0
