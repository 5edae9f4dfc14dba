"""A cancellation that arrives together with ZooKeeper's answer is not lost.

On Python 3.11 ``asyncio.wait_for`` returns the inner result when the awaiting task is
cancelled in the same loop iteration as the answer lands, and the task runs on: the
broker's load-report loop survived its ``cancel()`` that way.  ``ZKMetadataStore._call``
(and the lock's waits) use ``asyncio.timeout`` instead.  The fake kazoo client answers at
once; the task is cancelled after 0..7 loop iterations, i.e. before, with and after the
answer, and must end cancelled every time (or have returned before the cancel).
"""

from __future__ import annotations

import asyncio

import pytest

from magnetar.metadata.api import MetadataTimeout
from magnetar.metadata.zookeeper import ZKMetadataStore
from magnetar.runtime import BlockingExecutor, RealClock


class _Answer:
    def __init__(self, value: object) -> None:
        self.value = value

    def get_nowait(self) -> object:
        return self.value

    def rawlink(self, callback) -> None:  # noqa: ANN001 - kazoo calls it on its thread
        callback(self)


class _Silent(_Answer):
    def rawlink(self, callback) -> None:  # noqa: ANN001
        pass


class _FakeKazoo:
    client_id = (1, b"")
    hosts = [("127.0.0.1", 2181)]
    chroot = ""
    silent = False

    def get_children_async(self, path: str, watch=None) -> _Answer:  # noqa: ANN001
        return _Silent([]) if self.silent else _Answer(["a", "b"])


async def _store(operation_timeout_ms: int = 30_000) -> tuple[ZKMetadataStore, BlockingExecutor]:
    executor = BlockingExecutor("test-zk", 1)
    store = ZKMetadataStore(
        _FakeKazoo(),  # type: ignore[arg-type]
        clock=RealClock(),
        session_timeout_ms=30_000,
        operation_timeout_ms=operation_timeout_ms,
        executor=executor,
    )
    return store, executor


async def test_cancel_at_any_moment_around_the_answer_is_delivered() -> None:
    store, executor = await _store()
    try:
        for iterations in range(8):
            rounds = 0

            async def loop() -> None:  # a loop like the load-report loop
                nonlocal rounds
                while True:
                    await store._call("/x", "get_children_async", "/x")
                    rounds += 1
                    await asyncio.sleep(0)

            task = asyncio.create_task(loop())
            for _ in range(iterations):
                await asyncio.sleep(0)
            task.cancel()
            done, _ = await asyncio.wait([task], timeout=2)
            assert done, f"cancel after {iterations} iterations was swallowed: the loop runs on ({rounds})"
            assert task.cancelled()
    finally:
        await executor.aclose()


async def test_no_answer_is_still_a_metadata_timeout() -> None:
    store, executor = await _store(operation_timeout_ms=50)
    store._client.silent = True  # type: ignore[attr-defined]
    try:
        with pytest.raises(MetadataTimeout):
            await store._call("/x", "get_children_async", "/x")
    finally:
        await executor.aclose()
