"""The bookie wire protocol: a sans-IO codec (bytes in, events out).

Theory of operation: requests and responses are length-prefixed frames,

    u32 frame length (bytes after this field) | u8 version | u8 op | u64 request id | body

big-endian, one message per frame.  A response carries the request's op with
the high bit set and the request's id, so a connection pipelines many
requests and answers arrive in any order.  Bodies:

    ADD       u64 ledger | i64 entry | u8 flags (1 = recovery) | u16 key len | key | entry bytes
    READ      u64 ledger | i64 entry (-1 = last) | u8 flags (1 = fence) | u16 key len | key
    READ_LAC  u64 ledger
    WAIT_LAC  u64 ledger | i64 previous lac | u32 timeout ms
    GET_INFO  (empty)

    response  i32 status (BookieErrorCode) | then, status != OK: u16 len | utf-8 message
              ADD: u64 ledger | i64 entry        READ: u64 ledger | i64 entry | entry bytes
              READ_LAC, WAIT_LAC: u64 ledger | i64 lac
              GET_INFO: u64 total | u64 free | u8 read-only | u16 len | bookie id

:class:`FrameDecoder` buffers bytes and yields events.  The frame length is
checked against ``max_frame_bytes`` as soon as its 4 bytes arrive, before
anything more is buffered: an oversized frame raises :class:`FrameTooLarge`.
Framing errors (too large, too short, bad version) are fatal -- the stream
can no longer be trusted and the decoder refuses further use.  A frame whose
framing is fine but whose body is malformed (unknown op, truncated body)
raises :class:`MalformedFrame` carrying the request id when known; the frame
is consumed and the decoder stays usable, so a server can answer that one
request with BAD_REQUEST.  Both are :class:`WireProtocolError`, a
BadRequestError.  The codec never touches a socket or a clock.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable
from dataclasses import dataclass

from magnetar.bookie.api import BadRequestError, BookieErrorCode

VERSION = 1
RESPONSE_BIT = 0x80
FLAG_RECOVERY = 0x01
FLAG_FENCE = 0x01
DEFAULT_MAX_FRAME_BYTES = 5 * 1024 * 1024

_LEN = struct.Struct(">I")
_HEAD = struct.Struct(">BBQ")  # version, op, request id
_ADD = struct.Struct(">QqBH")
_READ = struct.Struct(">QqBH")
_LEDGER = struct.Struct(">Q")
_WAIT = struct.Struct(">QqI")
_STATUS = struct.Struct(">i")
_MSG = struct.Struct(">H")
_LEDGER_ENTRY = struct.Struct(">Qq")
_LEDGER_LAC = struct.Struct(">Qq")
_INFO = struct.Struct(">QQBH")


class Op(enum.IntEnum):
    ADD = 1
    READ = 2
    READ_LAC = 3
    WAIT_LAC = 4
    GET_INFO = 5


class WireProtocolError(BadRequestError):
    fatal = True


class FrameTooLarge(WireProtocolError):
    pass


class MalformedFrame(WireProtocolError):
    fatal = False

    def __init__(self, message: str, request_id: int | None = None, op: int | None = None) -> None:
        super().__init__(message)
        self.request_id = request_id
        self.op = op


# --- events ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AddRequest:
    request_id: int
    ledger_id: int
    entry_id: int
    master_key: bytes
    entry: bytes
    recovery: bool = False


@dataclass(frozen=True, slots=True)
class ReadRequest:
    request_id: int
    ledger_id: int
    entry_id: int
    fence: bool = False
    master_key: bytes = b""


@dataclass(frozen=True, slots=True)
class ReadLacRequest:
    request_id: int
    ledger_id: int


@dataclass(frozen=True, slots=True)
class WaitLacRequest:
    request_id: int
    ledger_id: int
    previous_lac: int
    timeout_ms: int


@dataclass(frozen=True, slots=True)
class GetInfoRequest:
    request_id: int


@dataclass(frozen=True, slots=True)
class AddResponse:
    request_id: int
    ledger_id: int
    entry_id: int


@dataclass(frozen=True, slots=True)
class ReadResponse:
    request_id: int
    ledger_id: int
    entry_id: int
    entry: bytes


@dataclass(frozen=True, slots=True)
class LacResponse:
    request_id: int
    op: Op  # READ_LAC or WAIT_LAC
    ledger_id: int
    lac: int


@dataclass(frozen=True, slots=True)
class InfoResponse:
    request_id: int
    bookie_id: str
    total_disk_bytes: int
    free_disk_bytes: int
    read_only: bool


@dataclass(frozen=True, slots=True)
class ErrorResponse:
    request_id: int
    op: Op
    code: int
    message: str = ""


Request = AddRequest | ReadRequest | ReadLacRequest | WaitLacRequest | GetInfoRequest
Response = AddResponse | ReadResponse | LacResponse | InfoResponse | ErrorResponse
Event = Request | Response

# --- encoding --------------------------------------------------------------------------------


def _frame(op: int, request_id: int, *parts: bytes) -> bytes:
    body_len = _HEAD.size + sum(len(p) for p in parts)
    return b"".join((_LEN.pack(body_len), _HEAD.pack(VERSION, op, request_id), *parts))


def _key(key: bytes) -> bytes:
    if len(key) > 0xFFFF:
        raise ValueError("master key longer than 65535 bytes")
    return key


def encode(event: Event) -> bytes:
    """One frame for a request or a response event."""
    match event:
        case AddRequest():
            flags = FLAG_RECOVERY if event.recovery else 0
            key = _key(event.master_key)
            head = _ADD.pack(event.ledger_id, event.entry_id, flags, len(key))
            return _frame(Op.ADD, event.request_id, head, key, event.entry)
        case ReadRequest():
            flags = FLAG_FENCE if event.fence else 0
            key = _key(event.master_key)
            head = _READ.pack(event.ledger_id, event.entry_id, flags, len(key))
            return _frame(Op.READ, event.request_id, head, key)
        case ReadLacRequest():
            return _frame(Op.READ_LAC, event.request_id, _LEDGER.pack(event.ledger_id))
        case WaitLacRequest():
            body = _WAIT.pack(event.ledger_id, event.previous_lac, max(0, min(event.timeout_ms, 0xFFFFFFFF)))
            return _frame(Op.WAIT_LAC, event.request_id, body)
        case GetInfoRequest():
            return _frame(Op.GET_INFO, event.request_id)
        case AddResponse():
            return _ok(Op.ADD, event.request_id, _LEDGER_ENTRY.pack(event.ledger_id, event.entry_id))
        case ReadResponse():
            return _ok(
                Op.READ, event.request_id, _LEDGER_ENTRY.pack(event.ledger_id, event.entry_id), event.entry
            )
        case LacResponse():
            return _ok(event.op, event.request_id, _LEDGER_LAC.pack(event.ledger_id, event.lac))
        case InfoResponse():
            bid = event.bookie_id.encode()
            head = _INFO.pack(event.total_disk_bytes, event.free_disk_bytes, int(event.read_only), len(bid))
            return _ok(Op.GET_INFO, event.request_id, head, bid)
        case ErrorResponse():
            msg = event.message.encode()[:0xFFFF]
            return _frame(
                event.op | RESPONSE_BIT, event.request_id, _STATUS.pack(event.code), _MSG.pack(len(msg)), msg
            )
    raise TypeError(f"cannot encode {event!r}")


def _ok(op: Op, request_id: int, *parts: bytes) -> bytes:
    return _frame(op | RESPONSE_BIT, request_id, _STATUS.pack(BookieErrorCode.OK), *parts)


# --- decoding --------------------------------------------------------------------------------


class FrameDecoder:
    """Feed bytes with ``receive_data``; pull events with ``next_event`` (None = need more)."""

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self._max = max_frame_bytes
        self._buf = bytearray()
        self._broken: WireProtocolError | None = None

    @property
    def buffered_bytes(self) -> int:
        return len(self._buf)

    def receive_data(self, data: bytes) -> None:
        if self._broken is not None:
            raise self._broken
        self._buf += data
        self._check_length()

    def _check_length(self) -> None:
        if len(self._buf) < _LEN.size:
            return
        (length,) = _LEN.unpack_from(self._buf, 0)
        if length > self._max:
            self._fail(FrameTooLarge(f"frame of {length} bytes exceeds the {self._max}-byte limit"))
        if length < _HEAD.size:
            self._fail(WireProtocolError(f"frame of {length} bytes is shorter than its header"))

    def _fail(self, exc: WireProtocolError) -> None:
        self._broken = exc
        self._buf.clear()
        raise exc

    def next_event(self) -> Event | None:
        if self._broken is not None:
            raise self._broken
        if len(self._buf) < _LEN.size:
            return None
        self._check_length()
        (length,) = _LEN.unpack_from(self._buf, 0)
        if len(self._buf) < _LEN.size + length:
            return None
        frame = bytes(self._buf[_LEN.size : _LEN.size + length])
        del self._buf[: _LEN.size + length]
        version, op, request_id = _HEAD.unpack_from(frame, 0)
        if version != VERSION:
            self._fail(WireProtocolError(f"unsupported wire version {version}"))
        try:
            event = _decode_body(op, request_id, memoryview(frame)[_HEAD.size :])
        except (struct.error, ValueError, UnicodeDecodeError) as exc:
            raise MalformedFrame(f"malformed op {op} frame: {exc}", request_id, op) from None
        return event


def _decode_body(op: int, rid: int, body: memoryview) -> Event:
    is_response = bool(op & RESPONSE_BIT)
    try:
        kind = Op(op & ~RESPONSE_BIT)
    except ValueError:
        raise MalformedFrame(f"unknown op {op}", rid, op) from None
    if is_response:
        return _decode_response(kind, rid, body)
    if kind is Op.ADD:
        ledger, entry, flags, key_len = _ADD.unpack_from(body, 0)
        key_end = _ADD.size + key_len
        if key_end > len(body):
            raise ValueError("master key runs past the frame")
        return AddRequest(
            rid,
            ledger,
            entry,
            bytes(body[_ADD.size : key_end]),
            bytes(body[key_end:]),
            bool(flags & FLAG_RECOVERY),
        )
    if kind is Op.READ:
        ledger, entry, flags, key_len = _READ.unpack_from(body, 0)
        if _READ.size + key_len != len(body):
            raise ValueError("read frame length does not match its key")
        return ReadRequest(rid, ledger, entry, bool(flags & FLAG_FENCE), bytes(body[_READ.size :]))
    if kind is Op.READ_LAC:
        _exact(body, _LEDGER.size)
        return ReadLacRequest(rid, *_LEDGER.unpack_from(body, 0))
    if kind is Op.WAIT_LAC:
        _exact(body, _WAIT.size)
        return WaitLacRequest(rid, *_WAIT.unpack_from(body, 0))
    _exact(body, 0)
    return GetInfoRequest(rid)


def _exact(body: memoryview, size: int) -> None:
    if len(body) != size:
        raise ValueError(f"body of {len(body)} bytes, expected {size}")


def _decode_response(kind: Op, rid: int, body: memoryview) -> Response:
    (status,) = _STATUS.unpack_from(body, 0)
    rest = body[_STATUS.size :]
    if status != BookieErrorCode.OK:
        (n,) = _MSG.unpack_from(rest, 0)
        if _MSG.size + n != len(rest):
            raise ValueError("error message length does not match the frame")
        return ErrorResponse(rid, kind, status, bytes(rest[_MSG.size :]).decode())
    if kind is Op.ADD:
        _exact(rest, _LEDGER_ENTRY.size)
        return AddResponse(rid, *_LEDGER_ENTRY.unpack_from(rest, 0))
    if kind is Op.READ:
        ledger, entry = _LEDGER_ENTRY.unpack_from(rest, 0)
        return ReadResponse(rid, ledger, entry, bytes(rest[_LEDGER_ENTRY.size :]))
    if kind in (Op.READ_LAC, Op.WAIT_LAC):
        _exact(rest, _LEDGER_LAC.size)
        return LacResponse(rid, kind, *_LEDGER_LAC.unpack_from(rest, 0))
    total, free, ro, n = _INFO.unpack_from(rest, 0)
    if _INFO.size + n != len(rest):
        raise ValueError("bookie id length does not match the frame")
    return InfoResponse(rid, bytes(rest[_INFO.size :]).decode(), total, free, bool(ro))


class WriteCoalescer:
    """Frames written in one event-loop iteration go out in one ``write`` (one syscall).

    Pipelined requests and their responses arrive in bursts; joining each burst
    saves a send per frame.  ``sink`` is a transport's or StreamWriter's ``write``.
    """

    def __init__(
        self, sink: Callable[[bytes], object], call_soon: Callable[[Callable[[], None]], object]
    ) -> None:
        self._sink = sink
        self._call_soon = call_soon
        self._frames: list[bytes] = []
        self._scheduled = False

    def write(self, frame: bytes) -> None:
        self._frames.append(frame)
        if not self._scheduled:
            self._scheduled = True
            self._call_soon(self.flush)

    def flush(self) -> None:
        self._scheduled = False
        if self._frames:
            data = self._frames[0] if len(self._frames) == 1 else b"".join(self._frames)
            self._frames.clear()
            self._sink(data)
