"""Shared fixtures: a registry on the in-memory metadata store, and schema infos built by the
official client's schema classes (``pulsar.schema``), so definitions are exactly what a
Python producer sends in PRODUCER."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from magnetar.broker.schema import SchemaInfo, SchemaRegistry, SchemaRegistryConfig, SchemaType
from magnetar.metadata.memory import MemoryMetadataServer
from magnetar.testing.clock import ManualClock

pulsar_schema = pytest.importorskip("pulsar.schema")


def client_schema_info(schema: object) -> SchemaInfo:
    """What the official client would put in the PRODUCER ``schema`` field."""
    si = schema.schema_info()  # type: ignore[attr-defined]
    return SchemaInfo(si.name(), SchemaType[si.schema_type().name], si.schema().encode(), {})


@pytest.fixture
def avro() -> Callable[[type], SchemaInfo]:
    return lambda record_cls: client_schema_info(pulsar_schema.AvroSchema(record_cls))


@pytest.fixture
def json_schema() -> Callable[[type], SchemaInfo]:
    return lambda record_cls: client_schema_info(pulsar_schema.JsonSchema(record_cls))


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def server(clock: ManualClock) -> MemoryMetadataServer:
    return MemoryMetadataServer(clock=clock)


@pytest.fixture
def registry(server: MemoryMetadataServer, clock: ManualClock) -> SchemaRegistry:
    return SchemaRegistry(server.session(), clock, SchemaRegistryConfig())
