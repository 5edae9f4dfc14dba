"""Shared pieces of ``magnetar admin``: the command context, output, argument helpers.

Theory of operation: every leaf command is a function ``run(ctx, args) ->
int | None`` stored as the parser's ``admin_func``.  :class:`Ctx` carries the
connected :class:`PulsarAdmin`, the output format and the streams, so commands
never touch globals and tests can read what was printed.  Output follows
``pulsar-admin`` by default (``text``): a list prints one element per line,
a string as is, anything else as 2-space-indented JSON; ``--output json``
always prints JSON and ``--output table`` prints lists of objects as aligned
columns and objects as ``key  value`` rows (nested keys joined with dots).
Argument helpers parse Pulsar's comma lists, ``k=v`` maps, sizes and times,
raising :class:`CliUsageError` with a message the dispatcher prints with the
usage line.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from magnetar.admin_client import PulsarAdmin
from magnetar.admin_client.units import parse_size, parse_time_s
from magnetar.common.errors import InvalidArgument

OUTPUT_FORMATS = ("text", "json", "table")
TABLE_ROWS_MAX = 100_000  # a table is for people; bigger answers should use --output json


class CliUsageError(InvalidArgument):
    """Bad command-line arguments (exit code 1 with the usage text, like pulsar-admin)."""


@dataclass
class Ctx:
    admin: PulsarAdmin
    output: str = "text"
    out: TextIO = field(default_factory=lambda: sys.stdout)
    err: TextIO = field(default_factory=lambda: sys.stderr)

    def print(self, text: str = "") -> None:
        print(text, file=self.out)

    def emit(self, value: Any) -> None:
        """Print a getter's answer in the chosen format (nothing for None)."""
        if value is None:
            return
        if self.output == "json":
            self.print(json.dumps(value, indent=2, default=str))
        elif self.output == "table":
            self.print(render_table(value))
        else:
            self.print(render_text(value))


def render_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple) and all(isinstance(v, str | int | float) for v in value):
        return "\n".join(str(v) for v in value)
    return json.dumps(value, indent=2, default=str)


def _flatten(value: Any, prefix: str = "") -> list[tuple[str, str]]:
    if isinstance(value, Mapping):
        rows: list[tuple[str, str]] = []
        if not value and prefix:
            return [(prefix, "{}")]
        for k, v in value.items():
            rows.extend(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return rows
    if isinstance(value, list) and any(isinstance(v, Mapping | list) for v in value):
        rows = []
        for i, v in enumerate(value):
            rows.extend(_flatten(v, f"{prefix}[{i}]"))
        return rows or [(prefix, "[]")]
    if isinstance(value, list):
        return [(prefix, ",".join(str(v) for v in value) if value else "[]")]
    return [(prefix, json.dumps(value) if value is None or isinstance(value, bool) else str(value))]


def _columns(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)


def render_table(value: Any) -> str:
    if isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
        keys: list[str] = []
        for item in value[:TABLE_ROWS_MAX]:
            for k in item:
                if k not in keys:
                    keys.append(str(k))
        rows = [[k.upper() for k in keys]]
        rows += [
            [
                render_text(item.get(k, "")) if isinstance(item.get(k), str) else json.dumps(item.get(k))
                for k in keys
            ]
            for item in value[:TABLE_ROWS_MAX]
        ]
        return _columns(rows)
    if isinstance(value, list):
        return "\n".join(str(v) for v in value[:TABLE_ROWS_MAX])
    if isinstance(value, Mapping):
        flat = _flatten(value)[:TABLE_ROWS_MAX]
        return _columns([["KEY", "VALUE"], *[[k, v] for k, v in flat]]) if flat else ""
    return str(value)


# ------------------------------------------------------------------ argument helpers


def csv(text: str | None) -> list[str]:
    """``a,b , c`` -> ``["a", "b", "c"]``."""
    return [p.strip() for p in (text or "").split(",") if p.strip()]


def kv_map(items: Iterable[str] | str | None) -> dict[str, str]:
    """``k1=v1,k2=v2`` (or repeated ``-p k=v``) -> dict."""
    if items is None:
        return {}
    parts: list[str] = []
    for item in [items] if isinstance(items, str) else items:
        parts.extend(csv(item))
    out: dict[str, str] = {}
    for part in parts:
        key, sep, value = part.partition("=")
        if not sep or not key:
            raise CliUsageError(f"'{part}' is not key=value")
        out[key.strip()] = value.strip()
    return out


def size_arg(text: str) -> int:
    try:
        return parse_size(text)
    except InvalidArgument as e:
        raise argparse.ArgumentTypeError(e.message) from None


def time_s_arg(text: str) -> int:
    try:
        return parse_time_s(text)
    except InvalidArgument as e:
        raise argparse.ArgumentTypeError(e.message) from None


RunFn = Callable[[Ctx, argparse.Namespace], "int | None"]


def command(
    sub: argparse._SubParsersAction, name: str, help_text: str, run: RunFn, *, aliases: Iterable[str] = ()
) -> argparse.ArgumentParser:
    """A leaf command whose ``--help`` shows ``help_text`` as its description."""
    p = sub.add_parser(name, help=help_text, description=help_text, aliases=list(aliases))
    p.set_defaults(admin_func=run)
    return p


class LazyGroups(argparse._SubParsersAction):
    """Subparsers whose commands are added when their group is chosen.

    ``magnetar admin`` has hundreds of leaf commands; building them all costs
    a quarter second on every ``magnetar`` call.  Group parsers exist from the
    start (so ``--help`` lists them and choices are checked); each group's
    commands are registered the first time the group is parsed, or all at once
    by :meth:`load_all` (the help-completeness test does that).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._loaders: dict[str, Callable[[], None]] = {}

    def add_group(
        self,
        name: str,
        help_text: str,
        register: Callable[[argparse._SubParsersAction], None],
        aliases: Iterable[str] = (),
    ) -> None:
        p = self.add_parser(name, help=help_text, description=help_text, aliases=list(aliases))
        sub = p.add_subparsers(dest=f"{name}_command", metavar="COMMAND", required=True)
        done: list[bool] = []

        def load() -> None:
            if not done:
                done.append(True)
                register(sub)

        for key in (name, *aliases):
            self._loaders[key] = load

    def load_all(self) -> None:
        for load in list(self._loaders.values()):
            load()

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        load = self._loaders.get(values[0])
        if load is not None:
            load()
        super().__call__(parser, namespace, values, option_string)


def positional(p: argparse.ArgumentParser, name: str, help_text: str) -> None:
    p.add_argument(name, help=help_text)


def topic_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("topic", help="topic name: persistent://tenant/ns/topic (or a short name: my-topic)")


def ns_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("namespace", help="namespace name: tenant/namespace")
