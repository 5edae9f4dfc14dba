"""A protocol handler: a line protocol on its own port over the broker's topics.

    PUB <topic> <text>\n      -> OK <ledger>:<entry>\n   (or ERR <reason>\n)
    SUB <topic> <subscription>\n -> MSG <text>\n for every message (acknowledged when sent)

It reaches the broker through the same in-process seam as the WebSocket API
(``BrokerLink``), so topics, policies and subscriptions behave as for any client.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import time

from magnetar.broker.plugins import ProtocolHandler
from magnetar.web.websocket import codec
from magnetar.web.websocket.broker_link import BrokerLink


class _Session:
    def __init__(self, service, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.link = BrokerLink(service, self, "line-protocol")
        self.producers: dict[str, tuple[int, str]] = {}
        self.seq = itertools.count()
        self.waiting: dict[int, asyncio.Future] = {}

    def on_receipt(self, sequence_id, ledger_id, entry_id, partition) -> None:
        fut = self.waiting.pop(sequence_id, None)
        if fut is not None and not fut.done():
            fut.set_result(f"OK {ledger_id}:{entry_id}")

    def on_send_failed(self, sequence_id, error) -> None:
        fut = self.waiting.pop(sequence_id, None)
        if fut is not None and not fut.done():
            fut.set_result(f"ERR {error.message}")

    def on_message(self, consumer_id, ledger_id, entry_id, partition, data, redelivery) -> None:
        for m in codec.split_entry(data, ledger_id, entry_id, partition, redelivery):
            self.writer.write(b"MSG " + base64.b64decode(m.frame["payload"]) + b"\n")
        asyncio.get_running_loop().create_task(self.link.ack(consumer_id, [(ledger_id, entry_id)]))
        self.link.flow(consumer_id, 1)

    def on_closed_by_broker(self, what) -> None:
        self.writer.close()

    async def publish(self, topic: str, text: str) -> str:
        if topic not in self.producers:
            self.producers[topic] = await self.link.create_producer(topic, None)
        pid, name = self.producers[topic]
        seq = next(self.seq)
        fut = asyncio.get_running_loop().create_future()
        self.waiting[seq] = fut
        msg = codec.OutgoingMessage(text.encode(), {}, None, None, None, None, None)
        self.link.publish(pid, seq, codec.entry_bytes(msg, name, seq, int(time.time() * 1000)))
        return await fut


class LineProtocolHandler(ProtocolHandler):
    protocol_name = "line"

    def initialize(self, properties) -> None:
        self.port = int(properties.get("exampleLinePort", "0"))
        self.server: asyncio.Server | None = None
        self.sessions: set[_Session] = set()

    async def start(self, service) -> None:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            session = _Session(service, writer)
            self.sessions.add(session)
            try:
                while line := await reader.readline():
                    verb, _, rest = line.decode().rstrip("\n").partition(" ")
                    if verb == "PUB":
                        topic, _, text = rest.partition(" ")
                        writer.write((await session.publish(topic, text) + "\n").encode())
                    elif verb == "SUB":
                        topic, _, sub = rest.partition(" ")
                        cid = await session.link.subscribe(topic, sub, 1, "line", initial_earliest=True)
                        session.link.flow(cid, 100)
                        writer.write(b"SUBSCRIBED\n")
                    else:
                        writer.write(b"ERR unknown verb\n")
                    await writer.drain()
            finally:
                self.sessions.discard(session)
                await session.link.close()
                writer.close()

        self.server = await asyncio.start_server(serve, "127.0.0.1", self.port)
        self.port = self.server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
