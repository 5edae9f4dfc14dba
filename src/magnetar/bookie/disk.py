"""The disk seam: every byte the bookie stores goes through a :class:`Disk`.

Theory of operation: the journal, the entry logs, the checkpoint mark and the
cookies never call ``open``/``os.*`` themselves.  They ask a :class:`Disk`
for an :class:`AppendFile` (append + fsync + truncate, what a journal or an
entry log needs), for a positional read, for directory listings and for the
free/total space of a directory.  :class:`RealDisk` is the production
implementation over the OS; the testing kit substitutes a simulated disk
that can be slow, lose unsynced bytes on a "crash", or fail with ENOSPC, and
the storage code runs unmodified over it.

Every method here blocks.  Callers run them on a ``runtime.BlockingExecutor``
thread (the journal on its own), never on the event loop.

Errors are plain ``OSError`` (``errno.ENOSPC`` for a full disk,
``FileNotFoundError`` for a missing file) so real and simulated disks raise
the same things; the storage layer turns them into typed bookie errors.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class DiskUsage:
    total_bytes: int
    free_bytes: int

    @property
    def used_fraction(self) -> float:
        if self.total_bytes <= 0:
            return 1.0
        return 1.0 - self.free_bytes / self.total_bytes


@runtime_checkable
class AppendFile(Protocol):
    """A file opened for appending; ``size`` counts bytes written, synced or not."""

    @property
    def path(self) -> str: ...

    @property
    def size(self) -> int: ...

    def write(self, data: bytes | memoryview) -> None:
        """Append all of ``data`` (raises OSError, e.g. ENOSPC; then part of it may be written)."""

    def fsync(self) -> None:
        """Make every byte written so far durable (fdatasync when ``data_only``)."""

    def truncate(self, size: int) -> None:
        """Cut the file back to ``size`` bytes (used to drop a failed partial write)."""

    # Optional: ``preallocate(size_bytes)`` reserves zero-filled room past the data (a hint;
    # the journal calls it when present, like BookKeeper's journalPreAllocSizeMB).

    def close(self) -> None: ...


@runtime_checkable
class Disk(Protocol):
    def open_append(self, path: str) -> AppendFile:
        """Open (creating if needed) ``path`` for appending at its current end."""

    def read_at(self, path: str, offset: int, length: int) -> bytes:
        """Up to ``length`` bytes at ``offset`` (shorter at end of file)."""

    def read_all(self, path: str) -> bytes: ...

    def write_atomic(self, path: str, data: bytes) -> None:
        """Replace ``path`` with ``data`` durably (temp file, fsync, rename, fsync dir)."""

    def size(self, path: str) -> int: ...

    def exists(self, path: str) -> bool: ...

    def listdir(self, path: str) -> list[str]:
        """Sorted names in a directory; [] if it does not exist."""

    def makedirs(self, path: str) -> None: ...

    def delete(self, path: str) -> None:
        """Remove a file; a missing file is not an error."""

    def truncate(self, path: str, size: int) -> None: ...

    def sync_dir(self, path: str) -> None:
        """Make file creations/deletions/renames in a directory durable."""

    def usage(self, path: str) -> DiskUsage:
        """Total and free bytes of the filesystem holding ``path``."""


class RealAppendFile:
    """Appends with positional writes at the logical end, so a preallocated (zero-filled)
    region past it is overwritten in place instead of growing the file on every write."""

    def __init__(self, path: str, *, data_only: bool = True) -> None:
        self._path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        self._size = os.fstat(self._fd).st_size
        self._allocated = self._size
        self._data_only = data_only and hasattr(os, "fdatasync")

    @property
    def path(self) -> str:
        return self._path

    @property
    def size(self) -> int:
        return self._size

    def write(self, data: bytes | memoryview) -> None:
        view = memoryview(data)
        while view:
            n = os.pwrite(self._fd, view, self._size)
            self._size += n
            view = view[n:]
        self._allocated = max(self._allocated, self._size)

    def preallocate(self, size_bytes: int) -> None:
        """Reserve ``size_bytes`` past the data (zero-filled, file size grows once now):
        later writes there need no size update, so their fdatasync is cheaper."""
        end = self._size + size_bytes
        if end <= self._allocated or not hasattr(os, "posix_fallocate"):
            return
        try:
            os.posix_fallocate(self._fd, self._allocated, end - self._allocated)
        except OSError:
            return  # a hint only; ENOSPC here surfaces on the real write
        self._allocated = end

    def fsync(self) -> None:
        if self._data_only:
            os.fdatasync(self._fd)
        else:
            os.fsync(self._fd)

    def truncate(self, size: int) -> None:
        os.ftruncate(self._fd, size)
        self._size = size
        self._allocated = size

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class RealDisk:
    """The operating system's file system."""

    def open_append(self, path: str) -> AppendFile:
        return RealAppendFile(path)

    def read_at(self, path: str, offset: int, length: int) -> bytes:
        fd = os.open(path, os.O_RDONLY)
        try:
            return os.pread(fd, length, offset)
        finally:
            os.close(fd)

    def read_all(self, path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    def write_atomic(self, path: str, data: bytes) -> None:
        tmp = f"{path}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        _fsync_dir(os.path.dirname(path) or ".")

    def size(self, path: str) -> int:
        return os.path.getsize(path)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def listdir(self, path: str) -> list[str]:
        try:
            return sorted(os.listdir(path))
        except FileNotFoundError:
            return []

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def delete(self, path: str) -> None:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass

    def truncate(self, path: str, size: int) -> None:
        os.truncate(path, size)

    def sync_dir(self, path: str) -> None:
        _fsync_dir(path)

    def usage(self, path: str) -> DiskUsage:
        u = shutil.disk_usage(path)
        return DiskUsage(total_bytes=u.total, free_bytes=u.free)


def _fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
