"""AdminService: the admin sub-services over one broker service, and the enforcement loop.

Theory of operation: the composition root builds one ``AdminService`` per
broker and hands it the broker service as a ``BrokerServiceView`` (the narrow
face in ``broker.service.api``; the sub-services use nothing else of it).
Each sub-service owns one family of REST operations (tenancy, isolation,
brokers, namespaces, topics, topic policies, schemas); policy writes notify
the ``PolicyEnforcer``, whose loop ``start()`` spawns on the broker's task
supervisor and which hands each loaded topic its resolved ``TopicPolicies``; it also
runs the dynamic-configuration watch (``brokers.dynamic``, see ``dynamic_config``).
"""

from __future__ import annotations

from magnetar.broker.admin.brokers import BrokerAdmin
from magnetar.broker.admin.isolation import IsolationAdmin
from magnetar.broker.admin.namespaces import NamespaceAdmin
from magnetar.broker.admin.resource_groups import ResourceGroupAdmin
from magnetar.broker.admin.schemas import SchemaAdmin
from magnetar.broker.admin.tenancy import TenancyAdmin
from magnetar.broker.admin.topic_ops import TopicOps
from magnetar.broker.admin.topic_policies import PolicyEnforcer, TopicPolicyAdmin
from magnetar.broker.service.api import BrokerServiceView

DEFAULT_POLICY_CHECK_INTERVAL_S = 5.0


class AdminService:
    def __init__(self, svc: BrokerServiceView, *, policy_check_interval_s: float | None = None) -> None:
        self.svc = svc
        self.tenancy = TenancyAdmin(svc)
        self.isolation = IsolationAdmin(svc)
        self.brokers = BrokerAdmin(svc)
        self.namespaces = NamespaceAdmin(svc)
        self.resource_groups = ResourceGroupAdmin(svc)
        self.topics = TopicOps(svc)
        self.topic_policies = TopicPolicyAdmin(svc)
        self.schemas = SchemaAdmin(svc, self.topic_policies)
        if policy_check_interval_s is None:
            props = getattr(svc.config, "as_properties", lambda: {})()
            raw = props.get("magnetarPolicyCheckIntervalMs") if isinstance(props, dict) else None
            policy_check_interval_s = int(raw) / 1000 if raw else DEFAULT_POLICY_CHECK_INTERVAL_S
        self.enforcer = PolicyEnforcer(svc, self.topic_policies, policy_check_interval_s)
        self.namespaces.on_change(self.enforcer.on_change)
        self.topic_policies.listeners.append(self.enforcer.on_change)
        topics = getattr(svc, "topics", None)
        if topics is not None and hasattr(topics, "ml_config_for"):
            topics.ml_config_for = self.enforcer.ml_config_for  # topics open under their policies
        self.brokers.dynamic.listeners.append(self._dynamic_config_changed)
        self._started = False

    async def _dynamic_config_changed(self) -> None:
        """Loaded topics see a changed dynamic setting at once (maxProducersPerTopic...)."""
        topics = getattr(self.svc, "topics", None)
        if topics is None or not hasattr(topics, "loaded"):
            return
        for topic in list(topics.loaded()):
            topic.config = self.svc.config
        await self.enforcer.apply_all()

    def start(self) -> None:
        """Spawn the enforcement loop (needs a running loop and ``svc.supervisor``)."""
        if self._started:
            return
        supervisor = getattr(self.svc, "supervisor", None)
        if supervisor is None or not hasattr(self.svc, "topics"):
            return
        supervisor.spawn(self.enforcer.run(), name="admin-policy-enforcer")
        supervisor.spawn(self.brokers.dynamic.run(), name="admin-dynamic-config")
        self._started = True


__all__ = ["AdminService"]
