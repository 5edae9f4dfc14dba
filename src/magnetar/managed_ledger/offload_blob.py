"""Offload drivers over fsspec: ``filesystem`` (a directory) and ``aws-s3``/``s3`` (s3fs).

Theory of operation
-------------------
:class:`BlobStoreOffloader` writes a ledger as the two objects of
:mod:`.offload_format`.  Writing streams: entries are read from the bookies in
batches of about one block, grouped into blocks of at most
``managedLedgerOffloadReadBufferSizeInBytes`` (the unit a reader fetches) and
written to an fsspec file opened for writing; for S3 that file is a multipart
upload whose parts are ``managedLedgerOffloadMaxBlockSizeInBytes`` (at least
the 5 MiB S3 requires), so memory stays at about one part plus one block,
whatever the ledger's size.  Then the index object is written and both are
*verified* (the data object's size, the index read back and decoded, the
data header read back) before :meth:`offload` returns; any failure aborts the
upload, removes what was written and raises :class:`OffloadError`.

All fsspec calls are blocking (s3fs runs its own event loop in a thread), so
they run on the offloader's :class:`~magnetar.runtime.BlockingExecutor`.

Reads: :class:`OffloadedReadHandle` loads the index once (checking its CRC,
that it names the expected ledger and uid, and that the data object has the
length the index says), then serves ``read(first, last)`` with one ranged GET
of the blocks that hold those entries -- plus, for a sequential reader (this
read starts where the last one ended), the next ``READ_AHEAD_BLOCKS`` blocks,
kept in a small byte-bounded block cache.  Every block's CRC is checked.

:class:`OffloaderRegistry` builds and caches one offloader per distinct
storage target (driver, bucket, endpoint, region, directory): the ones the
policies name for writing, and the ones an offload context names for reading.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from magnetar.bookkeeper.api import LedgerEntry, LedgerMetadata, LedgerState, NoSuchEntryError
from magnetar.managed_ledger.offload import (
    S3_DRIVERS,
    OffloadContext,
    OffloadError,
    OffloadNotFoundError,
    OffloadPolicies,
)
from magnetar.managed_ledger.offload_format import (
    BlockBuilder,
    CorruptObjectError,
    OffloadIndex,
    block_ref_of,
    decode_block,
    decode_data_header,
    decode_index,
    encode_data_header,
    encode_index,
    object_names,
)
from magnetar.runtime import BlockingExecutor

S3_PART_SIZE_MIN = 5 * 1024 * 1024
READ_AHEAD_BLOCKS = 4
BLOCK_CACHE_BLOCKS_MAX = 16
READ_BATCH_ENTRIES_MAX = 1000
OFFLOAD_THREADS = 2


def _describe(e: BaseException) -> str:
    if isinstance(e, PermissionError):
        return f"access denied ({e}); check the offload credentials"
    return f"{type(e).__name__}: {e}"


class BlobStoreOffloader:
    def __init__(self, policies: OffloadPolicies, fs: Any = None) -> None:
        policies.check()
        self._p = policies
        self._s3 = policies.driver.lower() in S3_DRIVERS
        self._fs, self._root = fs, ""
        if fs is None:
            self._fs, self._root = self._make_fs()
        self._executor = BlockingExecutor(f"offload-{self.driver_name}", OFFLOAD_THREADS)

    def _make_fs(self) -> tuple[Any, str]:
        p = self._p
        if self._s3:
            import s3fs

            fs = s3fs.S3FileSystem(
                key=p.credential_id or None,
                secret=p.credential_secret or None,
                endpoint_url=p.service_endpoint or None,
                client_kwargs={"region_name": p.region or "us-east-1"},
                config_kwargs={"connect_timeout": 5, "read_timeout": 60, "retries": {"max_attempts": 2}},
                skip_instance_cache=True,
            )
            fs.retries = 2  # s3fs's own retries of throttled/transient calls (default 5)
            return fs, p.bucket.strip("/")
        import fsspec.core

        fs, root = fsspec.core.url_to_fs(p.file_system_uri)
        fs.makedirs(root, exist_ok=True)
        return fs, root.rstrip("/")

    # -- identity ---------------------------------------------------------------------------

    @property
    def driver_name(self) -> str:
        return "aws-s3" if self._s3 else "filesystem"

    def driver_metadata(self) -> dict[str, str]:
        p = self._p
        if self._s3:
            return {"bucket": p.bucket, "region": p.region, "serviceEndpoint": p.service_endpoint}
        return {"fileSystemURI": p.file_system_uri}

    def _path(self, name: str) -> str:
        return f"{self._root}/{name}"

    async def run(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return await self._executor.run(fn, *args, **kwargs)

    # -- offload ------------------------------------------------------------------------------

    async def offload(self, handle: Any, uid: str, extra_metadata: Mapping[str, str]) -> None:
        lid = handle.ledger_id
        data_name, index_name = object_names(uid, lid)
        meta = _ledger_meta(handle, uid, extra_metadata)
        where = f"{self.driver_name} {self._root}"
        try:
            refs, length = await self._write_data(handle, self._path(data_name), meta)
            index = encode_index(meta, refs, length)
            await self.run(self._fs.pipe_file, self._path(index_name), index)
            await self._verify(lid, uid, index, length)
        except BaseException as e:
            await self._remove_quietly(data_name, index_name)
            if isinstance(e, (OffloadError, asyncio.CancelledError)):
                raise
            raise OffloadError(f"offload of ledger {lid} to {where} failed: {_describe(e)}") from e

    async def _write_data(self, handle: Any, path: str, meta: dict) -> tuple[list, int]:
        block_size = self._p.read_buffer_size_bytes
        kwargs = {"block_size": max(S3_PART_SIZE_MIN, self._p.max_block_size_bytes)} if self._s3 else {}
        f = await self.run(self._fs.open, path, "wb", **kwargs)
        try:
            header = encode_data_header(meta)
            await self.run(f.write, header)
            offset = len(header)
            refs = []
            builder = BlockBuilder(block_size)
            lac = handle.last_add_confirmed
            avg = max(1, handle.length // (lac + 1)) if lac >= 0 else 1
            batch = max(1, min(READ_BATCH_ENTRIES_MAX, block_size // avg))
            first = 0
            while first <= lac:
                last = min(lac, first + batch - 1)
                for e in await handle.read(first, last):
                    block = builder.add(e.entry_id, e.data)
                    if block is not None:
                        refs.append(block_ref_of(block, offset))
                        await self.run(f.write, block)
                        offset += len(block)
                first = last + 1
            block = builder.flush()
            if block is not None:
                refs.append(block_ref_of(block, offset))
                await self.run(f.write, block)
                offset += len(block)
            await self.run(f.close)
        except BaseException:
            await self.run(_abort, f)
            raise
        return refs, offset

    async def _verify(self, ledger_id: int, uid: str, index: bytes, length: int) -> None:
        data_name, index_name = object_names(uid, ledger_id)
        size = (await self.run(self._fs.info, self._path(data_name)))["size"]
        if size != length:
            raise OffloadError(f"verify: data object is {size} bytes, wrote {length}")
        back = await self.run(self._fs.cat_file, self._path(index_name))
        if back != index:
            raise OffloadError("verify: index object read back differs from what was written")
        head = await self.run(self._fs.cat_file, self._path(data_name), start=0, end=min(length, 64 * 1024))
        decode_data_header(head)

    # -- read / delete ------------------------------------------------------------------------

    async def read_offloaded(
        self, ledger_id: int, uid: str, driver_metadata: Mapping[str, str] | None = None
    ) -> OffloadedReadHandle:
        data_name, index_name = object_names(uid, ledger_id)
        try:
            raw = await self.run(self._fs.cat_file, self._path(index_name))
            index = decode_index(raw)
            if index.meta.get("ledgerId") != ledger_id or index.meta.get("uid") != uid:
                raise CorruptObjectError(f"index object {index_name} describes another ledger")
            size = (await self.run(self._fs.info, self._path(data_name)))["size"]
        except FileNotFoundError as e:
            raise OffloadNotFoundError(
                f"offloaded ledger {ledger_id} ({uid}) is missing an object in {self._root}: {e}"
            ) from e
        except OffloadError:
            raise
        except Exception as e:
            raise OffloadError(f"cannot open offloaded ledger {ledger_id}: {_describe(e)}") from e
        if size != index.data_length:
            raise CorruptObjectError(
                f"data object of ledger {ledger_id} is {size} bytes, its index says {index.data_length}"
            )
        return OffloadedReadHandle(self, ledger_id, self._path(data_name), index)

    async def delete_offloaded(
        self, ledger_id: int, uid: str, driver_metadata: Mapping[str, str] | None = None
    ) -> None:
        data_name, index_name = object_names(uid, ledger_id)
        for name in (index_name, data_name):
            try:
                await self.run(self._fs.rm_file, self._path(name))
            except FileNotFoundError:
                pass
            except Exception as e:
                raise OffloadError(f"cannot delete {name}: {_describe(e)}") from e

    async def _remove_quietly(self, *names: str) -> None:
        for name in names:
            try:
                await self.run(self._fs.rm_file, self._path(name))
            except Exception:  # noqa: BLE001 - best effort: the retry uses a new uid anyway
                pass

    async def aclose(self) -> None:
        await self._executor.aclose()


def _abort(f: Any) -> None:
    """Abandon a half-written file (an S3 multipart upload is aborted, not completed)."""
    try:
        if hasattr(f, "discard"):
            f.discard()
        else:
            f.close()
    except Exception:  # noqa: BLE001 - the write already failed; the caller reports that
        pass


def _ledger_meta(handle: Any, uid: str, extra: Mapping[str, str]) -> dict:
    md = handle.metadata
    out: dict[str, Any] = {
        "ledgerId": handle.ledger_id,
        "uid": uid,
        "lastEntryId": handle.last_add_confirmed,
        "length": handle.length,
        "extra": dict(extra),
    }
    if md is not None:
        out.update(
            ensembleSize=md.ensemble_size,
            writeQuorum=md.write_quorum,
            ackQuorum=md.ack_quorum,
            ctime=md.ctime_ms,
            ensembles=[[first, list(e)] for first, e in md.ensembles],
            customMetadata={k: v.decode("utf-8", "replace") for k, v in md.custom_metadata.items()},
        )
    return out


class OffloadedReadHandle:
    """A ReadHandle over an offloaded ledger (closed; its LAC is its last entry)."""

    def __init__(self, owner: BlobStoreOffloader, ledger_id: int, path: str, index: OffloadIndex) -> None:
        self._owner = owner
        self._ledger_id = ledger_id
        self._path = path
        self._index = index
        m = index.meta
        self._lac = int(m.get("lastEntryId", -1))
        self._length = int(m.get("length", 0))
        self._metadata = LedgerMetadata(
            ledger_id=ledger_id,
            ensemble_size=int(m.get("ensembleSize", 1)),
            write_quorum=int(m.get("writeQuorum", 1)),
            ack_quorum=int(m.get("ackQuorum", 1)),
            state=LedgerState.CLOSED,
            ensembles=tuple((int(f), tuple(e)) for f, e in m.get("ensembles", [])),
            last_entry_id=self._lac,
            length=self._length,
            ctime_ms=int(m.get("ctime", 0)),
        )
        self._blocks: OrderedDict[int, list[tuple[int, bytes]]] = OrderedDict()
        self._next_entry = -1
        self._lock = asyncio.Lock()
        self.blocks_fetched = 0
        self.range_gets = 0

    @property
    def ledger_id(self) -> int:
        return self._ledger_id

    @property
    def metadata(self) -> LedgerMetadata:
        return self._metadata

    @property
    def last_add_confirmed(self) -> int:
        return self._lac

    @property
    def length(self) -> int:
        return self._length

    async def read_last_add_confirmed(self) -> int:
        return self._lac

    async def read(self, first_entry_id: int, last_entry_id: int) -> list[LedgerEntry]:
        if first_entry_id < 0 or last_entry_id > self._lac or first_entry_id > last_entry_id:
            raise NoSuchEntryError(
                f"offloaded ledger {self._ledger_id} has entries 0..{self._lac}, "
                f"asked {first_entry_id}..{last_entry_id}"
            )
        async with self._lock:
            wanted = self._index.blocks_for(first_entry_id, last_entry_id)
            missing = [i for i in wanted if i not in self._blocks]
            if missing:
                last = missing[-1]
                if first_entry_id == self._next_entry:  # sequential: read ahead
                    last = min(len(self._index.blocks) - 1, last + READ_AHEAD_BLOCKS)
                await self._fetch(missing[0], last)
            self._next_entry = last_entry_id + 1
            out = []
            for i in wanted:
                self._blocks.move_to_end(i)
                block = self._blocks[i]  # contiguous entry ids: slice, don't scan
                base = block[0][0]
                lo, hi = max(first_entry_id, base) - base, min(last_entry_id, block[-1][0]) - base
                out += [LedgerEntry(self._ledger_id, eid, data) for eid, data in block[lo : hi + 1]]
            return out

    async def _fetch(self, first_block: int, last_block: int) -> None:
        refs = self._index.blocks[first_block : last_block + 1]
        start, end = refs[0].offset, refs[-1].offset + refs[-1].length
        try:
            raw = await self._owner.run(self._owner._fs.cat_file, self._path, start=start, end=end)
        except FileNotFoundError as e:
            raise OffloadNotFoundError(f"data object of offloaded ledger {self._ledger_id} is missing") from e
        except Exception as e:
            raise OffloadError(f"read of offloaded ledger {self._ledger_id} failed: {_describe(e)}") from e
        self.range_gets += 1
        for i, ref in enumerate(refs, start=first_block):
            lo = ref.offset - start
            self._blocks[i] = decode_block(raw[lo : lo + ref.length], ref)
            self.blocks_fetched += 1
        while len(self._blocks) > max(BLOCK_CACHE_BLOCKS_MAX, len(refs)):
            self._blocks.popitem(last=False)

    async def close(self) -> None:
        self._blocks.clear()


def _storage_key(p: OffloadPolicies) -> OffloadPolicies:
    """The fields that pick a storage target (thresholds and lag do not)."""
    driver = "aws-s3" if p.driver.lower() in S3_DRIVERS else p.driver.lower()
    return replace(p, driver=driver, threshold_bytes=-1, threshold_s=-1, deletion_lag_ms=0)


def _target(p: OffloadPolicies) -> tuple[str, ...]:
    if p.driver in S3_DRIVERS:
        return ("aws-s3", p.bucket, p.region, p.service_endpoint)
    return (p.driver, p.file_system_uri)


def _context_target(ctx: OffloadContext) -> tuple[str, ...]:
    md = ctx.metadata()
    if ctx.driver_name in S3_DRIVERS:
        return ("aws-s3", md.get("bucket", ""), md.get("region", ""), md.get("serviceEndpoint", ""))
    return (ctx.driver_name, md.get("fileSystemURI", ""))


class OffloaderRegistry:
    """One offloader per storage target; ``defaults`` (the broker's keys) supply credentials."""

    def __init__(self, defaults: OffloadPolicies | None = None) -> None:
        self.defaults = defaults or OffloadPolicies()
        self._by_key: dict[OffloadPolicies, BlobStoreOffloader] = {}

    def for_policies(self, p: OffloadPolicies) -> BlobStoreOffloader:
        key = _storage_key(p)
        off = self._by_key.get(key)
        if off is None:
            off = BlobStoreOffloader(p)
            self._by_key[key] = off
        return off

    def for_context(self, ctx: OffloadContext, hint: OffloadPolicies | None = None) -> BlobStoreOffloader:
        """The offloader holding ``ctx``'s objects: ``hint`` (the policies in force, with their
        credentials) when it names the same place, else one with the broker's credentials."""
        md = ctx.metadata()
        if hint is not None and hint.enabled and _target(_storage_key(hint)) == _context_target(ctx):
            return self.for_policies(hint)
        d = self.defaults
        same = d.driver.lower() in S3_DRIVERS if ctx.driver_name in S3_DRIVERS else d.driver == "filesystem"
        base = d if same else OffloadPolicies()
        p = replace(
            base,
            driver=ctx.driver_name,
            bucket=md.get("bucket", ""),
            region=md.get("region", ""),
            service_endpoint=md.get("serviceEndpoint", ""),
            file_system_uri=md.get("fileSystemURI", ""),
        )
        return self.for_policies(p)

    async def aclose(self) -> None:
        offs, self._by_key = list(self._by_key.values()), {}
        for off in offs:
            await off.aclose()
