"""ClientCnx against a silent in-test broker: keep-alive closes a dead connection; request timeouts."""

from __future__ import annotations

import asyncio

import pytest

from magnetar.client.auth import Authentication
from magnetar.client.connection import ClientCnx, ConnectionConfig
from magnetar.client.errors import Timeout
from magnetar.protocol import client_commands, server_commands
from magnetar.protocol.enums import CommandType


async def _silent_broker(answer_pings: bool):
    """Accepts one connection, answers CONNECT, then answers PINGs only if asked to."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(4096)  # CONNECT
        writer.write(server_commands.connected("silent", 20, 5 * 1024 * 1024))
        while data := await reader.read(4096):
            if answer_pings and b"\x08\x12" in data:  # a PING frame (type 18)
                writer.write(server_commands.pong())

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"pulsar://127.0.0.1:{port}"


@pytest.mark.parametrize("answer", [True, False])
async def test_keepalive(answer):
    server, url = await _silent_broker(answer)
    cnx = ClientCnx(url, url, ConnectionConfig(Authentication(), keepalive_s=0.1, operation_timeout_s=0.3))
    await cnx.open()
    assert cnx.server_version == "silent"
    await asyncio.sleep(0.6)
    assert cnx.is_closed is (not answer)  # unanswered PING: closed after the next tick
    if not answer:
        assert "keep-alive" in str(cnx.close_reason)
    else:
        with pytest.raises(Timeout):  # the broker never answers LOOKUP: the request times out
            await cnx.request(CommandType.LOOKUP, lambda rid: client_commands.lookup("t", rid))
    await cnx.close()
    server.close()
    await server.wait_closed()
