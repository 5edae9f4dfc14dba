"""The proxy's lookup and tunnel paths against scripted brokers (in process, real sockets).

Broker A answers every LOOKUP with a Redirect to broker B (authoritative); B
answers Connect.  Through the proxy the client gets one answer: Connect to B
with ``proxy_through_service_url=true``; B saw the authoritative flag.  Then a
CONNECT naming B in ``proxy_to_broker_url`` (B is not in the proxy's
configured list: the proxy learned it from the lookup) is tunnelled: B's
CONNECTED comes back and a PING goes through the pipe to B and its PONG back.
"""

from __future__ import annotations

import asyncio

from magnetar.protocol import client_commands, commands
from magnetar.protocol.connection import (
    ClientConnection,
    CommandReceived,
    Connected,
    ConnectRequested,
    PongReceived,
    ResponseReceived,
)
from magnetar.protocol.enums import CommandType, LookupType
from magnetar.proxy.server import ProxyServer
from magnetar.testing.mini_broker import MiniBroker


class ScriptedBroker(MiniBroker):
    def __init__(self, redirect_to: str | None = None) -> None:
        super().__init__()
        self.redirect_to = redirect_to
        self.lookups: list[tuple[str, bool]] = []
        self.connects: list[ConnectRequested] = []
        self.pings = 0

    async def _answer(self, conn, event):  # type: ignore[no-untyped-def]
        if isinstance(event, ConnectRequested):
            self.connects.append(event)
        if isinstance(event, CommandReceived) and event.frame.type is CommandType.LOOKUP:
            cmd = event.frame.command
            self.lookups.append((cmd.topic, cmd.authoritative))
            if self.redirect_to:
                return conn.send(
                    commands.lookup_response(
                        cmd.request_id, LookupType.Redirect, self.redirect_to, authoritative=True
                    )
                )
        if type(event).__name__ == "PingReceived":
            self.pings += 1
        return await super()._answer(conn, event)


class RawClient:
    def __init__(self) -> None:
        self.conn = ClientConnection()
        self.events: asyncio.Queue = asyncio.Queue()

    async def open(self, port: int, **connect_fields) -> None:  # type: ignore[no-untyped-def]
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", port)
        self.writer.write(self.conn.connect(**connect_fields))
        self.task = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        while data := await self.reader.read(65536):
            self.conn.receive_data(data)
            while (ev := self.conn.next_event()) is not None:
                await self.events.put(ev)

    async def next(self, kind):  # type: ignore[no-untyped-def]
        while True:
            ev = await asyncio.wait_for(self.events.get(), 10)
            if isinstance(ev, kind):
                return ev

    async def close(self) -> None:
        self.writer.close()
        self.task.cancel()


async def test_lookup_follows_redirect_and_tunnel_reaches_owner():
    b = ScriptedBroker()
    await b.start()
    a = ScriptedBroker(redirect_to=b.url)
    await a.start()
    proxy = ProxyServer(
        {"brokerServiceURL": a.url, "servicePort": "0", "webServicePort": "0", "bindAddress": "127.0.0.1"}
    )
    await proxy.start()
    try:
        c = RawClient()
        await c.open(proxy.service_port)
        await c.next(Connected)
        rid = c.conn.new_request_id()
        c.writer.write(
            c.conn.send_request(CommandType.LOOKUP, rid, client_commands.lookup("persistent://t/n/x", rid))
        )
        answer = (await c.next(ResponseReceived)).frame.command
        assert answer.response == LookupType.Connect
        assert answer.brokerServiceUrl == b.url and answer.proxy_through_service_url and answer.authoritative
        assert a.lookups == [("persistent://t/n/x", False)] and b.lookups == [("persistent://t/n/x", True)]
        await c.close()

        t = RawClient()
        await t.open(proxy.service_port, proxy_to_broker_url=b.url[len("pulsar://") :])
        await t.next(Connected)
        assert b.connects[-1].proxy_to_broker_url is None  # the proxy's own CONNECT to B
        t.writer.write(commands.ping())
        await t.next(PongReceived)
        assert b.pings == 1  # the PING went through the pipe to B, not answered by the proxy
        await t.close()
        assert a.errors == [] and b.errors == []
    finally:
        await proxy.aclose()
        await a.stop()
        await b.stop()
