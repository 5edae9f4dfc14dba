"""The connection pool: one connection per (logical address, physical address).

Theory of operation: as in Pulsar's clients, producers, consumers and lookups
share connections. The key is the pair (logical, physical): the logical
address is the broker that owns the topic, the physical one is where the
socket goes (the same, except through a proxy, where every logical broker is
reached over its own connection to the proxy). ``get(logical, physical)``
returns the open connection for the key, or opens one; concurrent callers for
a key that is still connecting wait on the same attempt, so a burst of
``create_producer`` calls opens one socket. A closed connection is dropped
from the table on the next ``get``. ``close()`` closes every connection.
"""

from __future__ import annotations

import asyncio
import contextlib

from magnetar.client.connection import ClientCnx, ConnectionConfig
from magnetar.client.errors import AlreadyClosed


class ConnectionPool:
    def __init__(self, config: ConnectionConfig) -> None:
        self.config = config
        self._cnx: dict[tuple[str, str], ClientCnx] = {}
        self._opening: dict[tuple[str, str], asyncio.Future[ClientCnx]] = {}
        self._closed = False

    async def get(self, logical: str, physical: str | None = None) -> ClientCnx:
        if self._closed:
            raise AlreadyClosed("the client is closed")
        key = (logical, physical or logical)
        cnx = self._cnx.get(key)
        if cnx is not None and not cnx.is_closed:
            return cnx
        opening = self._opening.get(key)
        if opening is not None:
            return await asyncio.shield(opening)
        fut: asyncio.Future[ClientCnx] = asyncio.get_running_loop().create_future()
        self._opening[key] = fut
        try:
            cnx = ClientCnx(key[0], key[1], self.config)
            await cnx.open()
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # mark retrieved: nobody else may be waiting
            raise
        finally:
            self._opening.pop(key, None)
        if self._closed:
            await cnx.close()
            raise AlreadyClosed("the client is closed")
        self._cnx[key] = cnx
        fut.set_result(cnx)
        return cnx

    @property
    def connections(self) -> list[ClientCnx]:
        return [c for c in self._cnx.values() if not c.is_closed]

    async def close(self) -> None:
        self._closed = True
        cnxs = list(self._cnx.values())
        self._cnx.clear()
        for cnx in cnxs:
            with contextlib.suppress(Exception):
                await cnx.close()
