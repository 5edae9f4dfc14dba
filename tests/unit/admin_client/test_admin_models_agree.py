"""The admin client's dataclass bodies and the broker's pydantic bodies describe the same JSON.

The two sets of models are still written twice (the client keeps snake_case
attributes and no pydantic dependency in its public types); this test is what
keeps them from drifting: same JSON names, same enum values, and what the
client sends is what the broker stores back.
"""

from __future__ import annotations

import dataclasses
import enum

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
