"""Fixed-bucket latency recorders for metrics (no I/O, no clock: callers pass milliseconds).

Theory of operation: Pulsar reports storage latencies in fixed millisecond
buckets -- ``pulsar_storage_write_latency_le_0_5 .. _le_1000`` plus
``_overflow``, ``_count`` and ``_sum`` -- where each bucket counts only its own
range (not cumulative, unlike a Prometheus histogram).  :class:`LatencyBuckets`
keeps exactly that: a list of counts, one per bound plus overflow, a count
and a sum.  Until the first value is recorded ``counts`` is a tuple of zeros shared by
every recorder with the same bounds (a broker holds three recorders per idle topic).  Recording is one binary search over the bounds (cheap enough for
every add on the hot path); reading is a snapshot.  Counters only grow, so a
scraper computes rates from differences; :meth:`merge` sums recorders for
namespace- or broker-level totals.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

# Pulsar's bucket bounds (ms) for pulsar_storage_write_latency_* and the ML add latency.
WRITE_LATENCY_BOUNDS_MS: tuple[float, ...] = (0.5, 1, 5, 10, 20, 50, 100, 200, 1000)
# Their suffixes in metric names: le_0_5, le_1, ... ; then "overflow".
WRITE_LATENCY_SUFFIXES: tuple[str, ...] = tuple(
    "le_" + f"{b:g}".replace(".", "_") for b in WRITE_LATENCY_BOUNDS_MS
)

# Entry sizes (bytes) for pulsar_entry_size_le_*: 128 B .. 1 MB, then "le_overflow".
ENTRY_SIZE_BOUNDS: tuple[float, ...] = (128, 512, 1024, 2048, 4096, 16384, 102400, 1048576)
ENTRY_SIZE_SUFFIXES: tuple[str, ...] = (
    "le_128", "le_512", "le_1_kb", "le_2_kb", "le_4_kb", "le_16_kb", "le_100_kb", "le_1_mb",
)  # fmt: skip


@cache
def _zeros(bounds: tuple[float, ...]) -> tuple[int, ...]:
    return (0,) * (len(bounds) + 1)


@dataclass(slots=True)
class LatencyBuckets:
    """Fixed buckets of a value (milliseconds by default; ``ENTRY_SIZE_BOUNDS`` for sizes)."""

    bounds: tuple[float, ...] = WRITE_LATENCY_BOUNDS_MS
    # len(bounds) + 1 (overflow last); a shared tuple of zeros until the first record
    counts: list[int] | tuple[int, ...] = ()
    count: int = 0
    sum_ms: float = 0.0

    def __post_init__(self) -> None:
        if not self.counts:
            self.counts = _zeros(self.bounds)

    def record(self, ms: float) -> None:
        self.count += 1
        self.sum_ms += ms
        counts = self.counts
        if type(counts) is tuple:
            counts = self.counts = list(counts)
        # The first bound >= ms (the bucket "le" that bound), or overflow past the last.
        counts[bisect_left(self.bounds, ms)] += 1

    def merge(self, others: Iterable[LatencyBuckets]) -> LatencyBuckets:
        if type(self.counts) is tuple:
            self.counts = list(self.counts)
        for o in others:
            self.count += o.count
            self.sum_ms += o.sum_ms
            for i, c in enumerate(o.counts):
                self.counts[i] += c
        return self

    def cumulative(self) -> list[tuple[float, int]]:
        """(upper bound, cumulative count) pairs ending with (+inf, count): a Prometheus histogram."""
        out = []
        total = 0
        for bound, c in zip((*self.bounds, float("inf")), self.counts, strict=True):
            total += c
            out.append((bound, total))
        return out
