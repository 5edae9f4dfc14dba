"""``magnetar standalone``: broker + bookie + local metadata in one process.

Until the broker lands this command says honestly what exists and exits.
"""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("standalone", help="run broker, bookie and metadata store in one process")
    p.add_argument("--config", help="Pulsar-style key=value configuration file")
    p.add_argument("--data-dir", default="data")
    p.add_argument("--broker-port", type=int, default=6650)
    p.add_argument("--web-port", type=int, default=8080)
    p.add_argument("--advertised-address", default=None)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print(
        "magnetar standalone: the broker is not built yet in this version; "
        "what exists is the protocol codec and the storage layers (see README 'Status')."
    )
    return 0
