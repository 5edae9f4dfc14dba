"""An in-memory :class:`~magnetar.bookie.disk.Disk` that knows what a crash loses.

Theory of operation: every file is a byte buffer plus the length that has
been fsynced.  ``crash(rng)`` models a power loss: each file keeps its synced
bytes plus a random prefix of the unsynced ones (a torn write), files whose
creation was never made durable by ``sync_dir`` (or by ``write_atomic``)
disappear, and every handle opened before the crash goes dead (writes raise
EIO) so code still running from the "previous life" cannot touch the new
one.  A capacity makes writes fail with ENOSPC, after writing what fits,
exactly as a full file system does.

It is deterministic (the rng is injected) and has no threads, so the storage
code runs over it unmodified in tests and simulations -- together with an
inline executor and :class:`~magnetar.bookie.index.MemoryIndexStore`.
Truncation and deletion are treated as immediately durable.
"""

from __future__ import annotations

import errno
import posixpath
from dataclasses import dataclass, field

from magnetar.bookie.disk import AppendFile, DiskUsage
from magnetar.runtime import Rng


@dataclass(slots=True)
class _File:
    data: bytearray = field(default_factory=bytearray)
    synced: int = 0
    durable_entry: bool = False  # its directory entry survives a crash


class _MemAppendFile:
    def __init__(self, disk: MemoryDisk, path: str) -> None:
        self._disk = disk
        self._path = path
        self._epoch = disk.epoch

    def _file(self) -> _File:
        if self._epoch != self._disk.epoch:
            raise OSError(errno.EIO, f"{self._path}: handle from before a crash")
        f = self._disk.files.get(self._path)
        if f is None:
            raise OSError(errno.ENOENT, f"{self._path} was deleted")
        return f

    @property
    def path(self) -> str:
        return self._path

    @property
    def size(self) -> int:
        return len(self._file().data)

    def write(self, data: bytes | memoryview) -> None:
        f = self._file()
        room = self._disk.free_bytes()
        chunk = bytes(data)
        if len(chunk) > room:
            f.data += chunk[:room]
            raise OSError(errno.ENOSPC, "No space left on device (memory disk)")
        f.data += chunk

    def fsync(self) -> None:
        f = self._file()
        self._disk.fsyncs += 1
        f.synced = len(f.data)

    def truncate(self, size: int) -> None:
        f = self._file()
        del f.data[size:]
        f.synced = min(f.synced, size)

    def preallocate(self, size_bytes: int) -> None:
        pass  # nothing to gain in memory

    def close(self) -> None:
        pass


class MemoryDisk:
    def __init__(self, capacity_bytes: int = 1 << 40) -> None:
        self.capacity_bytes = capacity_bytes
        self.files: dict[str, _File] = {}
        self.dirs: set[str] = {"/"}
        self.epoch = 0
        self.fsyncs = 0

    # --- Disk ---------------------------------------------------------------------------------

    def open_append(self, path: str) -> AppendFile:
        self._require_dir(posixpath.dirname(path))
        self.files.setdefault(path, _File())
        return _MemAppendFile(self, path)

    def read_at(self, path: str, offset: int, length: int) -> bytes:
        return bytes(self._get(path).data[offset : offset + length])

    def read_all(self, path: str) -> bytes:
        return bytes(self._get(path).data)

    def write_atomic(self, path: str, data: bytes) -> None:
        self._require_dir(posixpath.dirname(path))
        if len(data) > self.free_bytes() + len(self.files.get(path, _File()).data):
            raise OSError(errno.ENOSPC, "No space left on device (memory disk)")
        self.files[path] = _File(bytearray(data), len(data), durable_entry=True)

    def size(self, path: str) -> int:
        return len(self._get(path).data)

    def exists(self, path: str) -> bool:
        return path in self.files or path in self.dirs

    def listdir(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        names = {p[len(prefix) :].split("/", 1)[0] for p in (*self.files, *self.dirs) if p.startswith(prefix)}
        return sorted(n for n in names if n)

    def makedirs(self, path: str) -> None:
        path = posixpath.normpath(path)
        while path not in self.dirs:
            self.dirs.add(path)
            path = posixpath.dirname(path)

    def delete(self, path: str) -> None:
        self.files.pop(path, None)

    def truncate(self, path: str, size: int) -> None:
        f = self._get(path)
        del f.data[size:]
        f.synced = min(f.synced, size)

    def sync_dir(self, path: str) -> None:
        prefix = path.rstrip("/") + "/"
        for p, f in self.files.items():
            if p.startswith(prefix) and "/" not in p[len(prefix) :]:
                f.durable_entry = True

    def usage(self, path: str) -> DiskUsage:
        return DiskUsage(self.capacity_bytes, self.free_bytes())

    # --- faults ---------------------------------------------------------------------------------

    def used_bytes(self) -> int:
        return sum(len(f.data) for f in self.files.values())

    def free_bytes(self) -> int:
        return max(0, self.capacity_bytes - self.used_bytes())

    def crash(self, rng: Rng) -> None:
        """Power loss: unsynced bytes partly lost, undurable files gone, old handles dead."""
        self.epoch += 1
        for path in sorted(self.files):
            f = self.files[path]
            if not f.durable_entry:
                del self.files[path]
                continue
            unsynced = len(f.data) - f.synced
            if unsynced > 0:
                keep = rng.randint(0, unsynced)
                del f.data[f.synced + keep :]

    def _get(self, path: str) -> _File:
        f = self.files.get(path)
        if f is None:
            raise FileNotFoundError(errno.ENOENT, "No such file", path)
        return f

    def _require_dir(self, path: str) -> None:
        if posixpath.normpath(path) not in self.dirs:
            raise FileNotFoundError(errno.ENOENT, "No such directory", path)


class InlineExecutor:
    """Runs 'blocking' work inline on the event loop: deterministic, for memory disks."""

    def __init__(self, name: str, max_threads: int = 1) -> None:
        self.name = name
        self._closed = False

    async def run(self, fn, *args, **kwargs):  # type: ignore[no-untyped-def]
        if self._closed:
            raise RuntimeError(f"executor {self.name} is closed")
        return fn(*args, **kwargs)

    async def aclose(self) -> None:
        self._closed = True

    def close_nowait(self) -> None:
        self._closed = True
