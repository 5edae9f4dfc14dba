"""Topic names as the broker needs them: parse, canonicalise, partitions, storage name.

Theory of operation: clients send full names (``persistent://t/ns/x``) or short
ones (``x`` -> ``persistent://public/default/x``, ``t/ns/x``).  A partition is
``<base>-partition-<i>``; Java's rule applies (a non-negative index without
leading zeros, else "not a partition").  The managed ledger of a persistent
topic is named ``t/ns/persistent/<url-encoded local name>``, Pulsar's
persistence naming, so stored data lines up with Pulsar's layout.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote, unquote

from magnetar.broker.errors import InvalidTopicNameError

PARTITION_SUFFIX = "-partition-"
DOMAINS = ("persistent", "non-persistent")
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-=:.")
SYSTEM_LOCAL_NAMES = ("__change_events", "__transaction_buffer_snapshot")


def _check_segment(kind: str, value: str, full: str) -> None:
    if not value or any(c not in _NAME_CHARS for c in value):
        raise InvalidTopicNameError(f"Invalid topic name: {full} (bad {kind} {value!r})")


@dataclass(frozen=True, slots=True)
class TopicRef:
    domain: str
    tenant: str
    namespace_portion: str
    local_name: str

    # ------------------------------------------------------------ views
    @property
    def namespace(self) -> str:
        return f"{self.tenant}/{self.namespace_portion}"

    @property
    def full_name(self) -> str:
        return f"{self.domain}://{self.tenant}/{self.namespace_portion}/{self.local_name}"

    def __str__(self) -> str:
        return self.full_name

    @property
    def persistent(self) -> bool:
        return self.domain == "persistent"

    @property
    def partition_index(self) -> int:
        """The index of a ``-partition-N`` name, or -1."""
        base, sep, idx = self.local_name.rpartition(PARTITION_SUFFIX)
        if not sep or not base or not idx.isdigit() or (len(idx) > 1 and idx[0] == "0"):
            return -1
        return int(idx)

    @property
    def is_partition(self) -> bool:
        return self.partition_index >= 0

    @property
    def base(self) -> TopicRef:
        """The partitioned topic this partition belongs to (self if not a partition)."""
        if not self.is_partition:
            return self
        local = self.local_name.rpartition(PARTITION_SUFFIX)[0]
        return TopicRef(self.domain, self.tenant, self.namespace_portion, local)

    def partition(self, index: int) -> TopicRef:
        return TopicRef(
            self.domain, self.tenant, self.namespace_portion, f"{self.local_name}{PARTITION_SUFFIX}{index}"
        )

    @property
    def managed_ledger_name(self) -> str:
        return f"{self.tenant}/{self.namespace_portion}/{self.domain}/{quote(self.local_name, safe='')}"

    @property
    def is_system(self) -> bool:
        local = self.base.local_name
        return (
            local in SYSTEM_LOCAL_NAMES
            or local.endswith("__transaction_pending_ack")
            or local.startswith("__transaction_log_")
            or (self.namespace == "pulsar/system" and local.startswith("__"))
        )


def parse_topic(name: str) -> TopicRef:
    """Parse and validate a topic name; raises InvalidTopicNameError."""
    if not name:
        raise InvalidTopicNameError("Invalid topic name: empty")
    domain, sep, rest = name.partition("://")
    if not sep:
        parts = name.split("/")
        if len(parts) == 1:
            return TopicRef("persistent", "public", "default", name)
        if len(parts) == 3:
            domain, rest = "persistent", name
        else:
            raise InvalidTopicNameError(
                f"Invalid short topic name '{name}', it should be in the format of <tenant>/<namespace>/<topic> or <topic>"
            )
    if domain not in DOMAINS:
        raise InvalidTopicNameError(f"Invalid topic domain: {name}")
    parts = rest.split("/", 2)
    if len(parts) != 3:
        raise InvalidTopicNameError(f"Invalid topic name: {name}")
    tenant, ns, local = parts
    if "/" in local:
        # Legacy v1 name tenant/cluster/ns/local: keep the cluster inside the namespace portion.
        cluster, _, rest_local = local.partition("/")
        ns, local = f"{ns}/{cluster}", rest_local
        _check_segment("namespace", cluster, name)
    _check_segment("tenant", tenant, name)
    _check_segment("namespace", ns.split("/")[0], name)
    if not local:
        raise InvalidTopicNameError(f"Invalid topic name: {name}")
    return TopicRef(domain, tenant, ns, local)


def from_managed_ledger_name(ml_name: str) -> TopicRef | None:
    """Inverse of ``managed_ledger_name`` (None if it is not a topic ledger)."""
    parts = ml_name.split("/")
    if len(parts) != 4 or parts[2] not in DOMAINS:
        return None
    return TopicRef(parts[2], parts[0], parts[1], unquote(parts[3]))


def parse_namespace(namespace: str) -> tuple[str, str]:
    tenant, sep, ns = namespace.partition("/")
    if not sep or "/" in ns:
        raise InvalidTopicNameError(f"Invalid namespace name: {namespace}")
    _check_segment("tenant", tenant, namespace)
    _check_segment("namespace", ns, namespace)
    return tenant, ns
