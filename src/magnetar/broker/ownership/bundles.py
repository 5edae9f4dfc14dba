"""Namespace bundles: hash ranges of topic names, as Pulsar's NamespaceBundleFactory draws them.

Theory of operation: a namespace's topics are spread over *bundles*, slices of
the 32-bit hash space.  The namespace policies hold the boundaries
(``bundles.boundaries``: N+1 lower-case hex strings from ``0x00000000`` to
``0xffffffff``); bundle ``i`` is ``[b[i], b[i+1])`` except the last, which
includes ``0xffffffff``.  A topic belongs to the bundle holding
``crc32(full topic name)`` -- Pulsar's default hash (Guava's ``crc32`` of the
UTF-8 name, e.g. ``persistent://public/default/t-partition-3``), so partitions
of one topic land in different bundles.  A bundle is named ``0xLLLLLLLL_0xUUUUUUUU``
and, with its namespace, ``tenant/ns/0x..._0x...``.

Splitting (``range_equally_divide``, Pulsar's default algorithm) cuts a bundle
at the middle of its range; the new boundary list replaces the old one in the
policies (``split_boundaries``).  Everything here is pure: no I/O, no clock.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

FULL_LOWER = 0x00000000
FULL_UPPER = 0xFFFFFFFF
SPLIT_ALGORITHMS = ("range_equally_divide",)


class BundleError(ValueError):
    """A bundle name or boundary list that is not well formed (the admin layer answers 412)."""


def topic_hash(full_topic_name: str) -> int:
    """Pulsar's bundle hash of a topic: CRC-32 of the UTF-8 full name, unsigned."""
    return zlib.crc32(full_topic_name.encode()) & 0xFFFFFFFF


def boundaries_of(policies: dict | None, default_count: int = 1) -> list[int]:
    """The integer boundaries of a namespace from its policies (even split when absent)."""
    bundles = (policies or {}).get("bundles") or {}
    raw = bundles.get("boundaries")
    if raw:
        return [parse_hex(b) for b in raw]
    n = int(bundles.get("numBundles") or default_count or 1)
    return even_boundaries(n)


def even_boundaries(n: int) -> list[int]:
    n = max(1, n)
    step = (FULL_UPPER + 1) // n
    return [i * step for i in range(n)] + [FULL_UPPER]


def parse_hex(text: str) -> int:
    try:
        value = int(text, 16)
    except (TypeError, ValueError):
        raise BundleError(f"invalid bundle boundary {text!r}") from None
    if not FULL_LOWER <= value <= FULL_UPPER:
        raise BundleError(f"bundle boundary {text!r} is outside 0x00000000..0xffffffff")
    return value


@dataclass(frozen=True, slots=True, order=True)
class BundleRange:
    """``[lower, upper)``, or ``[lower, upper]`` when ``upper`` is 0xffffffff."""

    lower: int
    upper: int

    @property
    def name(self) -> str:
        return f"0x{self.lower:08x}_0x{self.upper:08x}"

    def contains(self, h: int) -> bool:
        return self.lower <= h < self.upper or (self.upper == FULL_UPPER and h == FULL_UPPER)

    @classmethod
    def parse(cls, name: str) -> BundleRange:
        lo, sep, hi = name.partition("_")
        if not sep:
            raise BundleError(f"invalid bundle {name!r}: expected 0xLLLLLLLL_0xUUUUUUUU")
        lower, upper = parse_hex(lo), parse_hex(hi)
        if lower >= upper:
            raise BundleError(f"invalid bundle {name!r}: empty range")
        return cls(lower, upper)


@dataclass(frozen=True, slots=True, order=True)
class NamespaceBundle:
    namespace: str  # tenant/ns
    range: BundleRange

    @property
    def name(self) -> str:
        """``tenant/ns/0x..._0x...`` -- the key of ownedNamespaces and of the ownership path."""
        return f"{self.namespace}/{self.range.name}"


def ranges_of(boundaries: list[int]) -> list[BundleRange]:
    return [BundleRange(lo, hi) for lo, hi in zip(boundaries, boundaries[1:], strict=False)]


def find_range(boundaries: list[int], h: int) -> BundleRange:
    for r in ranges_of(boundaries):
        if r.contains(h):
            return r
    raise BundleError(f"hash 0x{h:08x} is outside every bundle")  # only with broken boundaries


def bundle_of_topic(namespace: str, boundaries: list[int], full_topic_name: str) -> NamespaceBundle:
    return NamespaceBundle(namespace, find_range(boundaries, topic_hash(full_topic_name)))


def require_range(boundaries: list[int], name: str) -> BundleRange:
    """The bundle ``name`` of this namespace; BundleError when it is not one of its bundles."""
    wanted = BundleRange.parse(name)
    if wanted not in ranges_of(boundaries):
        raise BundleError(f"Bundle {name} is not a bundle of this namespace")
    return wanted


def split_boundaries(boundaries: list[int], name: str, algorithm: str = "range_equally_divide") -> list[int]:
    """The boundaries after splitting bundle ``name`` in two at the middle of its range."""
    if algorithm not in SPLIT_ALGORITHMS:
        raise BundleError(f"Unsupported namespace bundle split algorithm {algorithm!r}")
    r = require_range(boundaries, name)
    if r.upper - r.lower < 2:
        raise BundleError(f"Bundle {name} is too small to split")
    middle = r.lower + (r.upper - r.lower) // 2
    return sorted({*boundaries, middle})


def to_hex(boundaries: list[int]) -> list[str]:
    return [f"0x{b:08x}" for b in boundaries]
