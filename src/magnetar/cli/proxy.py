"""``magnetar proxy``: Pulsar's proxy as its own process (see :mod:`magnetar.proxy`).

Configuration is a ``proxy.conf``-style ``key=value`` file (``--config``,
Pulsar's key names: ``metadataStoreUrl``, ``brokerServiceURL``,
``brokerWebServiceURL``, ``servicePort``, ``webServicePort``,
``authenticationEnabled``, ...) with the flags on top.  Prints
``magnetar proxy ready: pulsar://host:port http://host:port`` once both ports
listen; SIGTERM or SIGINT stop it cleanly.  A bad configuration exits with
status 2 and names the key; a failed start (port taken, store unreachable)
exits with 1.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

EXIT_OK, EXIT_START_FAILED, EXIT_BAD_CONFIG = 0, 1, 2


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("proxy", help="run Pulsar's proxy (one URL in front of a cluster's brokers)")
    p.add_argument("--config", help="proxy.conf-style key=value file (Pulsar key names)")
    p.add_argument("--metadata-store-url", dest="metadataStoreUrl", help="metadataStoreUrl, e.g. zk:h:2181")
    p.add_argument("--broker-service-url", dest="brokerServiceURL", help="brokerServiceURL (static brokers)")
    p.add_argument("--broker-web-service-url", dest="brokerWebServiceURL", help="brokerWebServiceURL")
    p.add_argument("--service-port", dest="servicePort", help="servicePort (default 6650; 0 = any)")
    p.add_argument("--web-service-port", dest="webServicePort", help="webServicePort (default 8080; 0 = any)")
    p.add_argument("--bind-address", dest="bindAddress", help="bindAddress (default 0.0.0.0)")
    p.add_argument("--advertised-address", dest="advertisedAddress", help="advertisedAddress")
    p.add_argument("--cluster-name", dest="clusterName", help="clusterName")
    p.add_argument("--log-level", default="WARNING")
    p.set_defaults(func=run)


_FLAG_KEYS = ("metadataStoreUrl", "brokerServiceURL", "brokerWebServiceURL", "servicePort", "webServicePort",
              "bindAddress", "advertisedAddress", "clusterName")  # fmt: skip


def load_properties(args: argparse.Namespace) -> dict[str, str]:
    import os

    from magnetar.app.config import parse_properties

    props: dict[str, str] = {}
    path = args.config or os.environ.get("PULSAR_PROXY_CONF")
    if path:
        with open(path, encoding="utf-8") as f:
            props = parse_properties(f.read())
    for key in _FLAG_KEYS:
        value = getattr(args, key, None)
        if value is not None:
            props[key] = str(value)
    return props


def run(args: argparse.Namespace) -> int:
    from magnetar.app.config_keys import PROXY_KEYS
    from magnetar.broker.auth import AuthConfigError
    from magnetar.proxy.config import ProxyConfigError
    from magnetar.proxy.server import ProxyServer

    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.WARNING), stream=sys.stderr
    )
    logging.getLogger("kazoo").setLevel(logging.ERROR)
    try:
        props = load_properties(args)
    except OSError as exc:
        print(f"magnetar proxy: cannot read {args.config}: {exc.strerror}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    unknown = sorted(set(props) - PROXY_KEYS)
    if unknown:
        logging.getLogger("magnetar.proxy").warning(
            "%d proxy configuration keys are not used by Magnetar: %s", len(unknown), ", ".join(unknown)
        )
    try:
        proxy = ProxyServer(props)
    except (ProxyConfigError, AuthConfigError, ValueError) as exc:
        print(f"magnetar proxy: bad configuration: {exc}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    from magnetar.cli.standalone import run_event_loop

    return run_event_loop(_serve(proxy))


async def _serve(proxy) -> int:  # type: ignore[no-untyped-def]
    from magnetar.broker.auth import AuthConfigError

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, proxy.request_stop)
    try:
        await proxy.start()
    except AuthConfigError as exc:
        print(f"magnetar proxy: bad configuration: {exc}", file=sys.stderr, flush=True)
        return EXIT_BAD_CONFIG
    except Exception as exc:
        print(f"magnetar proxy: failed to start: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return EXIT_START_FAILED
    print(proxy.ready_line, flush=True)
    await proxy.run_until_stopped()
    return EXIT_OK
