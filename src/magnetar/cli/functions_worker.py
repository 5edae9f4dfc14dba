"""``magnetar functions-worker``: run one function worker of a cluster (Pulsar's ``pulsar functions-worker``).

Theory of operation: reads ``--config functions_worker.yml`` (Pulsar's keys, see
``magnetar.app.functions_cluster``); the flags override single keys.  Runs until
SIGTERM/SIGINT, then stops its instances and leaves the cluster.  Prints
``magnetar functions-worker ready: <workerId> <url>`` once it serves.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("functions-worker", help="run a function worker of a cluster")
    p.add_argument("-c", "--config", help="functions_worker.yml")
    p.add_argument("--worker-id", dest="workerId")
    p.add_argument("--worker-hostname", dest="workerHostname")
    p.add_argument("--worker-port", dest="workerPort", type=int)
    p.add_argument("--pulsar-service-url", dest="pulsarServiceUrl")
    p.add_argument("--pulsar-web-service-url", dest="pulsarWebServiceUrl")
    p.add_argument("--metadata-store-url", dest="configurationMetadataStoreUrl")
    p.add_argument("--download-directory", dest="downloadDirectory")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import logging

    from magnetar.app.functions_cluster import (
        FunctionsWorkerProcess,
        WorkerConfigError,
        load_worker_config,
        read_worker_yaml,
    )

    keys = ("workerId", "workerHostname", "workerPort", "pulsarServiceUrl", "pulsarWebServiceUrl",
            "configurationMetadataStoreUrl", "downloadDirectory")  # fmt: skip
    try:
        doc = read_worker_yaml(args.config) if args.config else {}
        config = load_worker_config(doc, {k: getattr(args, k) for k in keys})
    except WorkerConfigError as exc:
        print(f"magnetar functions-worker: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    async def main() -> int:
        proc = FunctionsWorkerProcess(config)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, proc.request_stop)
        try:
            await proc.start()
            print(proc.ready_line, flush=True)
            await proc.run_until_stopped()
        finally:
            await proc.close()
        return 0

    try:
        return asyncio.run(main())
    except Exception as exc:
        print(f"magnetar functions-worker: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
