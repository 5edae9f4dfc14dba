"""Golden frames: the official pulsar-client talks to a minimal server built on ServerConnection.

The server (an asyncio TCP listener on 127.0.0.1, port 0) completes CONNECT/CONNECTED, sends
one PING of its own (the client must PONG), answers PING, PARTITIONED_METADATA (0 partitions),
LOOKUP (Connect to itself), PRODUCER (PRODUCER_SUCCESS, or an ERROR of the test's choosing) and
SEND (SEND_RECEIPT with made-up ids). Every byte the client sends is recorded; afterwards an
independent FrameDecoder decodes the recording, verifies every CRC32-C and recovers the
messages (decompressing, splitting batches, joining chunks), which must equal what was sent.

The client is synchronous and threaded: it runs in a worker thread (or, for chunking, in a
subprocess because it keeps max_message_size in a process-wide static), so it never blocks
the server's event loop.
"""

from __future__ import annotations

import asyncio
import logging
import random
import sys
import textwrap
from dataclasses import dataclass, field

import pytest

from magnetar.protocol import commands
from magnetar.protocol.batch import decode_batch
from magnetar.protocol.chunks import ChunkAssembler, is_chunk
from magnetar.protocol.compression import decompress
from magnetar.protocol.connection import (
    CommandReceived,
    ConnectionClosed,
    ConnectRequested,
    PingReceived,
    PongReceived,
    ServerConnection,
)
from magnetar.protocol.enums import CommandType, CompressionType, LookupType, ServerError
from magnetar.protocol.frames import FrameDecoder, frame_limit_for
from magnetar.protocol.payload import parse_headers_and_payload, properties

pulsar = pytest.importorskip("pulsar")

pytestmark = pytest.mark.compat

OPERATION_TIMEOUT_S = 10
CLIENT_RUN_TIMEOUT_S = 60


@dataclass
class GoldenServer:
    """A minimal broker: just enough protocol for a producer, recording every received byte."""

    max_message_size: int = 5 * 1024 * 1024
    producer_error: ServerError | None = None
    recordings: list[bytearray] = field(default_factory=list)
    port: int = 0
    pongs: int = 0
    errors: list[BaseException] = field(default_factory=list)
    _server: asyncio.Server | None = None
    _entry_id: int = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    @property
    def url(self) -> str:
        return f"pulsar://127.0.0.1:{self.port}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = ServerConnection(
            max_frame_size=frame_limit_for(self.max_message_size), max_message_size=self.max_message_size
        )
        recording = bytearray()
        self.recordings.append(recording)
        try:
            while True:
                data = await reader.read(256 * 1024)
                recording += data
                conn.receive_data(data)
                while (event := conn.next_event()) is not None:
                    if isinstance(event, ConnectionClosed):
                        return
                    out = self._answer(conn, event)
                    if out:
                        writer.write(out)
                await writer.drain()
        except Exception as exc:  # recorded, asserted by the test
            self.errors.append(exc)
        finally:
            writer.close()

    def _answer(self, conn: ServerConnection, event) -> bytes | None:
        if isinstance(event, ConnectRequested):
            # CONNECTED first, then a PING of our own: the client must answer PONG.
            return conn.accept_connect() + commands.ping()
        if isinstance(event, PingReceived):
            return event.reply
        if isinstance(event, PongReceived):
            self.pongs += 1
            return None
        assert isinstance(event, CommandReceived)
        frame = event.frame
        cmd = frame.command
        t = frame.type
        if t is CommandType.PARTITIONED_METADATA:
            return conn.send(commands.partitioned_metadata_response(cmd.request_id, 0))
        if t is CommandType.LOOKUP:
            return conn.send(
                commands.lookup_response(cmd.request_id, LookupType.Connect, self.url, authoritative=True)
            )
        if t is CommandType.PRODUCER:
            if self.producer_error is not None:
                return conn.send(
                    commands.error(cmd.request_id, self.producer_error, "chosen by the golden test")
                )
            name = cmd.producer_name if cmd.HasField("producer_name") else f"golden-{cmd.producer_id}"
            return conn.send(commands.producer_success(cmd.request_id, name))
        if t is CommandType.SEND:
            self._entry_id += 1
            return conn.send(commands.send_receipt(cmd.producer_id, cmd.sequence_id, 7, self._entry_id))
        if t in (CommandType.CLOSE_PRODUCER, CommandType.CLOSE_CONSUMER):
            return conn.send(commands.success(cmd.request_id))
        return None


@dataclass
class Recovered:
    frames: list = field(default_factory=list)
    messages: list[tuple[bytes, dict[str, str], str | None]] = field(default_factory=list)
    sends: int = 0
    pongs: int = 0


def decode_recordings(recordings: list[bytearray], max_frame_size: int) -> Recovered:
    """Decode recorded client bytes independently of the live server; verify every checksum."""
    out = Recovered()
    assembler = ChunkAssembler(max_total_size=64 << 20)
    for recording in recordings:
        decoder = FrameDecoder(max_frame_size)
        decoder.feed(bytes(recording))
        while (frame := decoder.next_frame()) is not None:
            out.frames.append(frame)
            if frame.type is CommandType.PONG:
                out.pongs += 1
            if frame.type is not CommandType.SEND:
                continue
            out.sends += 1
            parsed = parse_headers_and_payload(frame.headers_and_payload)
            assert parsed.has_checksum, "protocol v20 SENDs carry magic + CRC32-C"
            assert parsed.checksum_ok, "CRC32-C mismatch on a SEND from the official client"
            meta = parsed.metadata
            if is_chunk(meta):
                assert frame.command.is_chunk
                whole = assembler.add(meta, parsed.payload, now_ms=0)
                if whole is None:
                    continue
                out.messages.append((whole, properties(meta), None))
                continue
            payload = decompress(
                meta.compression, parsed.payload, meta.uncompressed_size or len(parsed.payload)
            )
            if meta.HasField("num_messages_in_batch"):
                assert frame.command.num_messages == meta.num_messages_in_batch
                for record in decode_batch(payload, meta.num_messages_in_batch):
                    out.messages.append((record.payload, record.properties, record.partition_key))
            else:
                key = meta.partition_key if meta.HasField("partition_key") else None
                out.messages.append((payload, properties(meta), key))
        assert decoder.buffered_bytes == 0, "a recording ended in the middle of a frame"
    return out


def _quiet_logger() -> logging.Logger:
    log = logging.getLogger("pulsar-golden")
    log.setLevel(logging.ERROR)
    return log


def _expected_messages(n: int) -> list[tuple[bytes, dict[str, str], str | None]]:
    # Compressible payloads so every codec really compresses.
    return [(f"golden-{i}-".encode() * (20 + i), {"i": str(i), "k": "v"}, f"key-{i % 2}") for i in range(n)]


def _produce(url: str, batching: bool, compression, messages) -> None:
    client = pulsar.Client(url, operation_timeout_seconds=OPERATION_TIMEOUT_S, logger=_quiet_logger())
    try:
        producer = client.create_producer(
            "persistent://public/default/golden",
            batching_enabled=batching,
            batching_max_messages=1000,
            batching_max_publish_delay_ms=50,
            compression_type=compression,
        )
        if batching:
            for payload, props, key in messages:
                producer.send_async(payload, None, properties=props, partition_key=key)
            producer.flush()
        else:
            for payload, props, key in messages:
                producer.send(payload, properties=props, partition_key=key)
        producer.close()
    finally:
        client.close()


COMPRESSIONS = {
    CompressionType.NONE: pulsar.CompressionType.NONE,
    CompressionType.LZ4: pulsar.CompressionType.LZ4,
    CompressionType.ZLIB: pulsar.CompressionType.ZLib,
    CompressionType.ZSTD: pulsar.CompressionType.ZSTD,
    CompressionType.SNAPPY: pulsar.CompressionType.SNAPPY,
}


@pytest.mark.parametrize("batching", [False, True], ids=["single", "batched"])
@pytest.mark.parametrize("codec", list(COMPRESSIONS), ids=[c.name for c in COMPRESSIONS])
async def test_official_client_frames_decode_exactly(batching: bool, codec: CompressionType):
    server = GoldenServer()
    await server.start()
    messages = _expected_messages(5)
    try:
        await asyncio.wait_for(
            asyncio.to_thread(_produce, server.url, batching, COMPRESSIONS[codec], messages),
            CLIENT_RUN_TIMEOUT_S,
        )
    finally:
        await server.stop()
    assert server.errors == []
    assert server.pongs >= 1, "the client did not answer the server's PING"
    rec = decode_recordings(server.recordings, frame_limit_for(server.max_message_size))
    types = [f.type for f in rec.frames]
    assert types[0] is CommandType.CONNECT
    assert rec.frames[0].command.client_version.startswith("Pulsar-CPP-v")
    assert rec.frames[0].command.protocol_version == 20
    assert CommandType.PARTITIONED_METADATA in types and CommandType.LOOKUP in types
    assert CommandType.PRODUCER in types
    assert rec.pongs >= 1
    assert rec.messages == messages
    sends = [f for f in rec.frames if f.type is CommandType.SEND]
    metas = [parse_headers_and_payload(f.headers_and_payload).metadata for f in sends]
    assert all(m.compression == codec for m in metas)
    if batching:
        assert all(m.HasField("num_messages_in_batch") for m in metas)
        assert sum(m.num_messages_in_batch for m in metas) == len(messages)
        assert len(sends) < len(messages)
    else:
        assert not any(m.HasField("num_messages_in_batch") for m in metas)
        assert [m.sequence_id for m in metas] == list(range(len(messages)))
    if codec is not CompressionType.NONE:
        assert all(m.uncompressed_size > 0 for m in metas)


CHUNK_SCRIPT = textwrap.dedent(
    """
    import random, sys
    import pulsar
    url, size = sys.argv[1], int(sys.argv[2])
    payload = random.Random(42).randbytes(size)
    # The C++ client's own logger: a Python logging logger is called from the client's threads
    # and can abort the interpreter at exit ("terminate called without an active exception").
    log = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    client = pulsar.Client(url, operation_timeout_seconds=10, logger=log)
    producer = client.create_producer(
        "persistent://public/default/golden-chunked", batching_enabled=False, chunking_enabled=True
    )
    producer.send(payload)
    producer.close()
    client.close()
    print("sent", size)
    """
)


async def test_official_client_chunked_message_reassembles():
    # Advertise a small max_message_size so a 300 KB message needs several chunks. The client keeps
    # that value in a process-wide static, hence the subprocess.
    server = GoldenServer(max_message_size=100 * 1024)
    await server.start()
    size = 300 * 1024
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            CHUNK_SCRIPT,
            server.url,
            str(size),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        stdout, stderr = await asyncio.wait_for(proc.communicate(), CLIENT_RUN_TIMEOUT_S)
    finally:
        await server.stop()
    assert proc.returncode == 0, stderr.decode(errors="replace")[-2000:]
    assert server.errors == []
    rec = decode_recordings(server.recordings, frame_limit_for(server.max_message_size))
    sends = [f for f in rec.frames if f.type is CommandType.SEND]
    assert len(sends) >= 4
    metas = [parse_headers_and_payload(f.headers_and_payload).metadata for f in sends]
    assert [m.chunk_id for m in metas] == list(range(len(sends)))
    assert len({m.sequence_id for m in metas}) == 1
    assert all(m.uuid == f"{m.producer_name}-{m.sequence_id}" for m in metas)
    assert all(m.total_chunk_msg_size == size for m in metas)
    # Chunk frames are slightly larger than max_message_size: the +10 KiB frame padding matters.
    assert max(f.size for f in sends) > server.max_message_size
    assert rec.messages == [(random.Random(42).randbytes(size), {}, None)]


PRODUCER_ERRORS = [
    (ServerError.ProducerBusy, pulsar.ProducerBusy),
    (ServerError.AuthorizationError, pulsar.AuthorizationError),
    (ServerError.TopicTerminatedError, pulsar.TopicTerminated),
    (ServerError.IncompatibleSchema, pulsar.IncompatibleSchema),
]


def _create_producer_expecting_failure(url: str):
    client = pulsar.Client(url, operation_timeout_seconds=OPERATION_TIMEOUT_S, logger=_quiet_logger())
    try:
        client.create_producer("persistent://public/default/golden-refused")
    except Exception as exc:  # the test inspects the type
        return exc
    finally:
        client.close()
    return None


@pytest.mark.parametrize("server_error,exception", PRODUCER_ERRORS, ids=[e.name for e, _ in PRODUCER_ERRORS])
async def test_producer_error_reaches_official_client(server_error, exception):
    server = GoldenServer(producer_error=server_error)
    await server.start()
    try:
        exc = await asyncio.wait_for(
            asyncio.to_thread(_create_producer_expecting_failure, server.url), CLIENT_RUN_TIMEOUT_S
        )
    finally:
        await server.stop()
    assert server.errors == []
    # The chosen error, not a timeout: the client saw a connected session and our ERROR frame.
    assert isinstance(exc, exception), f"got {type(exc).__name__}: {exc}"
    assert not isinstance(exc, pulsar.Timeout)
    rec = decode_recordings(server.recordings, frame_limit_for(server.max_message_size))
    assert sum(f.type is CommandType.PRODUCER for f in rec.frames) == 1, (
        "a non-retryable error is not retried"
    )
