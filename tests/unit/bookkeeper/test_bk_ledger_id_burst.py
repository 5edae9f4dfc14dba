"""A burst of ledger creations in one process (10,000 topics created at once) gets distinct ids
and no "too much contention" error, even over a store whose calls yield to the loop (RocksDB's
run on threads); found by benchmarks/topic_memory_bench.py."""

from __future__ import annotations

import asyncio
from typing import Any

from magnetar.bookkeeper.metadata import LedgerMetadataStore
from magnetar.metadata.memory import MemoryMetadataServer


class _Yielding:
    """Every call lets other tasks run first, as a store on an executor thread does."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def get(self, path: str) -> Any:
        await asyncio.sleep(0)
        return await self._inner.get(path)

    async def put(self, path: str, value: bytes, expected_version: int | None = None) -> Any:
        await asyncio.sleep(0)
        return await self._inner.put(path, value, expected_version)


async def test_concurrent_ledger_ids_are_distinct_without_contention_errors() -> None:
    store = LedgerMetadataStore(_Yielding(MemoryMetadataServer().session()), retries_max=4)  # type: ignore[arg-type]
    ids = await asyncio.gather(*(store.next_ledger_id() for _ in range(200)))
    assert sorted(ids) == list(range(200))
