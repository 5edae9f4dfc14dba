"""magnetar.broker.admin -- the admin service layer behind the REST API.

Theory of operation: the web handlers (``magnetar.web``) parse HTTP and call
one method here; all admin logic -- validation with Pulsar's status codes,
metadata updates, cursor operations, policy resolution and enforcement --
lives in this package, over a running ``BrokerService``:

* ``models.py``         -- pydantic models of Pulsar's JSON bodies (also the OpenAPI schema).
* ``policies.py``       -- the policy table (REST suffixes <-> stored fields) and value parsing.
* ``tenancy.py``        -- clusters and tenants.
* ``namespaces.py``     -- namespace lifecycle, namespace policies, permissions, properties.
* ``topic_ops.py``      -- subscriptions, skip/clear/expire/reset, peek/examine, terminate.
* ``topic_policies.py`` -- topic-level policies (metadata-store documents), the
                           effective-policy resolver and the enforcement loop.

``AdminService(svc)`` bundles them; ``start()`` spawns the enforcement loop on
the broker's task supervisor (idempotent).
"""

from __future__ import annotations

from typing import Any

from magnetar.broker.admin.namespaces import NamespaceAdmin
from magnetar.broker.admin.tenancy import TenancyAdmin
from magnetar.broker.admin.topic_ops import TopicOps
from magnetar.broker.admin.topic_policies import PolicyEnforcer, TopicPolicyAdmin

DEFAULT_POLICY_CHECK_INTERVAL_S = 5.0


class AdminService:
    def __init__(self, svc: Any, *, policy_check_interval_s: float | None = None) -> None:
        self.svc = svc
        self.tenancy = TenancyAdmin(svc)
        self.namespaces = NamespaceAdmin(svc)
        self.topics = TopicOps(svc)
        self.topic_policies = TopicPolicyAdmin(svc)
        if policy_check_interval_s is None:
            props = getattr(svc.config, "as_properties", lambda: {})()
            raw = props.get("magnetarPolicyCheckIntervalMs") if isinstance(props, dict) else None
            policy_check_interval_s = int(raw) / 1000 if raw else DEFAULT_POLICY_CHECK_INTERVAL_S
        self.enforcer = PolicyEnforcer(svc, self.topic_policies, policy_check_interval_s)
        self.namespaces.on_change(self.enforcer.on_change)
        self.topic_policies.listeners.append(self.enforcer.on_change)
        self._started = False

    def start(self) -> None:
        """Spawn the enforcement loop (needs a running loop and ``svc.supervisor``)."""
        if self._started:
            return
        supervisor = getattr(self.svc, "supervisor", None)
        if supervisor is None or not hasattr(self.svc, "topics"):
            return
        supervisor.spawn(self.enforcer.run(), name="admin-policy-enforcer")
        self._started = True


__all__ = ["AdminService"]
