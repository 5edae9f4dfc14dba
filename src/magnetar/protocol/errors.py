"""Errors of the protocol layer.

Theory of operation: as in h11, a failure is either *remote* (the peer sent
bytes that break the protocol: garbage, an oversized frame, a command out of
order) or *local* (our own code misused the codec: a builder without a required
field, sending before the handshake, using a connection after it failed).
Every exception this package raises on bad input derives from
``ProtocolError``; nothing else escapes the decoder or the connections (the
fuzz tests hold us to that).

``RemoteProtocolError.hint`` is a ``ServerError`` value (an int) the broker
may use to answer the peer before closing, e.g. ``ChecksumError`` for a
corrupt SEND. After a remote error the connection object is dead: the caller
closes the socket.
"""

from __future__ import annotations


class ProtocolError(Exception):
    """Base class of every error raised by ``magnetar.protocol``."""

    def __init__(self, message: str, *, hint: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        # A ServerError code suggesting how to answer the peer (None: just close).
        self.hint = hint


class RemoteProtocolError(ProtocolError):
    """The peer sent something that violates the Pulsar protocol."""


class LocalProtocolError(ProtocolError):
    """We tried to do something the protocol (or this connection's state) forbids."""


class FrameTooLarge(RemoteProtocolError):
    """A frame's 4-byte size prefix announced more than the decoder's limit."""

    def __init__(self, frame_size: int, max_frame_size: int) -> None:
        super().__init__(
            f"frame of {frame_size} bytes exceeds the limit of {max_frame_size} bytes",
        )
        self.frame_size = frame_size
        self.max_frame_size = max_frame_size


class ChecksumMismatch(RemoteProtocolError):
    """The CRC32-C of a payload frame did not match [metadata size][metadata][payload]."""

    def __init__(self, expected: int, actual: int) -> None:
        super().__init__(f"checksum mismatch: frame says {expected:#010x}, computed {actual:#010x}", hint=9)
        self.expected = expected
        self.actual = actual


class CorruptPayload(RemoteProtocolError):
    """Headers-and-payload, a batch container or a compressed payload could not be decoded."""


class UnsupportedCompression(CorruptPayload):
    """The payload names a compression codec we do not know."""
