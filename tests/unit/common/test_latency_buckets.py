from magnetar.common.latency import WRITE_LATENCY_SUFFIXES, LatencyBuckets


def test_buckets_count_their_own_range_and_bounds_are_inclusive() -> None:
    b = LatencyBuckets()
    for ms in (0.1, 0.5, 0.6, 1.0, 3, 1000, 1000.1, 5000):
        b.record(ms)
    assert dict(zip((*WRITE_LATENCY_SUFFIXES, "overflow"), b.counts, strict=True)) == {
        "le_0_5": 2, "le_1": 2, "le_5": 1, "le_10": 0, "le_20": 0, "le_50": 0,
        "le_100": 0, "le_200": 0, "le_1000": 1, "overflow": 2,
    }  # fmt: skip
    assert b.count == 8 and abs(b.sum_ms - 7005.3) < 1e-9
    assert b.cumulative()[-1] == (float("inf"), 8)
    assert [c for _, c in b.cumulative()] == sorted(c for _, c in b.cumulative())


def test_merge_sums_counts() -> None:
    a, b = LatencyBuckets(), LatencyBuckets()
    a.record(2)
    b.record(2)
    b.record(300)
    total = LatencyBuckets().merge([a, b])
    assert total.count == 3 and total.counts[2] == 2 and total.counts[8] == 1
