"""``magnetar standalone``: broker + bookie + local metadata in one process.

Theory of operation: parse flags, merge them over the environment (Pulsar's
Docker convention: a variable named like a key, or ``PULSAR_PREFIX_<key>``),
the ``--config`` file (or ``$PULSAR_STANDALONE_CONF``) and the standalone
defaults (``magnetar.app.config``), run a
:class:`~magnetar.app.standalone.Standalone` on one event loop (uvloop when
installed), print exactly one line ``magnetar ready: pulsar://HOST:PORT
http://HOST:PORT`` once both ports serve, and park until SIGTERM or SIGINT;
then shut down cleanly (connections closed, storage flushed and closed) and
exit 0.  A start failure prints one ``magnetar standalone: ...`` line on stderr
and exits 1.  Port 0 picks a free port; the ready line shows the real one.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

EXIT_OK = 0
EXIT_START_FAILED = 1
EXIT_BAD_CONFIG = 2


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "standalone",
        help="run broker, bookie and metadata store in one process",
        description="Run a broker, one bookie and a RocksDB metadata store in one process, "
        "like Pulsar's `bin/pulsar standalone`.",
    )
    p.add_argument("--config", help="Pulsar standalone.conf-style key=value file (Pulsar key names)")
    p.add_argument("--data-dir", default="data", help="where metadata and bookie data live (default ./data)")
    p.add_argument(
        "--broker-port", type=int, default=None, help="binary protocol port (default 6650; 0 = any)"
    )
    p.add_argument("--web-port", type=int, default=None, help="HTTP port (default 8080; 0 = any)")
    p.add_argument(
        "-a", "--advertised-address", default=None, help="host name put in lookups (default localhost)"
    )
    p.add_argument("--bind-address", default=None, help="listen address (default 0.0.0.0)")
    p.add_argument("--log-level", default="WARNING", help="Python logging level (default WARNING)")
    p.add_argument("--wipe-data", action="store_true", help="delete the data directory before starting")
    # Accepted for drop-in use of Pulsar's `bin/pulsar standalone` command lines; nothing to turn off here.
    p.add_argument(
        "-nss", "--no-stream-storage", action="store_true", help="accepted; no stream storage exists"
    )
    p.add_argument(
        "-nfw", "--no-functions-worker", action="store_true", help="do not run the functions worker"
    )
    p.set_defaults(func=run)


def cli_overrides(args: argparse.Namespace) -> dict[str, str | None]:
    """CLI flags as Pulsar keys (None = flag not given, the file or default applies)."""

    def s(v: object) -> str | None:
        return None if v is None else str(v)

    return {
        "brokerServicePort": s(args.broker_port),
        "webServicePort": s(args.web_port),
        "advertisedAddress": s(args.advertised_address),
        "bindAddress": s(getattr(args, "bind_address", None)),
        "functionsWorkerEnabled": "false" if getattr(args, "no_functions_worker", False) else None,
    }


def known_pulsar_keys() -> frozenset[str]:
    """Every key some component reads (broker, auth, schema, embedded bookie, ledger client):
    the environment layer takes a variable named like one of these."""
    from magnetar.app.config_keys import known_keys

    return known_keys()


def run(args: argparse.Namespace) -> int:
    import os

    from magnetar.app.config import ConfigError, load_standalone_config

    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.WARNING),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        config = load_standalone_config(
            args.config or os.environ.get("PULSAR_STANDALONE_CONF") or None,
            data_dir=args.data_dir,
            overrides=cli_overrides(args),
            env=os.environ,
            known_keys=known_pulsar_keys(),
        )
    except ConfigError as exc:
        print(f"magnetar standalone: {exc}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    if getattr(args, "wipe_data", False):
        import shutil

        shutil.rmtree(config.data_dir, ignore_errors=True)
    return run_event_loop(_serve(config))


def run_event_loop(main: object) -> int:
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)  # type: ignore[arg-type]
    return uvloop.run(main)  # type: ignore[arg-type]


# Young-generation threshold and the gen1/gen2 ratios for a serving process (CPython's defaults:
# 700, 10, 10).  Measured with benchmarks/e2e_bench.py: full collections during load took
# 50-130 ms each and set the p99 latency at 5,000 msg/s; freezing the start-up heap and making
# full collections rarer cut that p99 several-fold.  Reference cycles are rare on the hot path
# (reference counting frees almost everything), so rarer collections cost little memory.
SERVING_GC_THRESHOLDS = (10_000, 20, 100)


def tune_gc_for_serving() -> None:
    """Once start-up is done: move what exists now out of the collector's view, collect rarely."""
    import gc

    gc.collect()
    gc.freeze()
    gc.set_threshold(*SERVING_GC_THRESHOLDS)


# Debugging start-up cost: when set, the names of every module imported by the time the ready line
# is printed are written to this file, one per line (tests/unit/cli/test_start15_lean_standalone.py).
MODULES_AT_READY_ENV = "MAGNETAR_DEBUG_MODULES_AT_READY"


def _dump_modules_at_ready() -> None:
    import os

    path = os.environ.get(MODULES_AT_READY_ENV)
    if path:
        with open(path, "w", encoding="utf-8") as f:
            loaded = sorted(name for name, module in sys.modules.items() if module is not None)
            f.write("".join(f"{name}\n" for name in loaded))  # (None: cli.main.NEVER_IMPORTED)


async def _serve(config: object) -> int:
    from magnetar.app.standalone import Standalone

    standalone = Standalone(config)  # type: ignore[arg-type]
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, standalone.request_stop)
    try:
        await standalone.start()
    except Exception as exc:
        logging.getLogger(__name__).debug("start failed", exc_info=True)
        print(f"magnetar standalone: failed to start: {exc}", file=sys.stderr, flush=True)
        return EXIT_START_FAILED
    tune_gc_for_serving()
    _dump_modules_at_ready()
    print(standalone.ready_line, flush=True)
    await standalone.run_until_stopped()
    return EXIT_OK
