"""Subscription and message commands of ``magnetar admin topics``.

Theory of operation: cursor operations (create/delete subscriptions, skip,
clear-backlog, expire, reset-cursor) and REST reads (peek, examine, by id,
message id by time, last message id).  Message ids on the command line are
``L:E`` (``earliest`` / ``latest`` where ``pulsar-admin`` accepts them);
relative times (``-t 10m``) are taken back from now.  Messages print as
``pulsar-admin`` prints them: id, publish and event time, properties, then a
hex dump (16 bytes a row, ASCII on the right), separated by a dashed line.
"""

from __future__ import annotations

import argparse
import time
from datetime import datetime
from typing import Any

from magnetar.admin_client import models
from magnetar.cli.admin.common import CliUsageError, Ctx, command, kv_map, time_s_arg, topic_arg
from magnetar.common.errors import InvalidArgument

SEPARATOR = "-" * 73
PEEK_COUNT_MAX = 10_000


def register(sub: argparse._SubParsersAction) -> None:
    p = command(
        sub,
        "subscriptions",
        "list a topic's subscriptions",
        lambda c, a: c.emit(c.admin.topics.get_subscriptions(a.topic)),
    )
    topic_arg(p)
    p = command(sub, "create-subscription", "create a durable subscription at a position", _create_sub)
    topic_arg(p)
    p.add_argument("-s", "--subscription", required=True, help="subscription name")
    p.add_argument(
        "-m",
        "--messageId",
        dest="message_id",
        default="latest",
        help="start position: latest (default), earliest, or ledgerId:entryId",
    )
    p.add_argument("-r", "--replicated", action="store_true", help="replicated subscription")
    p.add_argument("-p", "--property", action="append", help="subscription property k=v (repeatable)")
    p = command(
        sub,
        "unsubscribe",
        "delete a subscription",
        lambda c, a: c.admin.topics.delete_subscription(a.topic, a.subscription, force=a.force),
    )
    topic_arg(p)
    p.add_argument("-s", "--subscription", required=True, help="subscription name")
    p.add_argument("-f", "--force", action="store_true", help="disconnect its consumers first")
    p = command(
        sub,
        "skip",
        "skip N messages of a subscription",
        lambda c, a: c.admin.topics.skip_messages(a.topic, a.subscription, a.count),
    )
    topic_arg(p)
    p.add_argument("-s", "--subscription", required=True, help="subscription name")
    p.add_argument("-n", "--count", type=int, required=True, help="number of messages to skip")
    p = command(
        sub,
        "clear-backlog",
        "skip every message of a subscription's backlog",
        lambda c, a: c.admin.topics.clear_backlog(a.topic, a.subscription),
    )
    topic_arg(p)
    p.add_argument("-s", "--subscription", required=True, help="subscription name")
    p = command(
        sub, "expire-messages", "acknowledge messages older than a time (or up to a message id)", _expire
    )
    topic_arg(p)
    p.add_argument("-s", "--subscription", required=True, help="subscription name")
    p.add_argument(
        "-t",
        "--expireTime",
        dest="expire_time",
        type=time_s_arg,
        help="expire messages older than this (seconds or with a unit, e.g. 1h)",
    )
    p.add_argument("-m", "--messageId", dest="message_id", help="expire up to this ledgerId:entryId")
    p.add_argument(
        "-e", "--exclude-reset-position", action="store_true", help="do not expire the given message"
    )
    p = command(
        sub,
        "expire-messages-all-subscriptions",
        "expire old messages on every subscription",
        lambda c, a: c.admin.topics.expire_messages_all_subscriptions(a.topic, a.expire_time),
    )
    topic_arg(p)
    p.add_argument(
        "-t",
        "--expireTime",
        dest="expire_time",
        type=time_s_arg,
        required=True,
        help="expire messages older than this (seconds or with a unit)",
    )
    p = command(sub, "reset-cursor", "move a subscription's cursor to a time or message id", _reset)
    topic_arg(p)
    p.add_argument("-s", "--subscription", required=True, help="subscription name")
    p.add_argument("-t", "--time", type=time_s_arg, help="go back this long from now (e.g. 100m, 3h, 2d)")
    p.add_argument("-m", "--messageId", dest="message_id", help="earliest, latest or ledgerId:entryId")
    p.add_argument(
        "-e", "--exclude-reset-position", action="store_true", help="start after the given message"
    )
    _reads(sub)


def _reads(sub: argparse._SubParsersAction) -> None:
    p = command(
        sub, "peek-messages", "print messages of a subscription's backlog without consuming them", _peek
    )
    topic_arg(p)
    p.add_argument("-s", "--subscription", required=True, help="subscription name")
    p.add_argument("-n", "--count", type=int, default=1, help="number of messages (default 1)")
    p = command(
        sub,
        "examine-message",
        "print the message at a position from the earliest or latest",
        lambda c, a: _print_messages(
            c,
            c.admin.topics.examine_message(
                a.topic, initial_position=a.initial_position, message_position=a.message_position
            ),
        ),
    )
    topic_arg(p)
    p.add_argument(
        "-i",
        "--initialPosition",
        dest="initial_position",
        default="latest",
        choices=("latest", "earliest"),
        help="count from (default latest)",
    )
    p.add_argument(
        "-m",
        "--messagePosition",
        dest="message_position",
        type=int,
        default=1,
        help="position, 1-based (default 1)",
    )
    p = command(
        sub,
        "get-message-by-id",
        "print the message at ledgerId:entryId",
        lambda c, a: _print_messages(c, c.admin.topics.get_message_by_id(a.topic, a.ledger_id, a.entry_id)),
    )
    topic_arg(p)
    p.add_argument("-l", "--ledgerId", dest="ledger_id", type=int, required=True, help="ledger id")
    p.add_argument("-e", "--entryId", dest="entry_id", type=int, required=True, help="entry id")
    p = command(
        sub,
        "get-message-id",
        "print the id of the first message published at or after a time",
        _message_id_by_time,
    )
    topic_arg(p)
    p.add_argument("-d", "--datetime", required=True, help="ISO-8601 time, e.g. 2024-03-01T12:00:00+00:00")
    p = command(
        sub,
        "last-message-id",
        "print the id of the last message of a topic",
        lambda c, a: c.emit(c.admin.topics.get_last_message_id(a.topic)),
    )
    topic_arg(p)
    p = command(
        sub,
        "get-backlog-size",
        "print the bytes from a message id to the end",
        lambda c, a: c.emit(c.admin.topics.get_backlog_size(a.topic, parse_message_id(a.message_id))),
    )
    topic_arg(p)
    p.add_argument("-m", "--messageId", dest="message_id", required=True, help="ledgerId:entryId")
    p = command(
        sub,
        "analyze-backlog",
        "analyze a subscription's backlog (entries, messages, filters)",
        lambda c, a: c.emit(c.admin.topics.analyze_backlog(a.topic, a.subscription)),
    )
    topic_arg(p)
    p.add_argument("-s", "--subscription", required=True, help="subscription name")


def parse_message_id(text: str) -> models.MessageId:
    if text == "earliest":
        return models.EARLIEST
    if text == "latest":
        return models.LATEST
    try:
        return models.MessageId.parse(text)
    except InvalidArgument as e:
        raise CliUsageError(e.message) from None


def _create_sub(c: Ctx, a: argparse.Namespace) -> None:
    c.admin.topics.create_subscription(
        a.topic,
        a.subscription,
        message_id=parse_message_id(a.message_id),
        replicated=a.replicated,
        properties=kv_map(a.property),
    )


def _expire(c: Ctx, a: argparse.Namespace) -> None:
    if (a.expire_time is None) == (a.message_id is None):
        raise CliUsageError("give exactly one of --expireTime and --messageId")
    if a.expire_time is not None:
        c.admin.topics.expire_messages(a.topic, a.subscription, a.expire_time)
    else:
        c.admin.topics.expire_messages_to(
            a.topic, a.subscription, parse_message_id(a.message_id), is_excluded=a.exclude_reset_position
        )


def _reset(c: Ctx, a: argparse.Namespace) -> None:
    if (a.time is None) == (a.message_id is None):
        raise CliUsageError("give exactly one of --time and --messageId")
    if a.time is not None:
        c.admin.topics.reset_cursor(a.topic, a.subscription, int(time.time() * 1000) - a.time * 1000)
    else:
        c.admin.topics.reset_cursor_to(
            a.topic, a.subscription, parse_message_id(a.message_id), is_excluded=a.exclude_reset_position
        )


def _message_id_by_time(c: Ctx, a: argparse.Namespace) -> None:
    try:
        ts = datetime.fromisoformat(a.datetime)
    except ValueError:
        raise CliUsageError(f"'{a.datetime}' is not an ISO-8601 time") from None
    mid = c.admin.topics.get_message_id_by_timestamp(a.topic, int(ts.timestamp() * 1000))
    c.emit(mid.to_json() if c.output == "json" else str(mid))


def _peek(c: Ctx, a: argparse.Namespace) -> None:
    if not 1 <= a.count <= PEEK_COUNT_MAX:
        raise CliUsageError(f"--count must be between 1 and {PEEK_COUNT_MAX}")
    messages: list[models.PeekedMessage] = []
    for position in range(1, a.count + 1):
        messages.extend(c.admin.topics.peek_message(a.topic, a.subscription, position))
    _print_messages(c, messages)


def _ms(text: str | None) -> str:
    if not text:
        return "0"
    try:
        return str(int(datetime.fromisoformat(text).timestamp() * 1000))
    except ValueError:
        return text


def _print_messages(c: Ctx, messages: list[models.PeekedMessage]) -> None:
    if c.output == "json":
        c.emit([_message_json(m) for m in messages])
        return
    for i, m in enumerate(messages):
        if i:
            c.print(SEPARATOR)
            c.print()
        if m.batch_index is not None:
            c.print(f"Batch Message ID: {m.message_id}:{m.batch_index}")
        else:
            c.print(f"Message ID: {m.message_id}")
        c.print(f"Publish time: {_ms(m.publish_time)}")
        c.print(f"Event time: {_ms(m.event_time)}")
        if m.properties:
            c.print("Properties:")
            for k, v in m.properties.items():
                c.print(f"{k}    {v}")
        c.print(hex_dump(m.payload))


def _message_json(m: models.PeekedMessage) -> dict[str, Any]:
    return {
        "messageId": m.message_id + (f":{m.batch_index}" if m.batch_index is not None else ""),
        "publishTime": m.publish_time,
        "eventTime": m.event_time,
        "key": m.key,
        "properties": m.properties,
        "payload": m.payload.decode("utf-8", errors="replace"),
    }


def hex_dump(data: bytes) -> str:
    """Netty-style dump: offset, 16 hex bytes, their printable ASCII."""
    lines = [
        "         +-------------------------------------------------+",
        "         |  0  1  2  3  4  5  6  7  8  9  a  b  c  d  e  f |",
        "+--------+-------------------------------------------------+----------------+",
    ]
    for offset in range(0, len(data), 16):
        chunk = data[offset : offset + 16]
        hexes = " ".join(f"{b:02x}" for b in chunk).ljust(47)
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk).ljust(16)
        lines.append(f"|{offset:08x}| {hexes} |{text}|")
    lines.append("+--------+-------------------------------------------------+----------------+")
    return "\n".join(lines)
