"""The client's enums, named as the official client names them, accepting names as strings.

Theory of operation: each enum a user passes (``consumer_type``,
``initial_position``, ``compression_type``, ``routing_mode``,
``access_mode``...) goes through :func:`coerce`, which takes the enum member,
its int value, or its name as a string in any case and with or without
underscores (``"key_shared"``, ``"KeyShared"``, ``"earliest"``, ``"zlib"``).
Anything else is an :class:`InvalidConfiguration` naming the allowed values.
The consumer's policy objects (dead letter, Key_Shared) live here too.
``InitialPosition`` and ``ProducerAccessMode`` are the protocol's own enums
(``protocol.enums``, re-exported); ``ConsumerType`` and ``CompressionType``
keep the official client's member names (``KeyShared``, ``ZLib``) with the
wire values of ``SubType`` and the protocol's ``CompressionType``, and
``RegexSubscriptionMode`` the values of ``TopicDomainMode``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, IntEnum
from typing import TypeVar

from magnetar.client.errors import InvalidConfiguration
from magnetar.protocol.enums import InitialPosition, KeySharedMode, ProducerAccessMode

__all__ = [
    "BatchingType", "CompressionType", "ConsumerDeadLetterPolicy", "ConsumerKeySharedPolicy", "ConsumerType",
    "HashingScheme", "InitialPosition", "PartitionsRoutingMode", "ProducerAccessMode", "RegexSubscriptionMode",
    "coerce",
]  # fmt: skip

E = TypeVar("E", bound=Enum)


class ConsumerType(IntEnum):
    Exclusive = 0
    Shared = 1
    Failover = 2
    KeyShared = 3


class CompressionType(IntEnum):
    NONE = 0
    LZ4 = 1
    ZLib = 2
    ZSTD = 3
    SNAPPY = 4


class PartitionsRoutingMode(IntEnum):
    """Values as the official client's ``PartitionsRoutingMode``."""

    UseSinglePartition = 0
    RoundRobinDistribution = 1
    CustomPartition = 2


class HashingScheme(IntEnum):
    """How a key picks a partition (``client.hashing``); values as the C++ library's enum.

    BoostHash is the official Python client's default, JavaStringHash the Java
    client's, Murmur3_32Hash Key_Shared's.
    """

    Murmur3_32Hash = 0
    BoostHash = 1
    JavaStringHash = 2


class RegexSubscriptionMode(IntEnum):
    PersistentOnly = 0
    NonPersistentOnly = 1
    AllTopics = 2


class BatchingType(IntEnum):
    Default = 0
    KeyBased = 1


@dataclass(frozen=True)
class ConsumerDeadLetterPolicy:
    max_redeliver_count: int
    dead_letter_topic: str | None = None
    initial_subscription_name: str | None = None
    retry_letter_topic: str | None = None


@dataclass(frozen=True)
class ConsumerKeySharedPolicy:
    key_shared_mode: str | KeySharedMode = KeySharedMode.AUTO_SPLIT
    allow_out_of_order_delivery: bool = False
    sticky_ranges: tuple[tuple[int, int], ...] = ()


def _norm(text: str) -> str:
    return text.replace("_", "").replace("-", "").lower()


def coerce(enum_cls: type[E], value: object) -> E:
    """``value`` as a member of ``enum_cls``: a member, an int value or a (case-insensitive) name."""
    if isinstance(value, enum_cls):
        return value
    if isinstance(value, str):
        wanted = _norm(value)
        for member in enum_cls:
            if _norm(member.name) == wanted:
                return member
    elif isinstance(value, int) or hasattr(value, "value"):
        raw = getattr(value, "value", value)
        try:
            return enum_cls(raw)
        except ValueError:
            pass
        name = getattr(value, "name", None)
        if isinstance(name, str):
            return coerce(enum_cls, name)
    allowed = ", ".join(m.name for m in enum_cls)
    raise InvalidConfiguration(f"{value!r} is not a {enum_cls.__name__} (one of: {allowed})")
