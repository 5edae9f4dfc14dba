"""ClientCnx write coalescing: the frames of one loop turn leave in one socket write, in order."""

from __future__ import annotations

import asyncio

from magnetar.client.auth import Authentication
from magnetar.client.connection import COALESCE_MAX_BYTES, ClientCnx, ConnectionConfig
from magnetar.protocol import client_commands, server_commands


async def test_frames_of_one_turn_go_out_in_one_write_in_order():
    received = bytearray()
    got_data = asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(4096)  # CONNECT
        writer.write(server_commands.connected("test", 20, 5 * 1024 * 1024))
        while data := await reader.read(1 << 20):
            received.extend(data)
            got_data.set()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    url = f"pulsar://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    cnx = ClientCnx(url, url, ConnectionConfig(Authentication()))
    await cnx.open()
    writes: list[bytes] = []
    real_write = cnx._transport.write

    def recording_write(data: bytes) -> None:
        writes.append(bytes(data))
        real_write(data)

    cnx._transport.write = recording_write
    try:
        frames = [client_commands.flow(i, 100 + i) for i in range(5)]
        for f in frames:
            cnx.write(f)
        assert writes == [] and cnx.write_buffer_size >= sum(map(len, frames))  # held until the turn ends
        await asyncio.sleep(0)
        assert writes == [b"".join(frames)]
        # past COALESCE_MAX_BYTES the frames leave at once (bulk data is not held back)
        writes.clear()
        big = client_commands.send(1, 1, b"\x00" * COALESCE_MAX_BYTES)
        cnx.write(frames[0])
        cnx.write(big)
        assert writes == [frames[0] + big]
        # a graceful close still sends what was written just before it
        writes.clear()
        cnx.write(frames[1])
        await cnx.close()
        assert writes == [frames[1]]
        deadline = asyncio.get_running_loop().time() + 20
        expected = b"".join(frames) + frames[0] + big + frames[1]
        while bytes(received) != expected and asyncio.get_running_loop().time() < deadline:
            got_data.clear()
            try:
                await asyncio.wait_for(got_data.wait(), 1)
            except TimeoutError:
                pass
        assert bytes(received) == expected
    finally:
        await cnx.close()
        server.close()
        await server.wait_closed()
