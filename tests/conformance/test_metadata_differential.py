"""Differential conformance: random operation scripts give identical answers on every backend.

Memory is the reference; RocksDB (hypothesis-generated scripts) and ZooKeeper
(seeded scripts) must agree with it operation by operation -- values,
versions, error kinds, children lists, and even sequential node names
(derived from the parent's child version, as ZooKeeper does).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from magnetar.metadata.memory import MemoryMetadataServer
from magnetar.metadata.rocksdb import RocksdbMetadataServer
from magnetar.runtime import RealClock, Rng
from magnetar.testing.metadata_conformance import random_op_script, run_op_script
from magnetar.testing.zookeeper import zookeeper_server_fixture  # noqa: F401 - fixture


async def _reference(ops) -> list:
    return await run_op_script(MemoryMetadataServer().session(), "/diff", ops)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32))
async def test_rocksdb_agrees_with_memory(tmp_path_factory, seed) -> None:
    ops = random_op_script(Rng(seed), 60)
    server = await RocksdbMetadataServer.open(str(tmp_path_factory.mktemp("diff")), clock=RealClock())
    try:
        got = await run_op_script(server.session(), "/diff", ops)
    finally:
        await server.aclose()
    assert got == await _reference(ops)


@pytest.mark.zookeeper
@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_zookeeper_agrees_with_memory(zookeeper_server, seed) -> None:
    from magnetar.metadata.factory import create_metadata_store

    ops = random_op_script(Rng(seed), 150)
    store = await create_metadata_store(f"{zookeeper_server.url}/diff-{seed}", clock=RealClock())
    try:
        got = await run_op_script(store, "/diff", ops)
    finally:
        await store.aclose()
    expected = await _reference(ops)
    for i, (op, a, b) in enumerate(zip(ops, got, expected, strict=True)):
        assert a == b, f"op {i} {op}: zookeeper {a!r} != memory {b!r}"
