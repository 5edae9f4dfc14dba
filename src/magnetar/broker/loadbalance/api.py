"""The pluggable load manager: what the namespace service and the admin layer ask of it.

Theory of operation: a broker runs one :class:`LoadManager`, chosen by
``loadManagerClassName`` (:func:`load_manager_kind`):

* Pulsar's ``...ModularLoadManagerImpl`` / ``...ExtensibleLoadManagerImpl`` (the
  default, ``""``) -> the leader-based manager (``manager.LeaderLoadManager``):
  every broker publishes its load report; the leader sheds and splits; placement
  reads the published reports;
* ``...NoopLoadManager``, or ``loadBalancerEnabled=false`` -> ``noop``: reports
  are still published (the admin API shows them) but nobody sheds or splits,
  and placement is the fewest-bundles choice of ``broker.ownership.placement``;
* ``module:Class`` -> a plugin class built as ``Class(broker_service, namespace_service)``
  that implements this protocol.

``select_broker`` answers ``None`` when there is no opinion (the namespace
service then uses its own choice) and raises nothing: a bundle no broker may
take by policy is answered with ``Decision(destination=None)`` and the lookup
fails with that reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from magnetar.broker.loadbalance.data import Decision
    from magnetar.broker.ownership.bundles import NamespaceBundle
    from magnetar.broker.ownership.registry import BrokerInfo

LEADER_CLASS_NAMES = (
    "",
    "org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl",
    "org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl",
    "org.apache.pulsar.broker.loadbalance.impl.SimpleLoadManagerImpl",
    "leader",
)
NOOP_CLASS_NAMES = ("org.apache.pulsar.broker.loadbalance.NoopLoadManager", "noop")


class LoadManagerError(ValueError):
    """An unknown ``loadManagerClassName``."""


class LoadManager(Protocol):
    async def start(self) -> None: ...
    async def aclose(self) -> None: ...

    async def select_broker(
        self, bundle: NamespaceBundle, brokers: list[BrokerInfo], avoid: str | None
    ) -> Decision | None: ...

    def local_report(self) -> dict[str, Any]:
        """This broker's LocalBrokerData JSON (what it last computed)."""
        ...

    def registration_fields(self) -> dict[str, Any]:
        """What goes into the registration node besides the URLs (the published report)."""
        ...

    def stats(self) -> dict[str, Any]:
        """Counters, the leader flag and the recent decisions with their reasons."""
        ...


def load_manager_kind(class_name: str, enabled: bool) -> str:
    """``leader``, ``noop`` or ``plugin``; LoadManagerError for a Pulsar class we do not have."""
    name = (class_name or "").strip()
    if not enabled or name in NOOP_CLASS_NAMES:
        return "noop"
    if name in LEADER_CLASS_NAMES:
        return "leader"
    if ":" in name:
        return "plugin"
    raise LoadManagerError(
        f"loadManagerClassName={name!r}: use ModularLoadManagerImpl, ExtensibleLoadManagerImpl, "
        "NoopLoadManager or a Python 'module:Class'"
    )
