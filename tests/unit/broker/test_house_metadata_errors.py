"""Typed metadata errors (issue 14): a metadata failure is not "not found".

A failure-domain listing whose ``children`` read fails (lost session, connection loss) must
fail with that error, not answer "no domains"; with the node simply absent it is empty.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from magnetar.broker import errors
from magnetar.broker.admin.isolation import IsolationAdmin
from magnetar.broker.resources import BrokerResources, initialize_cluster
from magnetar.metadata import api as md
from magnetar.metadata.memory import MemoryMetadataServer
from magnetar.testing.faults import FaultPlan
from magnetar.testing.metadata_faults import FaultInjectingMetadataStore


@pytest.fixture
async def setup():
    inner = MemoryMetadataServer().session()
    plan = FaultPlan()
    store = FaultInjectingMetadataStore(inner, plan)
    res = BrokerResources(store)  # type: ignore[arg-type]
    await initialize_cluster(res, "standalone", "http://h:8080", "pulsar://h:6650")
    yield IsolationAdmin(SimpleNamespace(resources=res)), plan
    await inner.aclose()


async def test_absent_node_is_no_domains(setup) -> None:
    admin, _ = setup
    assert await admin.failure_domains("standalone") == {}


async def test_lost_session_is_an_error_not_no_domains(setup) -> None:
    admin, plan = setup
    plan.fail("children", "*failureDomain*", error=md.SessionExpired("session expired"))
    with pytest.raises(md.SessionExpired):
        await admin.failure_domains("standalone")
    # ... which the REST boundary answers as "service not ready", not 404.
    assert isinstance(errors.translate(md.SessionExpired("x")), errors.ServiceNotReadyError)
