"""MessageId: where a message lives (ledger, entry, partition, batch index).

Theory of operation: a MessageId is a value object. On the wire it is a
``MessageIdData`` whose ledger and entry are uint64; we keep them as *signed*
64-bit ints as Java and C++ do, so ``EARLIEST`` is (-1, -1) and travels as
2^64-1, and ``LATEST`` is (INT64_MAX, INT64_MAX).

``serialize()`` is byte-identical to the official client's
``pulsar.MessageId.serialize()``: a bare MessageIdData with ledgerId and
entryId always, partition only if != -1, batch_index only if != -1,
batch_size only if != 0, first_chunk_message_id (ledger, entry, partition if
!= -1) for chunked ids, and never the ack_set.

Ordering follows the client: by ledger, then entry, then batch index, where a
message inside a batch sorts before the whole-entry id (batch_index -1). The
partition is not part of the order; equality compares every field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from google.protobuf.message import DecodeError

from magnetar.proto import PulsarApi_pb2 as pb
from magnetar.protocol.errors import RemoteProtocolError

INT64_MAX = (1 << 63) - 1
_U64 = 1 << 64


def to_signed64(value: int) -> int:
    """Read a wire uint64 as the signed int64 Java/C++ use."""
    return value - _U64 if value > INT64_MAX else value


def to_unsigned64(value: int) -> int:
    """Write a signed int64 into a uint64 field (-1 becomes 2^64-1)."""
    return value & (_U64 - 1)


@dataclass(frozen=True, slots=True)
class MessageId:
    ledger_id: int
    entry_id: int
    partition: int = -1
    batch_index: int = -1
    batch_size: int = 0
    ack_set: tuple[int, ...] = ()
    first_chunk: MessageId | None = None

    # ----------------------------------------------------------- ordering
    def _key(self) -> tuple[int, int, int]:
        return (self.ledger_id, self.entry_id, self.batch_index if self.batch_index >= 0 else INT64_MAX)

    def __lt__(self, other: MessageId) -> bool:
        return self._key() < other._key()

    def __le__(self, other: MessageId) -> bool:
        return self._key() <= other._key()

    def __gt__(self, other: MessageId) -> bool:
        return self._key() > other._key()

    def __ge__(self, other: MessageId) -> bool:
        return self._key() >= other._key()

    def __str__(self) -> str:
        text = f"({self.ledger_id},{self.entry_id},{self.partition},{self.batch_index})"
        if self.first_chunk is not None:
            return f"{self.first_chunk};{text}"
        return text

    # ----------------------------------------------------------- protobuf
    def fill_pb(self, data: Any, *, with_ack_set: bool = True) -> Any:
        """Write this id into a MessageIdData (defaults left absent, like the C++ client)."""
        data.ledgerId = to_unsigned64(self.ledger_id)
        data.entryId = to_unsigned64(self.entry_id)
        if self.partition != -1:
            data.partition = self.partition
        if self.batch_index != -1:
            data.batch_index = self.batch_index
        if self.batch_size != 0:
            data.batch_size = self.batch_size
        if with_ack_set and self.ack_set:
            data.ack_set.extend(self.ack_set)
        if self.first_chunk is not None:
            first = data.first_chunk_message_id
            first.ledgerId = to_unsigned64(self.first_chunk.ledger_id)
            first.entryId = to_unsigned64(self.first_chunk.entry_id)
            if self.first_chunk.partition != -1:
                first.partition = self.first_chunk.partition
        return data

    def to_pb(self) -> Any:
        return self.fill_pb(pb.MessageIdData())

    @classmethod
    def from_pb(cls, data: Any) -> MessageId:
        first = None
        if data.HasField("first_chunk_message_id"):
            f = data.first_chunk_message_id
            first = cls(to_signed64(f.ledgerId), to_signed64(f.entryId), f.partition)
        return cls(
            ledger_id=to_signed64(data.ledgerId),
            entry_id=to_signed64(data.entryId),
            partition=data.partition,
            batch_index=data.batch_index,
            batch_size=data.batch_size,
            ack_set=tuple(data.ack_set),
            first_chunk=first,
        )

    # ----------------------------------------------------------- bytes
    def serialize(self) -> bytes:
        """Bytes equal to ``pulsar.MessageId.serialize()`` for the same id."""
        return self.fill_pb(pb.MessageIdData(), with_ack_set=False).SerializeToString()

    @classmethod
    def deserialize(cls, data: bytes) -> MessageId:
        msg = pb.MessageIdData()
        try:
            msg.ParseFromString(data)
        except (DecodeError, RuntimeError, ValueError) as exc:
            raise RemoteProtocolError(f"not a serialized MessageId: {exc}") from None
        if not msg.IsInitialized():
            raise RemoteProtocolError("serialized MessageId lacks ledgerId or entryId")
        return cls.from_pb(msg)

    def entry(self) -> MessageId:
        """The whole-entry id (batch index dropped)."""
        return MessageId(self.ledger_id, self.entry_id, self.partition)


EARLIEST = MessageId(-1, -1)
LATEST = MessageId(INT64_MAX, INT64_MAX)
