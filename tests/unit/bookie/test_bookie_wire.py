"""Wire codec: round trips, split invariance, bad frames -> typed errors; server + client over TCP."""

from __future__ import annotations

import asyncio
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from magnetar.bookie import wire
from magnetar.bookie.api import (
    BadRequestError,
    BookieErrorCode,
    BookieTimeoutError,
    BookieUnavailableError,
    LedgerFencedError,
    NoSuchLedgerError,
)
from magnetar.bookie.config import BookieConfig
from magnetar.bookie.entry_format import encode_entry
from magnetar.bookie.local_client import LocalBookieClient
from magnetar.bookie.server import BookieServer
from magnetar.bookie.storage import LedgerStorage
from magnetar.bookie.wire_client import WireBookieClient, WireBookieClientPool

EVENTS = [
    wire.AddRequest(1, 5, 7, b"key", b"entry-bytes" * 10, recovery=True),
    wire.AddRequest(2, 5, 8, b"", b""),
    wire.ReadRequest(3, 5, -1, fence=True, master_key=b"k"),
    wire.ReadRequest(4, 5, 0),
    wire.ReadLacRequest(5, 99),
    wire.WaitLacRequest(6, 99, -1, 1000),
    wire.GetInfoRequest(7),
    wire.AddResponse(1, 5, 7),
    wire.ReadResponse(3, 5, 7, b"data" * 100),
    wire.LacResponse(5, wire.Op.READ_LAC, 99, 42),
    wire.LacResponse(6, wire.Op.WAIT_LAC, 99, -1),
    wire.InfoResponse(7, "127.0.0.1:3181", 1000, 10, True),
    wire.ErrorResponse(8, wire.Op.ADD, int(BookieErrorCode.LEDGER_FENCED), "fenced"),
]


def decode_all(data: bytes, chunk: int) -> list[wire.Event]:
    dec = wire.FrameDecoder()
    out = []
    for i in range(0, len(data), chunk):
        dec.receive_data(data[i : i + chunk])
        while (ev := dec.next_event()) is not None:
            out.append(ev)
    return out


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, 100_000])
def test_round_trip_any_split(chunk):
    data = b"".join(wire.encode(e) for e in EVENTS)
    assert decode_all(data, chunk) == EVENTS


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=50), min_size=1, max_size=40))
def test_split_invariance_arbitrary_cuts(cuts):
    data = b"".join(wire.encode(e) for e in EVENTS)
    dec = wire.FrameDecoder()
    out, pos, i = [], 0, 0
    while pos < len(data):
        n = cuts[i % len(cuts)]
        dec.receive_data(data[pos : pos + n])
        pos += n
        i += 1
        while (ev := dec.next_event()) is not None:
            out.append(ev)
    assert out == EVENTS


def test_oversized_frame_rejected_before_buffering():
    dec = wire.FrameDecoder(max_frame_bytes=1024)
    with pytest.raises(wire.FrameTooLarge) as info:
        dec.receive_data(struct.pack(">I", 10_000_000))
    assert isinstance(info.value, BadRequestError)
    assert dec.buffered_bytes == 0
    with pytest.raises(wire.WireProtocolError):  # broken for good
        dec.receive_data(wire.encode(EVENTS[0]))


def test_bad_version_and_short_frame_are_fatal():
    frame = bytearray(wire.encode(wire.GetInfoRequest(1)))
    frame[4] = 9
    dec = wire.FrameDecoder()
    dec.receive_data(bytes(frame))
    with pytest.raises(wire.WireProtocolError):
        dec.next_event()
    dec = wire.FrameDecoder()
    with pytest.raises(wire.WireProtocolError):
        dec.receive_data(struct.pack(">I", 3) + b"abc")


def test_malformed_body_is_a_typed_error_and_the_stream_continues():
    bad_body = struct.pack(">BBQ", wire.VERSION, wire.Op.READ_LAC, 77) + b"\x00\x01"  # short ledger id
    unknown_op = struct.pack(">BBQ", wire.VERSION, 60, 78)
    dec = wire.FrameDecoder()
    dec.receive_data(struct.pack(">I", len(bad_body)) + bad_body)
    dec.receive_data(struct.pack(">I", len(unknown_op)) + unknown_op)
    dec.receive_data(wire.encode(wire.GetInfoRequest(79)))
    with pytest.raises(wire.MalformedFrame) as e1:
        dec.next_event()
    assert e1.value.request_id == 77
    with pytest.raises(wire.MalformedFrame) as e2:
        dec.next_event()
    assert e2.value.request_id == 78
    assert dec.next_event() == wire.GetInfoRequest(79)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_garbage_only_raises_wire_errors(data):
    dec = wire.FrameDecoder(max_frame_bytes=4096)
    try:
        dec.receive_data(data)
        while dec.next_event() is not None:
            pass
    except wire.WireProtocolError:
        pass


# --- over TCP ------------------------------------------------------------------------------


def entry(ledger: int, eid: int) -> bytes:
    return encode_entry(ledger, eid, eid - 1, 0, f"p{ledger}-{eid}".encode() * 10)


@pytest.fixture
async def served(tmp_path):
    cfg = BookieConfig.for_data_dir(str(tmp_path), journal_max_group_wait_ms=0)
    storage = LedgerStorage(cfg, bookie_id="bk-wire")
    await storage.open()
    server = BookieServer(LocalBookieClient(storage), "127.0.0.1", 0, max_frame_bytes=64 * 1024)
    port = await server.start()
    client = WireBookieClient(f"127.0.0.1:{port}", "127.0.0.1", port, timeout_ms=5000)
    yield storage, server, client, port
    await client.aclose()
    await server.aclose()
    await storage.aclose()


async def test_pipelined_adds_reads_fencing_over_tcp(served):
    storage, server, client, port = served
    await asyncio.gather(*(client.add_entry(1, i, b"k", entry(1, i)) for i in range(200)))
    reads = await asyncio.gather(*(client.read_entry(1, i) for i in range(200)))
    assert reads == [entry(1, i) for i in range(200)]
    assert await client.read_entry(1, -1) == entry(1, 199)
    assert await client.read_lac(1) == 198
    with pytest.raises(NoSuchLedgerError):
        await client.read_entry(2, 0)
    assert await client.read_entry(1, -1, fence=True, master_key=b"k") == entry(1, 199)
    with pytest.raises(LedgerFencedError):
        await client.add_entry(1, 200, b"k", entry(1, 200))
    await client.add_entry(1, 200, b"k", entry(1, 200), recovery=True)
    info = await client.get_info()
    assert info.bookie_id == "bk-wire" and not info.read_only
    waiter = asyncio.ensure_future(client.wait_lac(3, -1, 5000))
    await asyncio.sleep(0.02)
    await client.add_entry(3, 0, b"k", encode_entry(3, 0, -1, 0, b"a"))
    await client.add_entry(3, 1, b"k", encode_entry(3, 1, 0, 0, b"b"))
    assert await asyncio.wait_for(waiter, 3) >= 0


async def test_server_survives_garbage_and_oversized_frames(served):
    storage, server, client, port = served
    r, w = await asyncio.open_connection("127.0.0.1", port)
    bad_body = struct.pack(">BBQ", wire.VERSION, wire.Op.READ_LAC, 77) + b"\x00"
    w.write(struct.pack(">I", len(bad_body)) + bad_body)
    dec = wire.FrameDecoder()
    dec.receive_data(await asyncio.wait_for(r.read(1024), 2))
    resp = dec.next_event()
    assert isinstance(resp, wire.ErrorResponse) and resp.request_id == 77
    assert resp.code == BookieErrorCode.BAD_REQUEST
    w.write(struct.pack(">I", 10_000_000))  # oversized: the server hangs up
    assert await asyncio.wait_for(r.read(1024), 2) == b""
    w.close()
    await client.add_entry(9, 0, b"k", entry(9, 0))  # other connections unaffected


async def test_unavailable_timeout_and_reconnect(tmp_path, served):
    storage, server, client, port = served
    dead = WireBookieClient("127.0.0.1:1", "127.0.0.1", 1, timeout_ms=500, connect_timeout_ms=500)
    with pytest.raises(BookieUnavailableError):
        await dead.read_lac(1)
    await dead.aclose()
    # a server that accepts but never answers -> timeout
    silent = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    sport = silent.sockets[0].getsockname()[1]
    slow = WireBookieClient("silent", "127.0.0.1", sport, timeout_ms=200)
    with pytest.raises(BookieTimeoutError):
        await slow.read_lac(1)
    await slow.aclose()
    silent.close()
    # reconnect after the server drops connections
    await client.add_entry(4, 0, b"k", entry(4, 0))
    client._conn.writer.close()  # simulate a dropped connection
    await asyncio.sleep(0.05)
    assert await client.read_entry(4, 0) == entry(4, 0)
    pool = WireBookieClientPool(timeout_ms=2000)
    c = pool.get(f"127.0.0.1:{port}")
    assert pool.get(f"127.0.0.1:{port}") is c
    assert await c.read_entry(4, 0) == entry(4, 0)
    await pool.aclose()


async def test_random_garbage_never_takes_the_server_down(served):
    from magnetar.runtime import Rng

    storage, server, client, port = served
    rng = Rng(99)
    valid = wire.encode(wire.AddRequest(1, 70, 0, b"k", entry(70, 0)))
    for i in range(30):
        r, w = await asyncio.open_connection("127.0.0.1", port)
        if i % 3 == 0:
            junk = rng.randbytes(rng.randint(1, 300))
        elif i % 3 == 1:  # a valid frame with a few bytes flipped
            junk = bytearray(valid)
            for _ in range(3):
                junk[rng.randint(0, len(junk) - 1)] ^= 0xFF
            junk = bytes(junk)
        else:  # a valid length prefix, garbage body
            body = rng.randbytes(rng.randint(10, 100))
            junk = struct.pack(">I", len(body)) + body
        w.write(junk)
        await w.drain()
        try:
            await asyncio.wait_for(r.read(4096), 0.2)
        except TimeoutError:
            pass
        w.close()
    await client.add_entry(71, 0, b"k", entry(71, 0))
    assert await client.read_entry(71, 0) == entry(71, 0)
