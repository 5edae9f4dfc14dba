"""Frame codec: bytes <-> ``Frame`` objects, with a size limit enforced before buffering.

Theory of operation
-------------------
A Pulsar connection carries one frame after another, all integers big-endian::

    simple frame:   [total_size u32][cmd_size u32][BaseCommand]
    payload frame:  [total_size u32][cmd_size u32][BaseCommand][headers_and_payload]

``total_size`` counts everything after itself. SEND and MESSAGE are payload
frames: whatever follows the command up to the end of the frame is the
*headers and payload* (``0x0e01`` magic, CRC32-C, metadata size, metadata,
payload, optionally preceded by a ``0x0e02`` broker-entry-metadata block).
The decoder hands those bytes over exactly as received, because the broker
stores and replays them unchanged.

``FrameDecoder`` follows wsproto's receive buffer: bytes are appended by
``feed``; ``next_frame`` looks at the buffer through a cursor and either
*commits* (consumes) one whole frame or *rolls back* and returns ``None`` when
the frame is incomplete. The limit is checked on the 4-byte size prefix alone,
so an oversized frame is rejected before its body is buffered. The limit is
counted as Pulsar's Netty decoder counts it: ``total_size + 4`` (the prefix
included) must not exceed ``max_frame_size``. Pulsar's broker uses
``maxMessageSize + 10 KiB`` (see ``frame_limit_for``).

After a ``RemoteProtocolError`` the decoder is poisoned: the stream has lost
its framing, so every later call raises again.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import DecodeError, EncodeError

from magnetar.proto import PulsarApi_pb2 as pb
from magnetar.protocol.enums import MESSAGE_SIZE_FRAME_PADDING, PAYLOAD_COMMANDS, CommandType
from magnetar.protocol.errors import FrameTooLarge, LocalProtocolError, RemoteProtocolError

_U32 = struct.Struct(">I")
_U32_PAIR = struct.Struct(">II")

# BaseCommand field name for each command type (the sub-message has the same number).
_FIELD_BY_TYPE: dict[int, str] = {f.number: f.name for f in pb.BaseCommand.DESCRIPTOR.fields if f.number != 1}
# Command messages without required fields may arrive without their (empty) sub-message.
_NO_REQUIRED_FIELDS: frozenset[int] = frozenset(
    number
    for number, name in _FIELD_BY_TYPE.items()
    if not any(f.is_required for f in pb.BaseCommand.DESCRIPTOR.fields_by_name[name].message_type.fields)
)


def frame_limit_for(max_message_size: int) -> int:
    """Pulsar's broker frame limit for a given maxMessageSize (counted as total_size + 4)."""
    return max_message_size + MESSAGE_SIZE_FRAME_PADDING


def command_field_name(command_type: int) -> str:
    """Name of the BaseCommand field that holds the sub-message of this type."""
    try:
        return _FIELD_BY_TYPE[int(command_type)]
    except KeyError:
        raise LocalProtocolError(f"unknown command type {command_type}") from None


@dataclass(slots=True)
class Frame:
    """One decoded frame.

    ``command`` is the sub-message (e.g. the ``CommandSend``), ``base`` the
    enclosing ``BaseCommand``. ``headers_and_payload`` is set only for SEND and
    MESSAGE: the bytes from the magic to the end of the frame, unchanged.
    ``size`` is the frame's length on the wire including the size prefix.
    """

    type: CommandType
    command: Any
    base: Any
    headers_and_payload: bytes | None
    size: int


class _ReceiveBuffer:
    """A bytearray with a read cursor; reads are provisional until ``commit``."""

    __slots__ = ("_data", "_start", "_cursor")

    def __init__(self) -> None:
        self._data = bytearray()
        self._start = 0  # first uncommitted byte
        self._cursor = 0  # provisional read position

    def __len__(self) -> int:
        return len(self._data) - self._start

    def append(self, data: bytes | bytearray | memoryview) -> None:
        # Drop consumed bytes before growing, so the buffer holds at most the
        # unconsumed tail plus the new data.
        if self._start:
            try:
                del self._data[: self._start]
            except BufferError:
                # A memoryview of a consumed frame is still alive somewhere
                # (e.g. in a traceback): leave it the old array.
                self._data = bytearray(memoryview(self._data)[self._start :])
            self._cursor -= self._start
            self._start = 0
        try:
            self._data += data
        except BufferError:
            self._data = self._data + data

    def available(self) -> int:
        return len(self._data) - self._cursor

    def peek_u32(self) -> int:
        return _U32.unpack_from(self._data, self._cursor)[0]

    def consume(self, n: int) -> memoryview:
        view = memoryview(self._data)[self._cursor : self._cursor + n]
        self._cursor += n
        return view

    def commit(self) -> None:
        self._start = self._cursor

    def rollback(self) -> None:
        self._cursor = self._start


class FrameDecoder:
    """Incremental decoder: ``feed(bytes)`` then ``next_frame()`` until it returns None."""

    def __init__(self, max_frame_size: int) -> None:
        if max_frame_size < 12:
            raise LocalProtocolError(f"max_frame_size too small: {max_frame_size}")
        self.max_frame_size = max_frame_size
        self._buffer = _ReceiveBuffer()
        self._failed: RemoteProtocolError | None = None

    @property
    def buffered_bytes(self) -> int:
        """Bytes received but not yet returned as frames."""
        return len(self._buffer)

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Append received bytes. Rejects an oversized frame as soon as its prefix is here."""
        if self._failed is not None:
            raise self._failed
        if data:
            self._buffer.append(data)
            self._check_head()

    def _check_head(self) -> None:
        buf = self._buffer
        buf.rollback()
        if buf.available() >= 4:
            total_size = buf.peek_u32()
            if total_size + 4 > self.max_frame_size:
                self._fail(FrameTooLarge(total_size + 4, self.max_frame_size))

    def _fail(self, error: RemoteProtocolError) -> None:
        self._failed = error
        raise error

    def next_frame(self) -> Frame | None:
        """Return the next complete frame, or None if more bytes are needed.

        Callers drain frames until None before feeding more, so the size
        prefix of the next frame is checked here before its body is buffered.
        """
        if self._failed is not None:
            raise self._failed
        buf = self._buffer
        buf.rollback()
        available = buf.available()
        if available < 4:
            return None
        frame_size = buf.peek_u32() + 4
        if frame_size > self.max_frame_size:
            self._fail(FrameTooLarge(frame_size, self.max_frame_size))
        if available < frame_size:
            return None
        body = buf.consume(frame_size)
        buf.commit()
        try:
            return decode_frame_body(body[4:])
        except RemoteProtocolError as exc:
            self._fail(exc)
            raise  # unreachable; keeps type checkers happy
        finally:
            body.release()


# type value -> (CommandType, BaseCommand field name, sub-message may be absent, carries a payload)
_TYPE_INFO: dict[int, tuple[CommandType, str, bool, bool]] = {
    int(t): (t, _FIELD_BY_TYPE[t], t in _NO_REQUIRED_FIELDS, t in PAYLOAD_COMMANDS) for t in CommandType
}


def decode_frame_body(body: memoryview | bytes) -> Frame:
    """Decode ``[cmd_size][BaseCommand][rest]`` (a frame without its total_size prefix)."""
    total_size = len(body)
    if total_size < 4:
        raise RemoteProtocolError(f"frame of {total_size} bytes has no room for cmd_size")
    cmd_size = _U32.unpack_from(body, 0)[0]
    if cmd_size == 0 or cmd_size > total_size - 4:
        raise RemoteProtocolError(f"cmd_size {cmd_size} does not fit a frame of {total_size} bytes")
    base = pb.BaseCommand()
    try:
        base.ParseFromString(body[4 : 4 + cmd_size])
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise RemoteProtocolError(f"unparseable BaseCommand: {exc}") from None
    info = _TYPE_INFO.get(base.type) if base.HasField("type") else None
    if info is None:
        raise RemoteProtocolError("BaseCommand without a known type")
    ctype, name, sub_optional, has_payload = info
    if not base.IsInitialized():
        missing = ", ".join(base.FindInitializationErrors())
        raise RemoteProtocolError(f"{ctype.name} lacks required fields: {missing}")
    if not sub_optional and not base.HasField(name):
        raise RemoteProtocolError(f"{ctype.name} frame without its {name} sub-command")
    headers_and_payload = bytes(body[4 + cmd_size :]) if has_payload else None
    return Frame(ctype, getattr(base, name), base, headers_and_payload, total_size + 4)


# --------------------------------------------------------------------------- encoding


def _fill(message: Any, fields: dict[str, Any]) -> None:
    """Set protobuf fields from keyword values (dicts for sub-messages, lists for repeated)."""
    for key, value in fields.items():
        if value is None:
            continue
        field = message.DESCRIPTOR.fields_by_name.get(key)
        if field is None:
            raise LocalProtocolError(f"{message.DESCRIPTOR.name} has no field {key!r}")
        if field.is_repeated:
            target = getattr(message, key)
            for item in value:
                if field.message_type is not None:
                    if isinstance(item, dict):
                        _fill(target.add(), item)
                    else:
                        target.add().CopyFrom(item)
                else:
                    target.append(item)
        elif field.message_type is not None:
            if isinstance(value, dict):
                sub = getattr(message, key)
                sub.SetInParent()
                _fill(sub, value)
            else:
                getattr(message, key).CopyFrom(value)
        else:
            setattr(message, key, value)


def new_base_command(command_type: int) -> tuple[Any, Any]:
    """A fresh BaseCommand with its type set and its (empty, present) sub-message."""
    base = pb.BaseCommand()
    base.type = command_type
    sub = getattr(base, command_field_name(command_type))
    sub.SetInParent()
    return base, sub


def serialize_base(base: Any) -> bytes:
    """Serialize a BaseCommand; a missing required field is a LocalProtocolError."""
    try:
        return base.SerializeToString()
    except EncodeError as exc:
        raise LocalProtocolError(f"cannot encode {CommandType(base.type).name}: {exc}") from None


def frame_from_base(base: Any) -> bytes:
    """``[total_size][cmd_size][BaseCommand]`` for a ready BaseCommand."""
    cmd = serialize_base(base)
    return _U32_PAIR.pack(len(cmd) + 4, len(cmd)) + cmd


def payload_frame_from_base(base: Any, headers_and_payload: bytes | bytearray | memoryview) -> bytes:
    """``[total_size][cmd_size][BaseCommand][headers_and_payload]``."""
    cmd = serialize_base(base)
    return b"".join(
        (_U32_PAIR.pack(len(cmd) + 4 + len(headers_and_payload), len(cmd)), cmd, headers_and_payload)
    )


def encode_command(command_type: int, **fields: Any) -> bytes:
    """Encode a simple command frame from keyword fields of its sub-message."""
    base, sub = new_base_command(command_type)
    _fill(sub, fields)
    return frame_from_base(base)


def encode_payload_command(
    command_type: int, headers_and_payload: bytes | bytearray | memoryview, **fields: Any
) -> bytes:
    """Encode a SEND or MESSAGE frame: the command followed by headers-and-payload bytes."""
    if command_type not in PAYLOAD_COMMANDS:
        raise LocalProtocolError(f"{CommandType(command_type).name} does not carry a payload")
    base, sub = new_base_command(command_type)
    _fill(sub, fields)
    return payload_frame_from_base(base, headers_and_payload)


def peek_command_type(frame: bytes | bytearray | memoryview) -> CommandType:
    """Decode only the type of an encoded frame (for tests and logging)."""
    return decode_frame_body(memoryview(frame)[4:]).type
