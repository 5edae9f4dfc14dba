"""magnetar perf: argument parsing and the report arithmetic (no broker needed)."""

from __future__ import annotations

import random

from magnetar.cli.main import build_parser
from magnetar.cli.perf import RESERVOIR_SAMPLES_MAX, IntervalStats, format_line, percentile


def test_percentile_picks_nearest_rank():
    values = sorted(float(i) for i in range(1, 101))
    assert percentile(values, 50) == 51.0 or percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile(values, 100) == 100.0
    assert percentile([], 99) == 0.0


def test_format_line_rates():
    line = format_line("Produced", 2000, 2 * 1024 * 1024, 2.0, [1.0, 2.0, 3.0])
    assert "1000.0 msg/s" in line and "1.000 MB/s" in line and "max 3.000" in line


def test_reservoir_is_bounded_and_counts_everything():
    stats = IntervalStats(random.Random(0))
    for i in range(RESERVOIR_SAMPLES_MAX + 5000):
        stats.record(10, float(i))
    count, nbytes, samples = stats.reset()
    assert count == RESERVOIR_SAMPLES_MAX + 5000 and nbytes == 10 * count
    assert len(samples) == RESERVOIR_SAMPLES_MAX
    assert stats.reset()[0] == 0


def test_parser_accepts_pulsar_perf_style_options():
    args = build_parser().parse_args(
        [
            "perf",
            "produce",
            "t1",
            "-u",
            "pulsar://127.0.0.1:6650",
            "-r",
            "5000",
            "-s",
            "1024",
            "-b",
            "off",
            "-t",
            "3",
        ]
    )
    assert args.rate == 5000 and args.size == 1024 and args.batch == "off" and args.num_topics == 3
    args = build_parser().parse_args(["perf", "consume", "t1", "-n", "2", "--earliest", "-m", "10"])
    assert args.num_consumers == 2 and args.earliest and args.num_messages == 10
