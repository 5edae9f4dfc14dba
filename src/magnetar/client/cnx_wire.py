"""The socket side of a connection: an ``asyncio.Protocol`` that hands bytes over and paces writers.

Theory of operation: :class:`Wire` is what ``loop.create_connection`` builds
for a ``ClientCnx``. Every received chunk goes, in ``data_received``, straight
to the connection's ``_on_data`` (no reader task, no StreamReader copy); EOF
is passed on as ``b""`` and the end of the socket as ``_shutdown(exc)``.
Writes are plain ``transport.write`` by the connection; for flow control the
transport's ``pause_writing`` / ``resume_writing`` are remembered, and
``drain()`` waits while writing is paused (senders of bulk data call it), all
waiters being released on resume or when the connection is lost.
"""

from __future__ import annotations

import asyncio
from typing import Any


class Wire(asyncio.Protocol):
    """The socket side: bytes in go straight to the ClientCnx (no reader task), writes with flow control."""

    def __init__(self, cnx: Any) -> None:
        self.cnx = cnx
        self.transport: asyncio.Transport | None = None
        self._paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.cnx._on_data(data)

    def eof_received(self) -> bool:
        self.cnx._on_data(b"")
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.cnx._shutdown(exc)
        self._wake()

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._wake()

    def _wake(self) -> None:
        waiters, self._drain_waiters = self._drain_waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    async def drain(self) -> None:
        if self._paused and self.transport is not None and not self.transport.is_closing():
            w = asyncio.get_running_loop().create_future()
            self._drain_waiters.append(w)
            await w
