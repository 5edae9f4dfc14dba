"""Topic and namespace names, with Pulsar's rules.

Theory of operation
-------------------
A topic name is ``{domain}://{tenant}/{namespace}/{local-name}`` (v2), or the
legacy v1 form ``{domain}://{tenant}/{cluster}/{namespace}/{local-name}``.
The domain is ``persistent`` or ``non-persistent``.  Without ``://`` a name
is short: one token means ``persistent://public/default/{token}``, three
tokens mean ``persistent://{t}/{ns}/{x}``; any other count is invalid.  The
scheme-specific part is split on ``/`` into at most four parts (as Java
does), so a v1 local name may contain ``/``.

Tenant, namespace and cluster names use only ``[A-Za-z0-9_\\-=:.]``; the local
name is free-form but not blank.  It is URL-encoded (Java ``URLEncoder``
rules: letters, digits and ``.-*_`` stay, space becomes ``+``, everything
else ``%XX`` of its UTF-8 bytes) wherever it becomes part of a path: REST
and lookup paths and the managed-ledger name
``{tenant}/{namespace}/{domain}/{encoded-local-name}``, which is also the
metadata path under ``/managed-ledgers/``.

Partition ``i`` of a partitioned topic ``T`` is the topic
``T-partition-i``.  The index is what follows the *last* ``-partition-`` of
the full name, read as Java does: a plain decimal int32 without sign or
leading zeros, else the topic is not a partition (index -1).  Schemas and
partition metadata belong to the base name (:attr:`TopicName.partitioned_topic_name`).

Parsing errors raise :class:`InvalidTopicName` / :class:`InvalidNamespaceName`
(both ``ValueError``) with a message saying what is wrong.  Names are frozen
dataclasses; ``str()`` is the canonical name.
"""

from __future__ import annotations

import enum
import re
import sys
from dataclasses import dataclass, field
from urllib.parse import unquote_plus

from magnetar.common.errors import InvalidNamespaceName, InvalidTopicName

__all__ = [
    "EVENTS_TOPIC_NAMES",
    "InvalidNamespaceName",
    "InvalidTopicName",
    "NamespaceName",
    "PARTITIONED_TOPIC_SUFFIX",
    "SYSTEM_NAMESPACE",
    "TopicDomain",
    "TopicName",
    "check_name",
    "decode_local_name",
    "encode_local_name",
]

PARTITIONED_TOPIC_SUFFIX = "-partition-"
PUBLIC_TENANT = "public"
DEFAULT_NAMESPACE = "default"
SYSTEM_TENANT = "pulsar"
SYSTEM_NAMESPACE_LOCAL = "system"

# System topics (Java SystemTopicNames); hidden from topic listings.
NAMESPACE_EVENTS_LOCAL_NAME = "__change_events"
TRANSACTION_BUFFER_SNAPSHOT = "__transaction_buffer_snapshot"
EVENTS_TOPIC_NAMES = frozenset(
    {
        NAMESPACE_EVENTS_LOCAL_NAME,
        TRANSACTION_BUFFER_SNAPSHOT,
        "__transaction_buffer_snapshot_indexes",
        "__transaction_buffer_snapshot_segments",
    }
)
PENDING_ACK_STORE_SUFFIX = "__transaction_pending_ack"
PENDING_ACK_STORE_CURSOR_NAME = "__pending_ack_state"
TRANSACTION_COORDINATOR_ASSIGN = "persistent://pulsar/system/transaction_coordinator_assign"
TRANSACTION_LOG_PREFIX = "persistent://pulsar/system/__transaction_log_"
RESOURCE_USAGE_TOPIC = "non-persistent://pulsar/system/resource-usage"

_NAME_RE = re.compile(r"[-=:.\w]+", re.ASCII)  # \w under ASCII is [A-Za-z0-9_]
_URL_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-*_")
_HEARTBEAT_V1_RE = re.compile(r"pulsar/[^/]+/[^:/]+:\d+")
_HEARTBEAT_V2_RE = re.compile(r"pulsar/[^:/]+:\d+")
_INT32_MAX = 2**31 - 1


class TopicDomain(enum.StrEnum):
    PERSISTENT = "persistent"
    NON_PERSISTENT = "non-persistent"


def check_name(kind: str, value: str) -> None:
    """Raise InvalidNamespaceName unless ``value`` is a valid tenant/namespace/cluster name."""
    if not value:
        raise InvalidNamespaceName(f"{kind} name must not be empty", value)
    if not _NAME_RE.fullmatch(value):
        raise InvalidNamespaceName(
            f"invalid {kind} name '{value}': only letters, digits and _ - = : . are allowed", value
        )


def encode_local_name(local_name: str) -> str:
    """URL-encode a local name as Java's ``URLEncoder.encode(s, UTF-8)`` does."""
    out: list[str] = []
    for b in local_name.encode("utf-8"):
        if b in _URL_SAFE:
            out.append(chr(b))
        elif b == 0x20:
            out.append("+")
        else:
            out.append(f"%{b:02X}")
    return "".join(out)


def decode_local_name(encoded: str) -> str:
    """Inverse of :func:`encode_local_name` (``+`` is a space, ``%XX`` a UTF-8 byte)."""
    return unquote_plus(encoded, encoding="utf-8", errors="strict")


def partition_index_of(name: str) -> int:
    """The partition index of a full topic name as Java reads it; -1 if not a partition."""
    at = name.rfind(PARTITIONED_TOPIC_SUFFIX)
    if at < 0:
        return -1
    idx = name[at + len(PARTITIONED_TOPIC_SUFFIX) :]
    if not idx.isascii() or not idx.isdigit() or (len(idx) > 1 and idx[0] == "0"):
        return -1  # not a number, signed, or leading zeros ("-partition-01")
    value = int(idx)
    return value if value <= _INT32_MAX else -1


@dataclass(frozen=True, slots=True)
class NamespaceName:
    """``tenant/namespace`` (v2) or legacy ``tenant/cluster/namespace`` (v1)."""

    tenant: str
    local_name: str
    cluster: str | None = None

    def __post_init__(self) -> None:
        check_name("tenant", self.tenant)
        if self.cluster is not None:
            check_name("cluster", self.cluster)
        check_name("namespace", self.local_name)

    @classmethod
    def get(cls, name: str) -> NamespaceName:
        parts = name.split("/")
        if len(parts) == 2:
            return cls(parts[0], parts[1])
        if len(parts) == 3:
            return cls(parts[0], parts[2], cluster=parts[1])
        raise InvalidNamespaceName(
            f"invalid namespace '{name}': expected <tenant>/<namespace> (or legacy <tenant>/<cluster>/<namespace>)",
            name,
        )

    @classmethod
    def is_valid(cls, name: str) -> bool:
        try:
            cls.get(name)
        except InvalidNamespaceName:
            return False
        return True

    def __str__(self) -> str:
        if self.cluster is None:
            return f"{self.tenant}/{self.local_name}"
        return f"{self.tenant}/{self.cluster}/{self.local_name}"

    @property
    def is_v2(self) -> bool:
        return self.cluster is None

    @property
    def is_global(self) -> bool:
        return self.cluster is None or self.cluster == "global"

    @property
    def is_system(self) -> bool:
        """The system namespace ``pulsar/system``."""
        return (
            self.cluster is None
            and self.tenant == SYSTEM_TENANT
            and self.local_name == SYSTEM_NAMESPACE_LOCAL
        )

    @property
    def is_heartbeat(self) -> bool:
        """A broker heartbeat namespace: ``pulsar/<host:port>`` or ``pulsar/<cluster>/<host:port>``."""
        s = str(self)
        return bool(_HEARTBEAT_V2_RE.fullmatch(s) or _HEARTBEAT_V1_RE.fullmatch(s))

    def topic(self, local_name: str, domain: TopicDomain = TopicDomain.PERSISTENT) -> TopicName:
        """The topic ``local_name`` in this namespace."""
        return TopicName(TopicDomain(domain), self.tenant, self.local_name, local_name, self.cluster)


SYSTEM_NAMESPACE = NamespaceName(SYSTEM_TENANT, SYSTEM_NAMESPACE_LOCAL)


@dataclass(frozen=True, slots=True)
class TopicName:
    """A fully qualified topic name; build with :meth:`TopicName.get`."""

    domain: TopicDomain
    tenant: str
    namespace_portion: str
    local_name: str
    cluster: str | None = None
    partition_index: int = field(default=-1, init=False, compare=False)

    def __post_init__(self) -> None:
        if not self.local_name.strip():
            raise InvalidTopicName(f"invalid topic name '{self}': the local name is blank", str(self))
        try:
            NamespaceName(self.tenant, self.namespace_portion, self.cluster)
        except InvalidNamespaceName as e:
            raise InvalidTopicName(f"invalid topic name '{self}': {e.message}", str(self)) from e
        object.__setattr__(self, "partition_index", partition_index_of(str(self)))
        # shared by every topic of the namespace (a broker holds thousands of names)
        object.__setattr__(self, "tenant", sys.intern(self.tenant))
        object.__setattr__(self, "namespace_portion", sys.intern(self.namespace_portion))
        if self.cluster is not None:
            object.__setattr__(self, "cluster", sys.intern(self.cluster))

    # ------------------------------------------------------------- parsing

    @classmethod
    def get(cls, name: str) -> TopicName:
        """Parse a short or full topic name."""
        if not isinstance(name, str) or not name:
            raise InvalidTopicName("invalid topic name: empty", str(name))
        full = name
        if "://" not in name:
            tokens = [t for t in name.split("/") if t]
            if len(tokens) == 1:
                full = f"persistent://{PUBLIC_TENANT}/{DEFAULT_NAMESPACE}/{tokens[0]}"
            elif len(tokens) == 3:
                full = f"persistent://{name}"
            else:
                raise InvalidTopicName(
                    f"invalid short topic name '{name}': it should be <tenant>/<namespace>/<topic> or <topic>",
                    name,
                )
        scheme, rest = full.split("://", 1)
        try:
            domain = TopicDomain(scheme)
        except ValueError:
            raise InvalidTopicName(
                f"invalid topic name '{name}': domain '{scheme}' is not persistent or non-persistent", name
            ) from None
        parts = rest.split("/", 3)
        if len(parts) == 3:
            return cls(domain, parts[0], parts[1], parts[2])
        if len(parts) == 4:
            return cls(domain, parts[0], parts[2], parts[3], cluster=parts[1])
        raise InvalidTopicName(
            f"invalid topic name '{name}': expected {scheme}://<tenant>/<namespace>/<topic>", name
        )

    @classmethod
    def is_valid(cls, name: str) -> bool:
        try:
            cls.get(name)
        except InvalidTopicName:
            return False
        return True

    @classmethod
    def from_persistence_naming(cls, ml_name: str) -> TopicName:
        """Inverse of :attr:`persistence_naming` (``tenant/ns/domain/encoded-local``)."""
        parts = ml_name.split("/")
        try:
            if len(parts) == 4:
                tenant, ns, domain, local = parts
                return cls(TopicDomain(domain), tenant, ns, decode_local_name(local))
            if len(parts) == 5:
                tenant, cluster, ns, domain, local = parts
                return cls(TopicDomain(domain), tenant, ns, decode_local_name(local), cluster=cluster)
        except (ValueError, UnicodeDecodeError) as e:
            if isinstance(e, InvalidTopicName):
                raise
            raise InvalidTopicName(f"invalid managed-ledger name '{ml_name}': {e}", ml_name) from None
        raise InvalidTopicName(f"invalid managed-ledger name '{ml_name}'", ml_name)

    # ------------------------------------------------------------- forms

    def __str__(self) -> str:
        if self.cluster is None:
            return f"{self.domain.value}://{self.tenant}/{self.namespace_portion}/{self.local_name}"
        return (
            f"{self.domain.value}://{self.tenant}/{self.cluster}/{self.namespace_portion}/{self.local_name}"
        )

    @property
    def namespace(self) -> NamespaceName:
        return NamespaceName(self.tenant, self.namespace_portion, self.cluster)

    @property
    def is_v2(self) -> bool:
        return self.cluster is None

    @property
    def is_persistent(self) -> bool:
        return self.domain is TopicDomain.PERSISTENT

    @property
    def encoded_local_name(self) -> str:
        return encode_local_name(self.local_name)

    def _path(self, *, domain_first: bool) -> str:
        ns = f"{self.tenant}/{self.namespace_portion}" if self.cluster is None else str(self.namespace)
        if domain_first:
            return f"{self.domain.value}/{ns}/{self.encoded_local_name}"
        return f"{ns}/{self.domain.value}/{self.encoded_local_name}"

    @property
    def persistence_naming(self) -> str:
        """The managed-ledger name: ``tenant/ns/domain/encoded-local-name``."""
        return self._path(domain_first=False)

    @property
    def lookup_name(self) -> str:
        """``domain/tenant/ns/encoded-local-name``, as in ``/lookup/v2/topic/{lookup_name}``."""
        return self._path(domain_first=True)

    def rest_path(self, include_domain: bool = True) -> str:
        """Path tail for admin REST (``/admin/v2/{rest_path}``)."""
        if include_domain:
            return self._path(domain_first=True)
        ns = f"{self.tenant}/{self.namespace_portion}" if self.cluster is None else str(self.namespace)
        return f"{ns}/{self.encoded_local_name}"

    # ------------------------------------------------------------- partitions

    @property
    def is_partitioned(self) -> bool:
        """True if this name is one partition (``...-partition-N``) of a partitioned topic."""
        return self.partition_index >= 0

    @property
    def partitioned_topic_name(self) -> str:
        """The base (partitioned) topic name; this name itself if not a partition."""
        s = str(self)
        if self.partition_index < 0:
            return s
        return s[: s.rfind(PARTITIONED_TOPIC_SUFFIX)]

    def base(self) -> TopicName:
        return self if self.partition_index < 0 else TopicName.get(self.partitioned_topic_name)

    def get_partition(self, index: int) -> TopicName:
        """Partition ``index`` of this topic's base name (-1 gives this name back).

        Unlike Java, calling it on a partition uses the base name rather than
        appending a second ``-partition-`` suffix.
        """
        if index == -1:
            return self
        if index < 0 or index > _INT32_MAX:
            raise InvalidTopicName(f"invalid partition index {index}", str(self))
        if index == self.partition_index:
            return self
        return TopicName.get(f"{self.partitioned_topic_name}{PARTITIONED_TOPIC_SUFFIX}{index}")

    # ------------------------------------------------------------- system topics

    @property
    def is_system_topic(self) -> bool:
        """Topics the broker owns: namespace events, transaction internals, anything in ``pulsar/system``."""
        base = self.base()
        if base.local_name in EVENTS_TOPIC_NAMES or base.local_name.endswith(PENDING_ACK_STORE_SUFFIX):
            return True
        ns = self.namespace
        return ns.is_system or ns.is_heartbeat
