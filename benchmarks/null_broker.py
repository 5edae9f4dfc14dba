"""A "null" Pulsar broker: the protocol codec and nothing else, for measuring the client's ceiling.

Theory of operation: ``benchmarks/e2e_bench.py`` runs the official client
against the real standalone and against this broker; the ratio shows how much
of what the client (and Python on this machine) can do the real broker
reaches.  So this broker does the least a broker can while staying correct
enough for the client:

* handshake, PING/PONG, lookup (always "connect here"), partitioned metadata
  (always 0: non-partitioned);
* PRODUCER -> PRODUCER_SUCCESS; SEND -> SEND_RECEIPT at once (no storage, no
  fsync); the entry is also appended to an in-memory per-topic log, bounded by
  ``LOG_ENTRIES_MAX`` (oldest dropped), so consumers have something to read;
* SUBSCRIBE (start at the log's end, or at its start for Earliest) ->
  SUCCESS; FLOW permits (counted per message, as Pulsar does) drive
  dispatch of MESSAGE frames carrying the producer's bytes unchanged;
  ACK and everything else a client sends is answered if it needs an answer
  and otherwise ignored.  Nothing survives a restart -- by design.

Run it alone: ``python benchmarks/null_broker.py --port 6651`` prints
``null broker ready: pulsar://127.0.0.1:PORT``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import sys
from dataclasses import dataclass, field

from magnetar.protocol import server_commands as sc
from magnetar.protocol.connection import (
    CommandReceived,
    ConnectionClosed,
    ConnectRequested,
    PingReceived,
    ServerConnection,
)
from magnetar.protocol.enums import CommandType, LookupType, ServerError
from magnetar.protocol.errors import RemoteProtocolError

LOG_ENTRIES_MAX = 200_000
READ_BYTES = 256 * 1024
LEDGER_ID = 1


@dataclass
class _Entry:
    entry_id: int
    num_messages: int
    data: bytes


@dataclass
class _Consumer:
    conn: _Conn
    consumer_id: int
    next_entry_id: int
    permits: int = 0


@dataclass
class _Topic:
    name: str
    log: collections.deque[_Entry] = field(default_factory=lambda: collections.deque(maxlen=LOG_ENTRIES_MAX))
    next_entry_id: int = 0
    consumers: list[_Consumer] = field(default_factory=list)

    def append(self, num_messages: int, data: bytes) -> int:
        entry_id = self.next_entry_id
        self.next_entry_id += 1
        self.log.append(_Entry(entry_id, num_messages, data))
        for c in self.consumers:
            c.conn.dispatch(self, c)
        return entry_id

    def entry(self, entry_id: int) -> _Entry | None:
        if not self.log:
            return None
        first = self.log[0].entry_id
        if entry_id < first or entry_id >= self.next_entry_id:
            return None
        return self.log[entry_id - first]


class NullBroker:
    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host, self.port = host, port
        self.topics: dict[str, _Topic] = {}
        self.server: asyncio.Server | None = None
        self._producer_seq = 0

    def topic(self, name: str) -> _Topic:
        t = self.topics.get(name)
        if t is None:
            t = self.topics[name] = _Topic(name)
        return t

    def producer_name(self) -> str:
        self._producer_seq += 1
        return f"null-{self._producer_seq}"

    @property
    def url(self) -> str:
        return f"pulsar://{self.host}:{self.port}"

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._accept, self.host, self.port)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _Conn(self, reader, writer).run()

    async def aclose(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


class _Conn:
    def __init__(
        self, broker: NullBroker, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.broker = broker
        self.reader, self.writer = reader, writer
        self.proto = ServerConnection()
        self.producers: dict[int, _Topic] = {}
        self.consumers: dict[int, tuple[_Topic, _Consumer]] = {}

    def write(self, data: bytes) -> None:
        self.writer.write(data)

    async def run(self) -> None:
        try:
            while True:
                data = await self.reader.read(READ_BYTES)
                self.proto.receive_data(data)
                while (event := self.proto.next_event()) is not None:
                    if isinstance(event, ConnectRequested):
                        self.write(self.proto.accept_connect())
                    elif isinstance(event, PingReceived):
                        self.write(event.reply)
                    elif isinstance(event, CommandReceived):
                        self.handle(event.frame)
                    elif isinstance(event, ConnectionClosed):
                        return
                if not data:
                    return
                await self.writer.drain()
        except (RemoteProtocolError, ConnectionError):
            return
        finally:
            for topic, consumer in self.consumers.values():
                if consumer in topic.consumers:
                    topic.consumers.remove(consumer)
            self.writer.close()

    def handle(self, frame) -> None:  # noqa: C901 -- one flat dispatch table is the point
        t, cmd = frame.type, frame.command
        if t is CommandType.SEND:
            topic = self.producers[cmd.producer_id]
            entry_id = topic.append(cmd.num_messages or 1, frame.headers_and_payload)
            self.write(sc.send_receipt(cmd.producer_id, cmd.sequence_id, LEDGER_ID, entry_id))
        elif t is CommandType.FLOW:
            topic, consumer = self.consumers[cmd.consumer_id]
            consumer.permits += cmd.messagePermits
            self.dispatch(topic, consumer)
        elif t is CommandType.ACK:
            if cmd.HasField("request_id"):
                self.write(sc.ack_response(cmd.consumer_id, cmd.request_id))
        elif t is CommandType.PARTITIONED_METADATA:
            self.write(sc.partitioned_metadata_response(cmd.request_id, 0))
        elif t is CommandType.LOOKUP:
            self.write(
                sc.lookup_response(cmd.request_id, LookupType.Connect, self.broker.url, authoritative=True)
            )
        elif t is CommandType.PRODUCER:
            self.producers[cmd.producer_id] = self.broker.topic(cmd.topic)
            name = cmd.producer_name if cmd.HasField("producer_name") else self.broker.producer_name()
            self.write(sc.producer_success(cmd.request_id, name))
        elif t is CommandType.SUBSCRIBE:
            topic = self.broker.topic(cmd.topic)
            earliest = cmd.HasField("initialPosition") and cmd.initialPosition == 1
            start = topic.log[0].entry_id if earliest and topic.log else topic.next_entry_id
            consumer = _Consumer(self, cmd.consumer_id, start)
            self.consumers[cmd.consumer_id] = (topic, consumer)
            topic.consumers.append(consumer)
            self.write(sc.success(cmd.request_id))
        elif t is CommandType.CLOSE_PRODUCER:
            self.producers.pop(cmd.producer_id, None)
            self.write(sc.success(cmd.request_id))
        elif t is CommandType.CLOSE_CONSUMER:
            found = self.consumers.pop(cmd.consumer_id, None)
            if found and found[1] in found[0].consumers:
                found[0].consumers.remove(found[1])
            self.write(sc.success(cmd.request_id))
        elif t in (CommandType.UNSUBSCRIBE, CommandType.SEEK):
            self.write(sc.success(cmd.request_id))
        elif t is CommandType.GET_LAST_MESSAGE_ID:
            from magnetar.protocol.message_id import MessageId

            topic, _ = self.consumers[cmd.consumer_id]
            self.write(
                sc.get_last_message_id_response(cmd.request_id, MessageId(LEDGER_ID, topic.next_entry_id - 1))
            )
        elif hasattr(cmd, "request_id"):
            self.write(sc.error(cmd.request_id, ServerError.NotAllowedError, f"null broker: no {t.name}"))

    def dispatch(self, topic: _Topic, consumer: _Consumer) -> None:
        while consumer.permits > 0 and consumer.next_entry_id < topic.next_entry_id:
            entry = topic.entry(consumer.next_entry_id)
            consumer.next_entry_id += 1
            if entry is None:
                continue  # dropped from the bounded log
            consumer.permits -= entry.num_messages
            self.write(sc.message(consumer.consumer_id, LEDGER_ID, entry.entry_id, -1, entry.data))


async def _main(host: str, port: int) -> None:
    broker = NullBroker(host, port)
    await broker.start()
    print(f"null broker ready: {broker.url}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await broker.aclose()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    args = p.parse_args(argv)
    try:
        import uvloop

        uvloop.run(_main(args.host, args.port))
    except ImportError:
        asyncio.run(_main(args.host, args.port))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
