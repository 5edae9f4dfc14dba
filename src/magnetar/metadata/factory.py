"""Choosing a metadata backend from a URL (Pulsar's ``metadataStoreUrl``).

Theory of operation: composition roots (standalone, broker, bookie, CLI) hold
a URL and call :func:`create_metadata_store`; nothing else names a backend.

=================================  ==============================================
``memory:`` / ``memory:name``      an in-process MemoryMetadataServer session.
                                   With a ``memory_servers`` dict (owned by the
                                   caller) the same name shares one server, so
                                   several components of one process see one
                                   tree; without it every call gets a new tree.
``rocksdb:/path``                  embedded, persistent (the standalone default).
                                   One process owns the directory; the returned
                                   store owns the database and closes it.
``zk:h1:2181[,h2:2181][/chroot]``  ZooKeeper via kazoo (``zk://`` also accepted);
                                   the chroot is created if missing.
=================================  ==============================================

Backends are imported lazily so a memory-only user never loads kazoo or
rocksdict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from magnetar.metadata.api import MetadataStore
from magnetar.runtime import Clock

if TYPE_CHECKING:
    from magnetar.metadata.memory import MemoryMetadataServer

DEFAULT_SESSION_TIMEOUT_MS = 30_000
DEFAULT_OPERATION_TIMEOUT_MS = 30_000


@dataclass(frozen=True, slots=True)
class MetadataUrl:
    scheme: str  # "memory" | "rocksdb" | "zk"
    target: str  # memory name, filesystem path, or "hosts[/chroot]"

    @property
    def zk_hosts(self) -> str:
        hosts, _, _ = self.target.partition("/")
        return hosts

    @property
    def zk_chroot(self) -> str:
        _, slash, chroot = self.target.partition("/")
        return "/" + chroot.strip("/") if slash and chroot.strip("/") else ""


def parse_metadata_url(url: str) -> MetadataUrl:
    """Parses a metadata-store URL; ValueError with the accepted forms otherwise."""
    scheme, sep, rest = url.partition(":")
    scheme = scheme.strip().lower()
    if not sep:
        raise ValueError(
            f"metadata store URL {url!r} has no scheme; use memory:, rocksdb:/path or zk:host:port"
        )
    if scheme == "memory":
        return MetadataUrl("memory", rest.strip("/") or "default")
    if scheme == "rocksdb":
        path = rest[2:] if rest.startswith("//") else rest
        if not path:
            raise ValueError(f"metadata store URL {url!r}: rocksdb needs a directory (rocksdb:/path)")
        return MetadataUrl("rocksdb", path)
    if scheme in ("zk", "zookeeper"):
        target = rest[2:] if rest.startswith("//") else rest
        hosts = target.partition("/")[0]
        if not hosts or any(":" not in h or not h.rsplit(":", 1)[1].isdigit() for h in hosts.split(",")):
            raise ValueError(f"metadata store URL {url!r}: expected zk:host:port[,host:port][/chroot]")
        return MetadataUrl("zk", target)
    raise ValueError(f"unknown metadata store scheme {scheme!r} in {url!r} (memory, rocksdb, zk)")


async def create_metadata_store(
    url: str,
    *,
    clock: Clock,
    memory_servers: dict[str, MemoryMetadataServer] | None = None,
    session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
    operation_timeout_ms: int = DEFAULT_OPERATION_TIMEOUT_MS,
) -> MetadataStore:
    """Opens a store for ``url``.  The caller owns it and must ``aclose()`` it."""
    parsed = parse_metadata_url(url)
    if parsed.scheme == "memory":
        from magnetar.metadata.memory import MemoryMetadataServer

        if memory_servers is None:
            return MemoryMetadataServer(clock=clock, name=parsed.target).session()
        server = memory_servers.get(parsed.target)
        if server is None:
            server = memory_servers[parsed.target] = MemoryMetadataServer(clock=clock, name=parsed.target)
        return server.session()
    if parsed.scheme == "rocksdb":
        from magnetar.metadata.rocksdb import RocksdbMetadataServer

        server = await RocksdbMetadataServer.open(parsed.target, clock=clock)
        return server.session(owns_server=True)
    from magnetar.metadata.zookeeper import ZKMetadataStore

    return await ZKMetadataStore.connect(
        parsed.zk_hosts,
        chroot=parsed.zk_chroot,
        clock=clock,
        session_timeout_ms=session_timeout_ms,
        operation_timeout_ms=operation_timeout_ms,
    )
