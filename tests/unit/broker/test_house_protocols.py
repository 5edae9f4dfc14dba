"""Both topic kinds, both subscription kinds and the connection provide their narrow protocol
(``magnetar.broker.service.api``): every method and property as a class member, every field
declared by the class itself (``self.<field>`` in its own code or a base's)."""

from __future__ import annotations

import ast
import inspect
import textwrap

import pytest

from magnetar.broker.service import api
from magnetar.broker.service.broker_service import BrokerService
from magnetar.broker.service.connection import Connection as ServerConnection
from magnetar.broker.service.nonpersistent_topic import NonPersistentSubscription, NonPersistentTopic
from magnetar.broker.service.subscription import Subscription
from magnetar.broker.service.topic import PersistentTopic
from magnetar.broker.service.topics import TopicRegistry


def _protocol_members(proto: type) -> tuple[set[str], set[str]]:
    fields = set(getattr(proto, "__annotations__", {}))
    callables = {
        name
        for name, value in vars(proto).items()
        if not name.startswith("_") and (callable(value) or isinstance(value, property))
    }
    return fields, callables


def _self_fields(cls: type) -> set[str]:
    out: set[str] = set()
    for klass in cls.__mro__:
        if klass is object:
            continue
        tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                if isinstance(node.value, ast.Name) and node.value.id == "self":
                    out.add(node.attr)
    return out


@pytest.mark.parametrize(
    ("proto", "cls"),
    [
        (api.Topic, PersistentTopic),
        (api.Topic, NonPersistentTopic),
        (api.Subscription, Subscription),
        (api.Subscription, NonPersistentSubscription),
        (api.Connection, ServerConnection),
        (api.BrokerServiceView, BrokerService),
        (api.LoadedTopics, TopicRegistry),
    ],
)
def test_implements(proto: type, cls: type) -> None:
    fields, callables = _protocol_members(proto)
    missing_calls = sorted(c for c in callables if not hasattr(cls, c))
    assert not missing_calls, f"{cls.__name__} lacks {missing_calls} of {proto.__name__}"
    declared = _self_fields(cls) | set(dir(cls))
    missing_fields = sorted(f for f in fields if f not in declared)
    assert not missing_fields, f"{cls.__name__} does not declare {missing_fields} of {proto.__name__}"


def test_the_check_can_fail() -> None:
    class Half:
        def __init__(self) -> None:
            self.name = "x"

    fields, callables = _protocol_members(api.Topic)
    assert "add_entry" in callables and "policies" in fields
    assert not hasattr(Half, "add_entry") and "policies" not in _self_fields(Half)


def test_admin_uses_only_the_broker_service_view() -> None:
    """``broker.admin`` reaches the broker service only through ``BrokerServiceView``."""
    import re
    from pathlib import Path

    fields, callables = _protocol_members(api.BrokerServiceView)
    allowed = fields | callables
    admin_dir = Path(api.__file__).resolve().parents[1] / "admin"
    used: dict[str, str] = {}
    for path in admin_dir.glob("*.py"):
        for m in re.finditer(r"\b(?:self\._svc|self\.svc|svc)\.([A-Za-z_]\w*)", path.read_text()):
            used.setdefault(m.group(1), path.name)
    assert used, "no use of the service found: the pattern is wrong"
    outside = {name: where for name, where in used.items() if name not in allowed}
    assert not outside, f"broker.admin uses service members outside BrokerServiceView: {outside}"
