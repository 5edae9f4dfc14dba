"""The policy table: every namespace and topic-level policy the admin API knows.

Theory of operation: Pulsar's policy endpoints share one shape (GET the value
or 204 when unset, set with POST/PUT and a JSON body, DELETE to fall back to
the broker default), but their suffixes and verbs differ between the
namespace API (``/admin/v2/namespaces/{t}/{ns}/<suffix>``) and the
topic-level API (``/admin/v2/persistent/{t}/{ns}/{topic}/<suffix>``), e.g.
``maxUnackedMessagesPerConsumer`` vs ``maxUnackedMessagesOnConsumer``, or PUT
for ``compactionThreshold`` on a namespace but POST on a topic.  This module
writes those facts down once, as :data:`POLICIES`, keyed by a snake_case name.

:func:`install_policy_methods` turns the table into ``get_<name>`` /
``set_<name>`` / ``remove_<name>`` methods on a resource class, so
``admin.namespaces.set_retention(ns, RetentionPolicies(...))`` and
``admin.topic_policies.get_retention(topic, applied=True)`` exist without
hundreds of hand-written three-line methods; the CLI builds its
``set-retention`` / ``get-retention`` / ``remove-retention`` commands from the
same table.  Policies whose shape is not the common one (backlog quotas with
their type parameter, the topic message TTL sent as a query parameter,
namespace properties, resource groups) have hand-written methods instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from magnetar.common.admin_policies import POLICIES as ADMIN_POLICIES
from magnetar.common.admin_policies import Remove


@dataclass(frozen=True)
class PolicySpec:
    name: str  # snake_case, e.g. "max_unacked_messages_per_consumer"
    ns_suffix: str | None  # None: no namespace-level endpoint
    topic_suffix: str | None  # None: no topic-level endpoint
    ns_set: str = "POST"
    topic_set: str = "POST"
    ns_remove: Remove = True
    topic_remove: Remove = True
    doc: str = ""


POLICIES: dict[str, PolicySpec] = {
    p.client: PolicySpec(
        p.client,
        p.ns_suffix,
        p.topic_suffix,
        ns_set=p.ns_set,
        topic_set=p.topic_set,
        ns_remove=p.ns_remove,
        topic_remove=p.topic_remove,
        doc=p.doc,
    )
    for p in ADMIN_POLICIES
    if p.client
}


def install_policy_methods(
    cls: type,
    level: str,
    make_get: Callable[[PolicySpec, str], Callable[..., Any]],
    make_set: Callable[[PolicySpec, str, str], Callable[..., Any]],
    make_remove: Callable[[PolicySpec, str], Callable[..., Any]],
) -> None:
    """Add get_/set_/remove_<name> methods for every policy the ``level`` ("ns"/"topic") has."""
    for spec in POLICIES.values():
        suffix = spec.ns_suffix if level == "ns" else spec.topic_suffix
        if suffix is None:
            continue
        method = spec.ns_set if level == "ns" else spec.topic_set
        remove = spec.ns_remove if level == "ns" else spec.topic_remove
        for prefix, fn in (("get_", make_get(spec, suffix)), ("set_", make_set(spec, suffix, method))):
            name = prefix + spec.name
            if name not in cls.__dict__:  # a hand-written method wins
                fn.__name__ = fn.__qualname__ = name
                fn.__doc__ = f"{prefix[:-1].capitalize()} {spec.doc} ({method if prefix == 'set_' else 'GET'} {suffix})."
                setattr(cls, name, fn)
        if remove:
            remove_suffix = remove if isinstance(remove, str) else suffix
            name = "remove_" + spec.name
            if name not in cls.__dict__:
                fn = make_remove(spec, remove_suffix)
                fn.__name__ = fn.__qualname__ = name
                fn.__doc__ = f"Remove {spec.doc} (DELETE {remove_suffix})."
                setattr(cls, name, fn)
