"""``magnetar client produce|consume|read``: Pulsar's ``pulsar-client`` tool.

Theory of operation: a thin command line over Magnetar's own asyncio client
(``magnetar.client``), so it works after a plain ``pip install`` of Magnetar,
against Magnetar or Apache Pulsar.  Each command runs in one ``asyncio.run``.  Flags
follow ``pulsar-client``: produce ``-m`` (split on ``-s``), ``-f`` files,
``-n`` repeat, ``-r`` rate, ``-k`` key, ``-p`` properties, ``-db``/``-c``;
consume ``-s`` subscription, ``-t`` type, ``-p`` initial position, ``-n``
count (0 = forever), ``--hex``, ``--hide-content``, ``-mp``; read ``-m``
start id.  Each message prints as ``pulsar-client`` prints it::

    ----- got message -----
    key:[k], properties:[a=1], content:hello

The service URL comes from ``--url``, else ``brokerServiceUrl`` of the
client.conf given by ``--config`` / ``PULSAR_CLIENT_CONF``, else
``pulsar://localhost:6650``; auth from ``--auth-plugin``/``--auth-params`` (or
the conf), mapped to the client's token / basic / TLS providers.  Every
receive waits at most ``RECEIVE_POLL_MS``; the loop ends after ``-n``
messages, after ``--timeout`` seconds without enough messages, or on Ctrl-C.
The produce / consume / read coroutines take the client object, so tests can
drive them with a fake.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any, TextIO

DEFAULT_SERVICE_URL = "pulsar://localhost:6650"
MESSAGES_MAX = 1000  # pulsar-client's bound on (messages + files) x repeat
FILE_BYTES_MAX = 5 * 1024 * 1024  # one message per file; the broker's default max message size
RECEIVE_POLL_MS = 500


class ClientCliError(Exception):
    """Bad arguments or an unusable environment; printed without a traceback."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "client",
        help="produce and consume messages from the command line (like pulsar-client)",
        description="Produce, consume and read messages with Magnetar's asyncio client, "
        "with pulsar-client's flags.",
    )
    p.add_argument(
        "--url", help=f"service URL (default: brokerServiceUrl of --config, or {DEFAULT_SERVICE_URL})"
    )
    p.add_argument("--config", dest="client_conf", help="client.conf file (default $PULSAR_CLIENT_CONF)")
    p.add_argument(
        "--auth-plugin", help="auth plugin class, e.g. org.apache.pulsar.client.impl.auth.AuthenticationToken"
    )
    p.add_argument("--auth-params", help="auth params, e.g. token:<jwt> or file:///path/to/token")
    p.add_argument("--listener-name", help="advertised listener to connect to")
    p.add_argument("--tls-trust-cert-path", help="CA certificate file to trust")
    p.add_argument("--tls-allow-insecure", action="store_true", help="accept an untrusted server certificate")
    p.add_argument(
        "--log-level",
        default="Warn",
        choices=("Debug", "Info", "Warn", "Error"),
        help="log level of the client (default Warn)",
    )
    csub = p.add_subparsers(dest="client_command", metavar="produce|consume|read", required=True)

    prod = csub.add_parser(
        "produce", help="send messages to a topic", description="Send messages to a topic."
    )
    prod.add_argument("topic", help="topic name (persistent://tenant/ns/topic or a short name)")
    prod.add_argument(
        "-m",
        "--messages",
        action="append",
        default=[],
        help="message text; split on --separator (repeatable)",
    )
    prod.add_argument(
        "-f", "--files", action="append", default=[], help="comma-separated files, each sent as one message"
    )
    prod.add_argument(
        "-n", "--num-produce", type=int, default=1, help="send everything this many times (default 1)"
    )
    prod.add_argument(
        "-r", "--rate", type=float, default=0.0, help="messages per second (0 = as fast as possible)"
    )
    prod.add_argument("-db", "--disable-batching", action="store_true", help="disable batching")
    prod.add_argument("-c", "--chunking", action="store_true", help="enable chunking (disables batching)")
    prod.add_argument("-s", "--separator", default=",", help="separator of --messages (default ',')")
    prod.add_argument(
        "-p", "--properties", action="append", default=[], help="message properties k1=v1,k2=v2"
    )
    prod.add_argument("-k", "--key", help="message (partition) key")
    prod.add_argument(
        "-dr", "--disable-replication", action="store_true", help="do not replicate these messages"
    )
    prod.set_defaults(func=run, client_func=produce)

    cons = csub.add_parser(
        "consume", help="receive and acknowledge messages", description="Consume messages from a topic."
    )
    cons.add_argument("topic", help="topic name")
    cons.add_argument("-s", "--subscription-name", required=True, help="subscription name")
    cons.add_argument(
        "-t",
        "--subscription-type",
        default="Exclusive",
        help="Exclusive (default), Shared, Failover or Key_Shared (case-insensitive)",
    )
    cons.add_argument("-p", "--subscription-position", default="Latest", help="Latest (default) or Earliest")
    _receive_flags(cons)
    cons.add_argument("-rs", "--replicated", action="store_true", help="replicated subscription")
    cons.set_defaults(func=run, client_func=consume)

    read = csub.add_parser(
        "read",
        help="read messages with a reader (no subscription)",
        description="Read messages from a topic with a non-durable reader.",
    )
    read.add_argument("topic", help="topic name")
    read.add_argument(
        "-m", "--start-message-id", default="latest", help="latest (default), earliest or ledgerId:entryId"
    )
    read.add_argument(
        "-i", "--start-message-id-inclusive", action="store_true", help="include the start message"
    )
    _receive_flags(read)
    read.set_defaults(func=run, client_func=read_messages)


def _receive_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-n", "--num-messages", type=int, default=1, help="messages to receive (default 1; 0 = forever)"
    )
    p.add_argument("--hex", action="store_true", help="print payloads as a hex dump")
    p.add_argument("--hide-content", action="store_true", help="do not print messages, only counts")
    p.add_argument("-r", "--rate", type=float, default=0.0, help="max messages per second (0 = unlimited)")
    p.add_argument(
        "-q", "--queue-size", type=int, default=0, help="receiver queue size (0 = client default 1000)"
    )
    p.add_argument("-mp", "--print-metadata", action="store_true", help="also print message id and times")
    p.add_argument(
        "--timeout",
        type=float,
        default=0.0,
        help="give up after this many seconds without enough messages (0 = wait forever)",
    )


# ------------------------------------------------------------------ running


def _conf(path: str | None) -> dict[str, str]:
    path = path or os.environ.get("PULSAR_CLIENT_CONF")
    if not path:
        return {}
    from magnetar.app.config import parse_properties

    try:
        return parse_properties(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise ClientCliError(f"cannot read config {path}: {e.strerror or e}") from None


def _authentication(plugin: str | None, params: str | None) -> Any:
    from magnetar.admin_client.auth import BasicAuth, TlsAuth, TokenAuth, auth_from_plugin
    from magnetar.client import AuthenticationBasic, AuthenticationTLS, AuthenticationToken

    provider = auth_from_plugin(plugin, params)
    if provider is None:
        return None
    if isinstance(provider, TokenAuth):
        return AuthenticationToken(provider.token)
    if isinstance(provider, BasicAuth):
        return AuthenticationBasic(provider.user_id, provider.password)
    if isinstance(provider, TlsAuth):
        return AuthenticationTLS(provider.cert_file, provider.key_file)
    raise ClientCliError(f"unsupported auth plugin {plugin}")


def make_client(args: argparse.Namespace) -> Any:
    from magnetar.client import Client

    conf = _conf(args.client_conf)
    url = args.url or conf.get("brokerServiceUrl") or DEFAULT_SERVICE_URL
    logging.getLogger("magnetar.client").setLevel(
        getattr(logging, args.log_level.upper().replace("WARN", "WARNING"))
    )
    kwargs: dict[str, Any] = {
        "authentication": _authentication(
            args.auth_plugin or conf.get("authPlugin"), args.auth_params or conf.get("authParams")
        ),
        "tls_allow_insecure_connection": args.tls_allow_insecure,
    }
    trust = args.tls_trust_cert_path or conf.get("tlsTrustCertsFilePath")
    if trust:
        kwargs["tls_trust_certs_file_path"] = trust
    if args.listener_name:
        kwargs["listener_name"] = args.listener_name
    return Client(url.rstrip("/"), **kwargs)


def run(args: argparse.Namespace) -> int:
    from magnetar.common.errors import InvalidArgument

    try:
        client = make_client(args)
    except (ClientCliError, InvalidArgument) as e:
        print(f"magnetar client: {e}", file=sys.stderr)
        return 1
    try:
        return asyncio.run(_run(client, args))
    except KeyboardInterrupt:
        return 130


async def _run(client: Any, args: argparse.Namespace) -> int:
    try:
        return await args.client_func(client, args, sys.stdout)
    except ClientCliError as e:
        print(f"magnetar client: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # the client's errors (timeouts, broker errors): one line, non-zero exit
        print(f"magnetar client: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    finally:
        await client.close()


# ------------------------------------------------------------------ produce


def _payloads(args: argparse.Namespace) -> list[bytes]:
    payloads: list[bytes] = []
    for text in args.messages:
        payloads.extend(part.encode() for part in (text.split(args.separator) if args.separator else [text]))
    for spec in args.files:
        for name in [f.strip() for f in spec.split(",") if f.strip()]:
            path = Path(name)
            try:
                if path.stat().st_size > FILE_BYTES_MAX:
                    raise ClientCliError(f"{path} is larger than {FILE_BYTES_MAX} bytes")
                payloads.append(path.read_bytes())
            except OSError as e:
                raise ClientCliError(f"cannot read {path}: {e.strerror or e}") from None
    if not payloads:
        raise ClientCliError("give at least one message (-m) or file (-f)")
    if args.num_produce < 1 or len(payloads) * args.num_produce > MESSAGES_MAX:
        raise ClientCliError(f"(messages + files) x --num-produce must be between 1 and {MESSAGES_MAX}")
    return payloads


def _properties(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        for part in [p for p in item.split(",") if p.strip()]:
            key, sep, value = part.partition("=")
            if not sep or not key.strip():
                raise ClientCliError(f"property '{part}' is not key=value")
            out[key.strip()] = value.strip()
    return out


class _Pacer:
    """Sleeps so that calls to :meth:`wait` happen at most ``rate`` times a second (0 = no limit)."""

    def __init__(self, rate: float) -> None:
        self.interval_s = 1.0 / rate if rate > 0 else 0.0
        self.next_s = time.monotonic()

    async def wait(self) -> None:
        if not self.interval_s:
            return
        now = time.monotonic()
        if self.next_s > now:
            await asyncio.sleep(self.next_s - now)
        self.next_s = max(self.next_s, now) + self.interval_s


async def produce(client: Any, args: argparse.Namespace, out: TextIO) -> int:
    payloads = _payloads(args)
    properties = _properties(args.properties)
    producer = await client.create_producer(
        args.topic,
        batching_enabled=not (args.disable_batching or args.chunking),
        chunking_enabled=args.chunking,
    )
    futures: list[Any] = []
    pacer = _Pacer(args.rate)
    try:
        for _ in range(args.num_produce):
            for payload in payloads:
                await pacer.wait()
                kwargs: dict[str, Any] = {"properties": properties or None}
                if args.key is not None:
                    kwargs["partition_key"] = args.key
                if args.disable_replication:
                    kwargs["disable_replication"] = True
                futures.append(await producer.send_async(payload, **kwargs))
        results = await asyncio.gather(*futures, return_exceptions=True)
    finally:
        await producer.close()
    failed = [r for r in results if isinstance(r, BaseException)]
    if failed:
        print(f"magnetar client: {type(failed[0]).__name__}: {failed[0]}", file=sys.stderr)
    ok = len(results) - len(failed)
    print(f"{ok} messages successfully produced", file=out)
    return 0 if ok == len(payloads) * args.num_produce else 1


# ------------------------------------------------------------------ consume / read

_TYPES = {"exclusive": "Exclusive", "shared": "Shared", "failover": "Failover", "key_shared": "KeyShared"}


async def consume(client: Any, args: argparse.Namespace, out: TextIO) -> int:
    type_name = _TYPES.get(args.subscription_type.lower())
    if type_name is None:
        raise ClientCliError(f"unknown subscription type '{args.subscription_type}'")
    position = args.subscription_position.lower()
    if position not in ("latest", "earliest"):
        raise ClientCliError(
            f"subscription position must be Latest or Earliest, not '{args.subscription_position}'"
        )
    kwargs: dict[str, Any] = {
        "consumer_type": type_name,
        "initial_position": "Earliest" if position == "earliest" else "Latest",
        "replicate_subscription_state_enabled": args.replicated,
    }
    if args.queue_size > 0:
        kwargs["receiver_queue_size"] = args.queue_size
    consumer = await client.subscribe(args.topic, args.subscription_name, **kwargs)
    try:
        n = await _receive_loop(consumer, args, out, ack=True)
    finally:
        await consumer.close()
    print(f"{n} messages successfully consumed", file=out)
    return 0 if args.num_messages == 0 or n >= args.num_messages else 1


async def read_messages(client: Any, args: argparse.Namespace, out: TextIO) -> int:
    from magnetar.client import EARLIEST, LATEST, MessageId

    start = args.start_message_id
    if start == "latest":
        mid = LATEST
    elif start == "earliest":
        mid = EARLIEST
    else:
        from magnetar.admin_client.models import MessageId as AdminMessageId

        parsed = AdminMessageId.parse(start)
        mid = MessageId(parsed.ledger_id, parsed.entry_id, parsed.partition_index, parsed.batch_index)
    kwargs: dict[str, Any] = {"start_message_id_inclusive": args.start_message_id_inclusive}
    if args.queue_size > 0:
        kwargs["receiver_queue_size"] = args.queue_size
    reader = await client.create_reader(args.topic, mid, **kwargs)
    try:
        n = await _receive_loop(reader, args, out, ack=False)
    finally:
        await reader.close()
    print(f"{n} messages successfully read", file=out)
    return 0 if args.num_messages == 0 or n >= args.num_messages else 1


async def _receive_loop(source: Any, args: argparse.Namespace, out: TextIO, *, ack: bool) -> int:
    from magnetar.client import Timeout

    received = 0
    pacer = _Pacer(args.rate)
    idle_since = time.monotonic()
    while args.num_messages == 0 or received < args.num_messages:
        if args.timeout and time.monotonic() - idle_since > args.timeout:
            break
        await pacer.wait()
        try:
            msg = await (source.read_next(RECEIVE_POLL_MS) if not ack else source.receive(RECEIVE_POLL_MS))
        except Timeout:
            continue
        idle_since = time.monotonic()
        received += 1
        if args.hide_content:
            if received % 1000 == 0:
                print(f"Received {received} messages", file=out)
        else:
            print(format_message(msg, hex_dump=args.hex, metadata=args.print_metadata), file=out)
        if ack:
            await source.acknowledge(msg)
    return received


def format_message(msg: Any, *, hex_dump: bool = False, metadata: bool = False) -> str:
    data: bytes = msg.data()
    key = msg.partition_key() or None
    props = msg.properties() or {}
    parts = [f"key:[{key if key is not None else 'null'}]"]
    if props:
        parts.append("properties:[" + ", ".join(f"{k}={v}" for k, v in props.items()) + "]")
    if metadata:
        parts.append(f"messageId:[{msg.message_id()}]")
        parts.append(f"publishTime:[{msg.publish_timestamp()}]")
        parts.append(f"eventTime:[{msg.event_timestamp()}]")
    content = data.hex(" ") if hex_dump else data.decode("utf-8", errors="replace")
    return "----- got message -----\n" + ", ".join(parts) + f", content:{content}"
