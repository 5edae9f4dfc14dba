"""``magnetar autorecovery``: the auditor and a replication worker as their own process.

Theory of operation: BookKeeper's auto-recovery runs either inside each bookie
(``autoRecoveryDaemonEnabled=true`` in ``magnetar bookie``) or as separate
processes (``bin/bookkeeper autorecovery``); this is the latter, and
:func:`start_autorecovery` is shared by both.  Every instance joins the
auditor election in the metadata store (one leader audits: a bookie that
stays unregistered for ``lostBookieRecoveryDelay`` seconds is lost and its
ledgers are marked under-replicated) and runs a replication worker (every
instance repairs marked ledgers, one at a time each, under a ledger lock),
reaching the bookies over TCP with a ledger client of its own.

Settings come from a BookKeeper-style file (``--config``): ``lostBookieRecoveryDelay``,
``auditorPeriodicCheckInterval``, ``openLedgerRereplicationGracePeriod``,
``rereplicationEntryBatchSize``, ``ensemblePlacementPolicy``, ``zkTimeout``
(see :meth:`~magnetar.bookkeeper.config.ClientConfig.from_properties`).
Prints ``magnetar autorecovery ready: <id>``; SIGTERM/SIGINT stop it (the
election node and ledger locks are released with the session).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import Any


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("autorecovery", help="run the auditor and a replication worker (bookie auto-recovery)")
    p.add_argument("--config", help="BookKeeper-style key=value configuration file")
    p.add_argument(
        "--metadata-url", required=True, help="the bookies' metadata store, e.g. zk:host:2181/chroot"
    )
    p.add_argument("--id", default=None, help="instance id in the auditor election (default host:pid)")
    p.add_argument("--log-level", default="INFO")
    p.set_defaults(func=run)


async def start_autorecovery(
    store: Any, props: Mapping[str, str], instance_id: str, clock: Any
) -> Callable[[], Awaitable[None]]:
    """Start auditor candidate + replication worker on ``store``; returns the function that stops them."""
    from magnetar.bookie.wire_client import WireBookieClientPool
    from magnetar.bookkeeper.autorecovery import AutoRecovery
    from magnetar.bookkeeper.client import BookKeeperClient
    from magnetar.bookkeeper.config import ClientConfig
    from magnetar.runtime import Rng

    config = ClientConfig.from_properties(props)
    pool = WireBookieClientPool()
    client = BookKeeperClient(store, pool, clock, Rng(), config)
    service = AutoRecovery(client, store, instance_id)
    await service.start()
    logging.getLogger("magnetar.autorecovery").info(
        "auto-recovery %s started (lostBookieRecoveryDelay %.0f s)",
        instance_id,
        config.lost_bookie_recovery_delay_ms / 1000,
    )

    async def stop() -> None:
        await service.aclose()
        await client.aclose()
        await pool.aclose()

    return stop


def run(args: argparse.Namespace) -> int:
    from magnetar.bookie.config import parse_properties

    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    props: dict[str, str] = {}
    if args.config:
        try:
            with open(args.config, encoding="utf-8") as f:
                props = parse_properties(f.read())
        except OSError as exc:
            print(f"magnetar autorecovery: cannot read {args.config}: {exc.strerror}", file=sys.stderr)
            return 2
    instance_id = args.id or f"{socket.gethostname()}:{os.getpid()}"
    try:
        return asyncio.run(_serve(props, args.metadata_url, instance_id))
    except ValueError as exc:
        print(f"magnetar autorecovery: bad configuration: {exc}", file=sys.stderr)
        return 2


async def _serve(props: Mapping[str, str], metadata_url: str, instance_id: str) -> int:
    from magnetar.metadata.factory import create_metadata_store
    from magnetar.runtime import RealClock

    clock = RealClock()
    timeout_ms = int(props.get("zkTimeout", "") or 10_000)
    store = await create_metadata_store(metadata_url, clock=clock, session_timeout_ms=timeout_ms)
    stop_event = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop_event.set)
    try:
        stop = await start_autorecovery(store, props, instance_id, clock)
        try:
            print(f"magnetar autorecovery ready: {instance_id}", flush=True)
            await stop_event.wait()
        finally:
            await stop()
    finally:
        await store.aclose()
    return 0
