"""Sizes and repetitions for the full run and for ``--quick`` (CI: under a minute)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bench.compare.measure import Log


@dataclass
class Config:
    quick: bool
    scratch: Path  #: directory for the SQLite files of the durable figures
    log: Log
    # 1. in memory, end to end
    inmem_n: int = 100_000
    inmem_window: float = 0.2
    inmem_reps: int = 5
    sweep: list[int] = field(default_factory=lambda: [10_000, 30_000, 100_000, 300_000, 1_000_000])
    sweep_reps: int = 2  #: rounds per sweep point (1 at 1M)
    cancel_n: int = 100_000
    # 2. lateness
    lat_n: int = 100_000
    lat_window: float = 5.0
    lat_lead: float = 2.5  #: seconds between the start of scheduling and the first due
    lat_reps: int = 3
    # 3. memory
    mem_n: int = 1_000_000
    mem_reps: int = 1
    # 4. durable scheduling
    dur_n: int = 100_000  #: schedule_many, in batches of 1,000
    dur_gather_n: int = 20_000  #: concurrent awaited schedule() calls (issue 10's target: 20k)
    dur_serial_n: int = 1_000  #: awaited schedule() one after another
    dur_aps_n: int = 500
    dur_huey_n: int = 2_000
    dur_reps: int = 3
    # 5. firing due durable timers
    fire_n: int = 20_000
    fire_aps_n: int = 300
    fire_huey_n: int = 2_000
    fire_reps: int = 3
    # 6. recovery
    rec_sizes: list[int] = field(default_factory=lambda: [100_000, 1_000_000])
    rec_reps: int = 3
    # 7. CPU per timer against timers pending (10M needs several GB: skipped if it cannot fit)
    scale_sizes: list[int] = field(default_factory=lambda: [10_000, 100_000, 1_000_000, 10_000_000])
    scale_ops: int = 20_000  #: schedule+fire (and schedule+cancel) operations a round
    scale_window: float = 0.2  #: seconds the operations' dues are spread over
    scale_reps: int = 3

    def set_rounds(self, n: int) -> None:
        """The same number of interleaved rounds for every comparison (``--rounds``)."""
        for name in ("inmem_reps", "sweep_reps", "lat_reps", "mem_reps", "dur_reps"):
            setattr(self, name, n)
        self.fire_reps = n
        self.rec_reps = n
        self.scale_reps = n

    @classmethod
    def make(cls, quick: bool, scratch: Path, log: Log) -> Config:
        if not quick:
            return cls(quick=False, scratch=scratch, log=log)
        return cls(
            quick=True,
            scratch=scratch,
            log=log,
            inmem_n=30_000,
            inmem_window=0.05,
            inmem_reps=3,
            sweep=[10_000, 30_000, 100_000],
            sweep_reps=1,
            cancel_n=30_000,
            lat_n=20_000,
            lat_window=0.5,
            lat_lead=0.5,
            lat_reps=2,
            mem_n=100_000,
            mem_reps=1,
            dur_n=10_000,
            dur_gather_n=2_000,
            dur_serial_n=100,
            dur_aps_n=60,
            dur_huey_n=100,
            dur_reps=2,
            fire_n=2_000,
            fire_aps_n=60,
            fire_huey_n=100,
            fire_reps=1,
            rec_sizes=[10_000],
            rec_reps=3,
            scale_sizes=[10_000, 100_000],
            scale_ops=5_000,
            scale_window=0.05,
            scale_reps=2,
        )
