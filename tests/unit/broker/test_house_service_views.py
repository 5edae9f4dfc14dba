"""The web layer, the transaction service and broker.auth see the broker service only through narrow views.

``broker.service.api`` declares what each may use: ``WebBrokerView`` (routes,
HTTP lookup, WebSocket sessions), ``MetricsSource`` (the ``/metrics``
collectors), ``TransactionHost`` (``broker.transaction``), ``LoadBalanceHost``
(``broker.loadbalance``), ``ReplicationHost`` (``broker.replication``) and
``ownership.api.BrokerFace`` (``broker.ownership``); ``broker.auth`` may use
nothing of it.  This test reads every module of those packages, finds
each member reached on the broker service -- ``broker(request).x``,
``svc.x``, ``self.service.x``, ``self.svc.x``, ``getattr(svc, "x")``... -- and
fails on a member outside the module's view.  It also fails when the service
is reached another way than through those names (``app.state.broker_service.x``
or a nested ``getattr``), so a new path cannot slip past the scan, and checks
that ``BrokerService`` provides every member of every view.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from magnetar.broker.ownership.api import BrokerFace
from magnetar.broker.service import api
from magnetar.broker.service.broker_service import BrokerService

SRC = Path(api.__file__).resolve().parents[2]

# Names under which these packages hold the broker service.
HOLDER = (
    r"(?:(?<![\w.])svc|self\._svc|self\.svc|self\.service|self\.txns\.svc|(?<![\w.])service"
    r"|(?<![\w.])broker_service|(?<![\w.])broker\(\w+\))"
)
# In broker.auth, ``service`` / ``self._service`` is its own AuthenticationService, not the broker's.
AUTH_HOLDER = r"(?:(?<![\w.])svc|self\._svc|self\.svc|(?<![\w.])broker_service|(?<![\w.])broker\(\w+\))"
MEMBER = re.compile(HOLDER + r"\.(?!py\b)([A-Za-z_]\w*)")
GETATTR = re.compile(r"getattr\(\s*" + HOLDER + r"\s*,\s*\"(\w+)\"")
AUTH_MEMBER = re.compile(AUTH_HOLDER + r"\.(?!py\b)([A-Za-z_]\w*)")
AUTH_GETATTR = re.compile(r"getattr\(\s*" + AUTH_HOLDER + r"\s*,\s*\"(\w+)\"")
# Ways around the holder names: reaching through app.state directly or a nested getattr.
AROUND = re.compile(r"state\.broker_service\.\w|getattr\(\s*getattr\([^)]*broker_service")


def _members(proto: type) -> set[str]:
    fields = set(getattr(proto, "__annotations__", {}))
    calls = {n for n, v in vars(proto).items() if not n.startswith("_") and callable(v)}
    return fields | calls


def _view_of(path: Path) -> type | None:
    rel = path.relative_to(SRC).as_posix()
    if rel.startswith("web/metrics"):
        return api.MetricsSource
    if rel.startswith("web/"):
        return api.WebBrokerView
    if rel.startswith("broker/transaction/"):
        return api.TransactionHost
    if rel.startswith("broker/loadbalance/"):
        return api.LoadBalanceHost
    if rel.startswith("broker/replication/"):
        return api.ReplicationHost
    if rel.startswith("broker/ownership/"):
        return BrokerFace
    return None  # broker/auth: nothing of the service


PACKAGES = [
    "web",
    "web/websocket",
    "broker/transaction",
    "broker/auth",
    "broker/loadbalance",
    "broker/replication",
    "broker/ownership",
]
FILES = [p for pkg in PACKAGES for p in sorted((SRC / pkg).glob("*.py"))]


def _used(text: str, member: re.Pattern[str] = MEMBER, getattr_: re.Pattern[str] = GETATTR) -> set[str]:
    return {m.group(1) for m in member.finditer(text)} | {m.group(1) for m in getattr_.finditer(text)}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.relative_to(SRC).as_posix())
def test_only_the_narrow_view(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    view = _view_of(path)
    if view is None:
        assert "broker_service import" not in text, f"{path.name} imports the broker service"
        used = _used(text, AUTH_MEMBER, AUTH_GETATTR)
    else:
        used = _used(text)
    allowed = _members(view) if view is not None else set()
    outside = sorted(used - allowed)
    assert not outside, f"{path.name} uses {outside}, outside {getattr(view, '__name__', 'no view')}"
    around = AROUND.findall(text)
    assert not around, f"{path.name} reaches the broker service around the views: {around}"


def test_the_scan_finds_what_is_used() -> None:
    web = "".join(p.read_text() for p in FILES if _view_of(p) is api.WebBrokerView)
    assert {"lookup_topic", "get_partitioned_metadata", "authorization", "schemas"} <= _used(web)
    txn = (SRC / "broker/transaction/service.py").read_text()
    assert {"ml_factory", "namespace_service", "broker_service_url"} <= _used(txn)
    metrics = "".join(p.read_text() for p in FILES if _view_of(p) is api.MetricsSource)
    assert {"counters", "ml_factory", "statistics"} <= _used(metrics)
    load = "".join(p.read_text() for p in FILES if _view_of(p) is api.LoadBalanceHost)
    assert {"connections", "namespace_service", "web_service_url"} <= _used(load)
    repl = (SRC / "broker/replication/service.py").read_text()
    assert {"policy_documents", "delete_topic", "ml_factory"} <= _used(repl)
    own = "".join(p.read_text() for p in FILES if _view_of(p) is BrokerFace)
    assert {"transactions", "broker_service_url", "metadata_store"} <= _used(own)


def test_the_scan_can_fail() -> None:
    assert _used("x = broker(request).connections\n") == {"connections"}
    assert _used('y = getattr(svc, "handlers", None)\n') == {"handlers"}
    assert _used("import magnetar.broker.service.names\n") == set()
    assert AROUND.search("request.app.state.broker_service.topics")
    assert "connections" not in _members(api.WebBrokerView)


@pytest.mark.parametrize(
    "view",
    [
        api.WebBrokerView,
        api.MetricsSource,
        api.TransactionHost,
        api.LoadBalanceHost,
        api.ReplicationHost,
        BrokerFace,
    ],
)
def test_broker_service_provides_every_view(view: type) -> None:
    import ast
    import inspect
    import textwrap

    declared: set[str] = set(dir(BrokerService))
    for klass in BrokerService.__mro__:
        if klass is object:
            continue
        for node in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(klass)))):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                if isinstance(node.value, ast.Name) and node.value.id == "self":
                    declared.add(node.attr)
    missing = sorted(_members(view) - declared)
    assert not missing, f"BrokerService lacks {missing} of {view.__name__}"


def test_the_views_leave_the_rest_of_the_service_out() -> None:
    """None of them hands out the connection handlers, the connections to write to, or the lifecycle."""
    for view in (api.WebBrokerView, api.MetricsSource, api.TransactionHost):
        assert not _members(view) & {
            "handle_connection",
            "connection_closed",
            "start",
            "aclose",
            "serve",
            "new_producer_name",
        }
    assert "connections" not in _members(api.WebBrokerView) | _members(api.TransactionHost)
    assert "ml_factory" not in _members(api.WebBrokerView)
