"""The admin REST bodies have one source: ``common.rest_models``, used by the broker, the client and the CLI.

* the admin client's model names *are* the shared classes (identity, not copies);
* no other module of the admin client, the CLI, the web layer or ``broker.admin``
  declares a pydantic body or a ``to_json`` dataclass of its own;
* every JSON body a web route reads is a shared class (or a plain JSON type);
* every body round-trips client -> server -> client with every field set to a
  non-default value (what the client sends is what the broker stores and
  answers, and the client reads the answer back to an equal value), and with
  the defaults;
* wire names stay Pulsar's (camelCase, with its historic spellings).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import typing
from pathlib import Path
from typing import Any

import pytest
from fastapi.routing import APIRoute
from pydantic import BaseModel, TypeAdapter

from magnetar.admin_client import models as client
from magnetar.broker.admin.policies import parse_value
from magnetar.common import rest_models as shared
from magnetar.common.errors import InvalidArgument
from magnetar.web.app import ADMIN_ROUTER_MODULES, CORE_ROUTERS

SRC = Path(shared.__file__).resolve().parents[1]
BODIES = shared.bodies()

# One instance per body with every field set to a value other than its default.
EVERY_FIELD_SET: dict[str, Any] = {
    "TenantInfo": shared.TenantInfo(("r1",), ("c1",)),
    "ClusterData": shared.ClusterData(
        "http://a:8080",
        "https://a:8443",
        "pulsar://a:6650",
        "pulsar+ssl://a:6651",
        "pulsar://p:6650",
        "SNI",
        ("c2",),
        "org.example.Auth",
        "k=v",
        "internal",
        True,
        True,
    ),
    "FailureDomain": shared.FailureDomain(brokers=("b1:8080",)),
    "AutoFailoverPolicy": shared.AutoFailoverPolicy(policy_type="other", parameters={"min_limit": "1"}),
    "NamespaceIsolationData": shared.NamespaceIsolationData(
        ("t/ns",), ("b1.*",), ("b2.*",), shared.AutoFailoverPolicy("other", {"usage_threshold": "80"})
    ),
    "BookieInfo": shared.BookieInfo("/r1", "bk1"),
    "BookieAffinityGroupData": shared.BookieAffinityGroupData("g1", "g2"),
    "BundlesData": shared.BundlesData(("0x00000000", "0xffffffff"), 1),
    "RetentionPolicies": shared.RetentionPolicies(10, 20),
    "BacklogQuota": shared.BacklogQuota(1000, 60, shared.BacklogQuotaPolicy.PRODUCER_EXCEPTION),
    "PersistencePolicies": shared.PersistencePolicies(5, 3, 1, 1.5),
    "DispatchRate": shared.DispatchRate(100, 2000, True, 5),
    "PublishRate": shared.PublishRate(100, 2000),
    "SubscribeRate": shared.SubscribeRate(7, 10),
    "InactiveTopicPolicies": shared.InactiveTopicPolicies(
        shared.InactiveTopicDeleteMode.DELETE_WHEN_SUBSCRIPTIONS_CAUGHT_UP, 30, False
    ),
    "DelayedDeliveryPolicies": shared.DelayedDeliveryPolicies(500, False, 9000),
    "AutoTopicCreationOverride": shared.AutoTopicCreationOverride(False, "partitioned", 3),
    "AutoSubscriptionCreationOverride": shared.AutoSubscriptionCreationOverride(True),
    "OffloadPolicies": shared.OffloadPolicies("S3", 10, 20, 30),
    "EntryFilters": shared.EntryFilters("f1,f2"),
    "ResourceGroup": shared.ResourceGroup(200, 4096, 100, 2048),
    "MessageId": shared.MessageId(5, 6, 2, 1),
    "ResetCursorData": shared.ResetCursorData(5, 6, 2, True, 1, {"a": "b"}),
}


def _defaults(cls: type[shared.RestBody]) -> shared.RestBody:
    required = {
        "MessageId": {"ledger_id": 1, "entry_id": 2},
        "AutoTopicCreationOverride": {"topic_type": "non-partitioned"},
        "AutoSubscriptionCreationOverride": {"allow_auto_subscription_creation": False},
    }
    return cls(**required.get(cls.__name__, {}))


def test_every_body_has_an_every_field_sample() -> None:
    assert set(EVERY_FIELD_SET) == set(BODIES), set(EVERY_FIELD_SET) ^ set(BODIES)
    for name, body in EVERY_FIELD_SET.items():
        default = _defaults(BODIES[name])
        same = [f for f in type(body).model_fields if getattr(body, f) == getattr(default, f)]
        assert not same, f"{name}: {same} left at their default"


def test_the_client_names_are_the_shared_classes() -> None:
    exported = [n for n in client.__all__ if n in vars(shared)]
    assert len(exported) >= 20, exported
    for name in exported:
        assert getattr(client, name) is getattr(shared, name), name
    import magnetar.admin_client as pkg

    for name in pkg.__all__:
        if name in vars(shared):
            assert getattr(pkg, name) is getattr(shared, name), name


def _own_bodies(path: Path) -> list[str]:
    """Classes in one file that are a body of their own: a pydantic model or a ``to_json`` class."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        bases = {ast.unparse(b) for b in node.bases}
        methods = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
        if bases & {"BaseModel", "RestBody", "m.RestBody", "shared.RestBody", "_Body", "m._Body"} or (
            "to_json" in methods and "from_json" in methods
        ):
            found.append(f"{path.relative_to(SRC)}::{node.name}")
    return found


def test_no_other_module_declares_a_rest_body() -> None:
    roots = ["admin_client", "cli/admin", "web", "broker/admin"]
    found = [c for root in roots for p in sorted((SRC / root).rglob("*.py")) for c in _own_bodies(p)]
    assert not found, f"REST bodies outside common/rest_models.py: {found}"
    assert not (SRC / "broker" / "admin" / "models.py").exists()


def _body_types(annotation: Any) -> list[type]:
    out: list[type] = []
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            out.append(annotation)
        return out
    for arg in typing.get_args(annotation):
        out += _body_types(arg)
    return out


def test_every_web_body_is_a_shared_class() -> None:
    routers = list(CORE_ROUTERS) + [importlib.import_module(m).router for m in ADMIN_ROUTER_MODULES]
    seen: set[type] = set()
    for router in routers:
        for route in router.routes:
            if not isinstance(route, APIRoute):
                continue
            for param in inspect.signature(route.endpoint).parameters.values():
                for t in _body_types(param.annotation if not isinstance(param.annotation, str) else Any):
                    seen.add(t)
                    assert t.__module__ == shared.__name__, (route.path, t)
            hints = typing.get_type_hints(route.endpoint)
            for t in [t for h in hints.values() for t in _body_types(h)]:
                seen.add(t)
                assert t.__module__ == shared.__name__, (route.path, t)
    assert {"TenantInfo", "ClusterData", "ResetCursorData", "BacklogQuota", "BookieInfo"} <= {
        t.__name__ for t in seen
    }


@pytest.mark.parametrize("name", sorted(EVERY_FIELD_SET))
def test_round_trip_client_server_client(name: str) -> None:
    for body in (EVERY_FIELD_SET[name], _defaults(BODIES[name])):
        cls = type(body)
        sent = body.to_json()
        assert set(sent) <= shared.wire_names(cls), set(sent) - shared.wire_names(cls)
        received = TypeAdapter(cls).validate_python(sent)  # as FastAPI reads a request body
        stored = shared.dump(received)
        assert set(stored) >= set(sent)
        assert {k: stored[k] for k in sent} == sent
        assert cls.from_json(stored) == body  # the client reads the broker's answer back
        if issubclass(cls, shared.RestBody) and name not in {"BundlesData", "FailureDomain"}:
            assert parse_value(cls, sent) == stored  # the policy path stores the same document


def test_wire_names_are_pulsars() -> None:
    assert shared.wire_names(shared.RetentionPolicies) == {"retentionTimeInMinutes", "retentionSizeInMB"}
    assert "tickTime" in shared.wire_names(shared.DelayedDeliveryPolicies)
    assert shared.ResetCursorData(1, 2).to_json() == {
        "ledgerId": 1,
        "entryId": 2,
        "partitionIndex": -1,
        "isExcluded": False,
        "batchIndex": -1,
    }
    assert shared.BacklogQuota.from_json({"limit": 10}).limit_size == 10  # Pulsar's pre-2.9 name
    assert shared.MessageId.from_json({"ledgerId": 3}) == shared.MessageId(3, -1)


def test_bad_bodies_fail_as_invalid_argument_in_python_and_400_on_the_wire() -> None:
    with pytest.raises(InvalidArgument):
        shared.PersistencePolicies(1, 2, 1)
    with pytest.raises(InvalidArgument):
        shared.AutoTopicCreationOverride(True, "partitioned")
    from magnetar.broker.admin.policies import BadBodyError

    with pytest.raises(BadBodyError, match="Ensemble"):
        parse_value(shared.PersistencePolicies, {"bookkeeperEnsemble": 1, "bookkeeperWriteQuorum": 2})


def test_enums_keep_pulsars_values() -> None:
    assert [str(x) for x in shared.SubscriptionType] == ["Exclusive", "Shared", "Failover", "Key_Shared"]
    assert shared.SubscriptionAuthMode.NONE == "None"
    assert shared.RetentionPolicyAction is shared.BacklogQuotaPolicy
