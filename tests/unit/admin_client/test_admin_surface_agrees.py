"""The CLI, the admin client and the broker accept the same policy names (one table: common.admin_policies).

For every policy row: the broker serves GET, the set verb and DELETE on the
suffix at each level the row has; the admin client has get_/set_/remove_
methods that call exactly those; every CLI policy command calls a client
method that exists at its level.
"""

from __future__ import annotations

import pytest

from magnetar.admin_client.namespaces import Namespaces
from magnetar.admin_client.policies import POLICIES as CLIENT_POLICIES
from magnetar.admin_client.topic_policies import TopicPolicies
from magnetar.broker.admin import policies as server
from magnetar.cli.admin.policy_table import TABLE as CLI_TABLE
from magnetar.common.admin_policies import BY_CLIENT, POLICIES
from magnetar.web import namespaces as web_ns
from magnetar.web import topic_policies as web_topic


def _routes(router: object) -> set[tuple[str, str]]:
    return {(m, r.path) for r in router.routes for m in getattr(r, "methods", ())}  # type: ignore[attr-defined]


SERVER_ROUTES = _routes(web_ns.router) | _routes(web_topic.router)
LEVELS = {"ns": (web_ns.NS, Namespaces), "topic": (web_topic.TP, TopicPolicies)}


def test_the_tables_are_views_of_one_table() -> None:
    assert [s.name for s in server.SPECS] == [p.name for p in POLICIES]
    assert set(CLIENT_POLICIES) == set(BY_CLIENT)
    for name, spec in CLIENT_POLICIES.items():
        p = BY_CLIENT[name]
        assert (spec.ns_suffix, spec.topic_suffix, spec.ns_set, spec.topic_set) == (
            p.ns_suffix,
            p.topic_suffix,
            p.ns_set,
            p.topic_set,
        )
        s = server.BY_NAME[p.name]
        assert (s.ns_suffix, s.topic_suffix, s.ns_set, s.topic_set) == (
            p.ns_suffix,
            p.topic_suffix,
            p.ns_set,
            p.topic_set,
        )


@pytest.mark.parametrize("level", ["ns", "topic"])
def test_every_client_policy_method_has_a_server_route(level: str) -> None:
    prefix, cls = LEVELS[level]
    missing = []
    for name, spec in CLIENT_POLICIES.items():
        suffix = spec.ns_suffix if level == "ns" else spec.topic_suffix
        if suffix is None:
            assert not hasattr(cls, f"set_{name}") or name in cls.__dict__, (level, name)
            continue
        verb = spec.ns_set if level == "ns" else spec.topic_set
        remove = spec.ns_remove if level == "ns" else spec.topic_remove
        wanted = [("GET", suffix), (verb, suffix)]
        if remove:
            wanted.append(("DELETE", remove if isinstance(remove, str) else suffix))
        for method, path in wanted:
            if (method, f"{prefix}/{path}") not in SERVER_ROUTES:
                missing.append((level, name, method, path))
        for prefix_ in ("get_", "set_") + (("remove_",) if remove else ()):
            assert callable(getattr(cls, prefix_ + name, None)), (level, prefix_ + name)
    assert not missing, missing


@pytest.mark.parametrize("level", ["ns", "topic"])
def test_every_cli_policy_command_calls_an_existing_client_method(level: str) -> None:
    _, cls = LEVELS[level]
    for row in CLI_TABLE:
        stem = row.ns if level == "ns" else row.topic
        if stem is None:
            continue
        assert row.policy in BY_CLIENT or hasattr(cls, f"get_{row.policy}") or row.get_method, row.policy
        if row.set_call is None:
            assert callable(getattr(cls, f"set_{row.policy}", None)), (level, row.policy)
        if row.get_stem != "":
            assert callable(getattr(cls, "get_" + (row.get_method or row.policy), None)), (level, row.policy)
        if row.remove_verb and row.remove_call is None and (level == "ns" or not row.ns_only_remove):
            assert callable(getattr(cls, f"remove_{row.policy}", None)), (level, row.policy)
        if row.policy in BY_CLIENT:
            p = BY_CLIENT[row.policy]
            assert (p.ns_suffix if level == "ns" else p.topic_suffix) is not None, (level, row.policy)


def test_every_policy_with_a_client_name_has_a_cli_command() -> None:
    cli = {row.policy for row in CLI_TABLE}
    without_cli = sorted(set(BY_CLIENT) - cli)
    # Not (yet) pulsar-admin commands here: allowed clusters (tenant admin), entry filters, and
    # the offload time threshold (pulsar-admin folds it into set-offload-threshold --time).
    assert without_cli == ["allowed_clusters", "entry_filters", "offload_threshold_in_seconds"]
