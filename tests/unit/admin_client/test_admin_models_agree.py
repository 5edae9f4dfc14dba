"""The admin client's dataclass bodies and the broker's pydantic bodies describe the same JSON.

The two sets of models are still written twice (the client keeps snake_case
attributes and no pydantic dependency in its public types); this test is what
keeps them from drifting: same JSON names, same enum values, and what the
client sends is what the broker stores back -- with default values and with
every field set to a non-default one -- and every broker field is one the
client writes (or is named as client-less).
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

import pytest
from pydantic import BaseModel

from magnetar.admin_client import models as client
from magnetar.broker.admin import models as server

PAIRS = sorted(
    name
    for name, obj in vars(client).items()
    if dataclasses.is_dataclass(obj)
    and hasattr(obj, "to_json")
    and isinstance(getattr(server, name, None), type)
    and issubclass(getattr(server, name), BaseModel)
)
ENUMS = {
    "AuthAction": "AuthAction",
    "BacklogQuotaType": "BacklogQuotaType",
    "BacklogQuotaPolicy": "RetentionPolicyAction",
    "SchemaCompatibilityStrategy": "SchemaCompatibilityStrategy",
    "SubscriptionType": "SubscriptionType",
    "InactiveTopicDeleteMode": "InactiveTopicDeleteMode",
}


def test_the_shared_bodies_are_found() -> None:
    assert len(PAIRS) >= 10, PAIRS


@pytest.mark.parametrize("name", PAIRS)
def test_same_json_names_and_round_trip(name: str) -> None:
    cls = getattr(client, name)
    ours = cls(ledger_id=3, entry_id=7) if name == "ResetCursorData" else cls()
    body = {k: v for k, v in ours.to_json().items() if v is not None}
    model: type[BaseModel] = getattr(server, name)
    names = {f.alias or n for n, f in model.model_fields.items()}
    assert set(body) <= names, (name, set(body) - names)
    stored = server.dump(model.model_validate(body))
    for key, value in body.items():
        want = [str(v) for v in value] if isinstance(value, list | tuple) else value
        got = stored[key]
        got = [str(v) for v in got] if isinstance(got, list | tuple) else got
        assert got == want, (name, key, got, want)


@pytest.mark.parametrize(("ours", "theirs"), sorted(ENUMS.items()))
def test_same_enum_values(ours: str, theirs: str) -> None:
    a: type[enum.Enum] = getattr(client, ours)
    b: type[enum.Enum] = getattr(server, theirs)
    assert {m.value for m in a} == {m.value for m in b}, (ours, theirs)


# (client instance with every field set to a non-default value, the server model)
SET_PAIRS: list[tuple[Any, type]] = [
    (client.TenantInfo(("r1",), ("c1",)), server.TenantInfo),
    (
        client.ClusterData(
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
        ),
        server.ClusterData,
    ),
    (client.RetentionPolicies(10, 20), server.RetentionPolicies),
    (client.BacklogQuota(1000, 60, client.BacklogQuotaPolicy.PRODUCER_EXCEPTION), server.BacklogQuota),
    (client.PersistencePolicies(3, 3, 2, 1.5), server.PersistencePolicies),
    (client.DispatchRate(100, 2000, True, 5), server.DispatchRate),
    (client.PublishRate(100, 2000), server.PublishRate),
    (client.SubscribeRate(7, 10), server.SubscribeRate),
    (
        client.InactiveTopicPolicies(
            client.InactiveTopicDeleteMode.DELETE_WHEN_SUBSCRIPTIONS_CAUGHT_UP, 30, True
        ),
        server.InactiveTopicPolicies,
    ),
    (client.DelayedDeliveryPolicies(500, False, 9000), server.DelayedDeliveryPolicies),
    (client.AutoTopicCreationOverride(True, "partitioned", 3), server.AutoTopicCreationOverride),
    (client.MessageId(5, 6, 2, 1), server.MessageIdData),
    (client.ResetCursorData(5, 6, 2, True, 1, {"a": "b"}), server.ResetCursorData),
]


def _server_names(model: type) -> set[str]:
    return {f.alias or name for name, f in model.model_fields.items()}  # type: ignore[attr-defined]


@pytest.mark.parametrize(("body", "model"), SET_PAIRS, ids=lambda x: getattr(x, "__name__", type(x).__name__))
def test_every_client_key_is_a_server_field(body: Any, model: type) -> None:
    sent = body.to_json()
    unknown = sorted(set(sent) - _server_names(model))
    assert not unknown, f"{type(body).__name__} writes {unknown}, which {model.__name__} does not declare"


@pytest.mark.parametrize(("body", "model"), SET_PAIRS, ids=lambda x: getattr(x, "__name__", type(x).__name__))
def test_the_server_reads_back_what_the_client_sent(body: Any, model: type) -> None:
    sent = body.to_json()
    stored = server.dump(model.model_validate(sent))  # type: ignore[attr-defined]
    assert {k: stored[k] for k in sent} == sent


@pytest.mark.parametrize(("body", "model"), SET_PAIRS, ids=lambda x: getattr(x, "__name__", type(x).__name__))
def test_the_client_writes_every_server_field_it_models(body: Any, model: type) -> None:
    """The other direction: a server field the client has no field for is named here."""
    not_in_client = {
        "ClusterData": {"brokerClientTlsEnabled", "tlsAllowInsecureConnection"},
    }
    missing = _server_names(model) - set(body.to_json()) - not_in_client.get(model.__name__, set())
    assert not missing, f"{model.__name__} has {sorted(missing)} that {type(body).__name__} never writes"
