"""The ``magnetar`` command.

Theory of operation: one argparse tree whose subcommands (standalone, broker,
bookie, autorecovery, proxy, cluster, initialize-cluster-metadata, admin, client,
perf, tokens) live in their own modules and are
imported only when chosen, so ``magnetar --help`` stays fast and a missing
optional piece never breaks the others (nor do libraries' unused extras
slow them: ``NEVER_IMPORTED``).  Each subcommand module exposes
``add_parser(subparsers)`` and the parser's ``func`` runs it.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# Modules no subcommand uses that a library imports anyway when they happen to be installed:
# httpx its own command-line client (click, rich, pygments: ~0.25 s of every `magnetar admin`),
# httpcore the trio runtime (~0.2 s when an HTTP client is made; Magnetar runs on asyncio).
# A None entry in sys.modules makes such an import fail, and both libraries go on without it.
# Only for a process that *is* the command (argv from sys.argv), not for an in-process caller.
NEVER_IMPORTED = ("httpx._main", "trio")

# subcommand name -> module implementing add_parser(subparsers)
SUBCOMMANDS = {
    "standalone": "magnetar.cli.standalone",
    "broker": "magnetar.cli.broker",
    "bookie": "magnetar.cli.bookie",
    "autorecovery": "magnetar.cli.autorecovery",
    "admin": "magnetar.cli.admin",
    "client": "magnetar.cli.client",
    "perf": "magnetar.cli.perf",
    "tokens": "magnetar.cli.tokens",
    "functions": "magnetar.cli.functions",
    "initialize-cluster-metadata": "magnetar.cli.cluster_metadata",
    "cluster": "magnetar.cli.cluster",
    "proxy": "magnetar.cli.proxy",
    "functions-worker": "magnetar.cli.functions_worker",
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole tree, or (``only``) just that subcommand: its module alone is imported
    (``magnetar standalone`` does not pay for the admin client's imports)."""
    parser = argparse.ArgumentParser(prog="magnetar", description="Magnetar: Apache Pulsar in Python")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in SUBCOMMANDS.items():
        if only is not None and name != only:
            continue
        try:
            importlib.import_module(module).add_parser(sub)
        except ImportError as exc:  # a piece not built yet: say so, don't break the others
            p = sub.add_parser(name, help=f"(unavailable: {exc})")
            p.set_defaults(func=lambda _a, _e=exc: _unavailable(_e))
    return parser


def _unavailable(exc: BaseException) -> int:
    print(f"magnetar: this command is unavailable: {exc}", file=sys.stderr)
    return 2


def _chosen(argv: list[str]) -> str | None:
    """The subcommand named on the command line (the first word not an option), if any."""
    first = next((a for a in argv if not a.startswith("-")), None)
    return first if first in SUBCOMMANDS else None


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
        for name in NEVER_IMPORTED:
            sys.modules.setdefault(name, None)  # type: ignore[arg-type]
    parser = build_parser(_chosen(argv))
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    return int(args.func(args) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
