"""Topic names as the broker uses them: a thin view over ``common.naming``.

Theory of operation: ``common.naming.TopicName`` holds Pulsar's naming rules
(short names -> ``persistent://public/default/x``, legacy v1 names, partition
suffix parsing with Java's rules, persistence naming of the managed ledger,
system topics).  :class:`TopicRef` wraps one and adds the forms the broker
asks for all the time (the namespace as a ``tenant/ns`` string, the domain as
a string), and :func:`parse_topic` turns the common layer's naming errors
into the broker's InvalidTopicName (ServerError 17 / HTTP 412).
"""

from __future__ import annotations

from dataclasses import dataclass

from magnetar.broker.errors import InvalidTopicNameError
from magnetar.common.errors import InvalidNameError
from magnetar.common.naming import NamespaceName, TopicDomain, TopicName

PARTITION_SUFFIX = "-partition-"


@dataclass(frozen=True, slots=True)
class TopicRef:
    name: TopicName

    @property
    def domain(self) -> str:
        return self.name.domain.value

    @property
    def tenant(self) -> str:
        return self.name.tenant

    @property
    def namespace_portion(self) -> str:
        return self.name.namespace_portion

    @property
    def local_name(self) -> str:
        return self.name.local_name

    @property
    def namespace(self) -> str:
        return str(self.name.namespace)

    @property
    def full_name(self) -> str:
        return str(self.name)

    def __str__(self) -> str:
        return self.full_name

    @property
    def persistent(self) -> bool:
        return self.name.is_persistent

    @property
    def partition_index(self) -> int:
        return self.name.partition_index

    @property
    def is_partition(self) -> bool:
        return self.name.partition_index >= 0

    @property
    def base(self) -> TopicRef:
        return self if not self.is_partition else TopicRef(self.name.base())

    def partition(self, index: int) -> TopicRef:
        return TopicRef(TopicName.get(f"{self.full_name}{PARTITION_SUFFIX}{index}"))

    @property
    def managed_ledger_name(self) -> str:
        return self.name.persistence_naming

    @property
    def is_system(self) -> bool:
        return self.name.is_system_topic


def parse_topic(name: str) -> TopicRef:
    """Parse and validate a topic name; raises InvalidTopicNameError."""
    try:
        return TopicRef(TopicName.get(name))
    except InvalidNameError as exc:
        raise InvalidTopicNameError(f"Invalid topic name: {name} ({exc})") from None


def topic_ref(domain: str, tenant: str, namespace_portion: str, local_name: str) -> TopicRef:
    try:
        return TopicRef(TopicName(TopicDomain(domain), tenant, namespace_portion, local_name))
    except (InvalidNameError, ValueError) as exc:
        raise InvalidTopicNameError(f"Invalid topic name: {exc}") from None


def from_managed_ledger_name(ml_name: str) -> TopicRef | None:
    """The topic of a managed ledger (None if it is not a topic's ledger)."""
    try:
        return TopicRef(TopicName.from_persistence_naming(ml_name))
    except (InvalidNameError, ValueError):
        return None


def parse_namespace(namespace: str) -> tuple[str, str]:
    try:
        ns = NamespaceName.get(namespace)
    except InvalidNameError as exc:
        raise InvalidTopicNameError(f"Invalid namespace name: {namespace} ({exc})") from None
    return ns.tenant, ns.local_name
