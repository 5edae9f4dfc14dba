"""The model of a ledger-client simulation run: settings drawn from a seed, what the
writer did per ledger, and the report (with the command that replays a failing seed).

See :mod:`magnetar.testing.sim_bookkeeper` for the simulation itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from magnetar.runtime import Rng

REPLAY_HINT = (
    "replay with: MAGNETAR_SIM_SEED={seed} MAGNETAR_SIM_STORAGE={storage} .venv/bin/python -m pytest -q "
    "tests/simulation/test_bk_simulation.py::test_replay_seed -s"
)


@dataclass(frozen=True)
class SimSettings:
    seed: int
    storage: bool
    bookies: int
    ensemble: int
    write_quorum: int
    ack_quorum: int
    entries_max: int
    window: int
    safety_s: float
    max_down: int
    crash_probability: float
    partition_probability: float
    fsync_slow_probability: float
    recoveries: int
    autorecovery: bool  # an auditor + replication worker run throughout
    decommission: bool  # in the liveness phase one bookie dies for good; auto-recovery must repair
    small_disk_bytes: int  # storage mode: one bookie's disk is this small (0: none); ENOSPC -> read-only
    metadata_fault_probability: float  # clients' metadata calls fail / lose their answer

    @classmethod
    def draw(cls, seed: int, rng: Rng, storage: bool = False) -> SimSettings:
        bookies = rng.randint(4, 6)
        e = rng.randint(2, min(4, bookies - 1))
        qw = rng.randint(2, e) if e > 2 else 2
        qa = rng.randint(1, qw)
        return cls(
            seed=seed,
            storage=storage,
            bookies=bookies,
            ensemble=e,
            write_quorum=qw,
            ack_quorum=qa,
            entries_max=rng.randint(40, 160),
            window=rng.choice([1, 4, 16]),
            safety_s=rng.uniform(1.0, 4.0),
            max_down=rng.randint(1, bookies - e),
            crash_probability=rng.choice([0.0, 0.1, 0.3]),
            partition_probability=rng.choice([0.0, 0.05, 0.2]),
            fsync_slow_probability=rng.choice([0.0, 0.01, 0.05]),
            recoveries=rng.choice([0, 1, 1, 2]),
            autorecovery=(autorecovery := rng.chance(0.5)),
            decommission=rng.chance(0.7) and autorecovery and qa >= 2,
            small_disk_bytes=rng.choice([0, 0, 0, 6_000, 15_000]),
            metadata_fault_probability=rng.choice([0.0, 0.0, 0.01, 0.03]),
        )


@dataclass
class LedgerRecord:
    ledger_id: int
    pushed: dict[int, bytes] = field(default_factory=dict)
    acked: set[int] = field(default_factory=set)
    recovered_last: int | None = None
    recovered_at: float | None = None
    writer_closed_at: int | None = None


@dataclass
class SimReport:
    settings: SimSettings
    ledgers: list[LedgerRecord]
    violations: list[str]
    counters: dict[str, int]

    @property
    def ok(self) -> bool:
        return not self.violations

    def describe(self) -> str:
        acked = sum(len(r.acked) for r in self.ledgers)
        head = f"seed {self.settings.seed}: {self.settings}\n  ledgers={len(self.ledgers)} acked={acked} {self.counters}"
        if self.ok:
            return head
        return "\n".join(
            [
                head,
                *("  VIOLATION: " + v for v in self.violations),
                "  " + REPLAY_HINT.format(seed=self.settings.seed, storage=int(self.settings.storage)),
            ]
        )
