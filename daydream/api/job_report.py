"""A simulated multi-rank job as data: its report (what ``daydream simulate DIR --json`` prints) and the result
object the Python API returns, whoever simulated it (this process, every rank at once: :mod:`daydream.api.job`; or
workers that each hold some ranks: :mod:`daydream.api.job_workers`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
import networkx as nx

from daydream.api.replay import relative_error
from daydream.simulation import Timeline
from daydream.simulation.ranks import RankResult, Straggler
from daydream.units import brief_repr, ms


class JobRank(msgspec.Struct):
    """A rank of the unchanged job as a row: its step under the one name a replay's step has, ``baseline_us``;
    ``predicted_us`` repeats it under the name docs/multigpu.md gave it first."""

    __repr__ = brief_repr  # one screen, whatever it holds

    rank: int
    measured_us: float
    baseline_us: float
    error_pct: float
    wait_us: float  # in collectives, waiting for the ranks that reached them later
    offset_us: float  # its step's start after the job's first rank's
    held_us: float  # how much later collectives started because this rank reached them last
    same_as: int | None
    predicted_us: float

    @classmethod
    def of(cls, r: RankResult) -> JobRank:
        return cls(
            r.rank, r.measured_us, r.step_us, r.error_pct, r.wait_us, r.offset_us, r.held_us, r.same_as, r.step_us
        )


class JobReplayReport(msgspec.Struct):
    """A simulated job as data: what ``daydream simulate DIR --json`` prints, in this order, and what renderers read.
    ``predicted_us`` repeats the baseline under the name docs/multigpu.md gave it first."""

    __repr__ = brief_repr  # one screen, whatever it holds

    trace: str | None
    device: str | None  # the device the traces were recorded on (the first rank's): its name, and its type below
    world_size: int | None
    measured_us: float  # the slowest rank's measured step
    baseline_us: float  # the job's step: the slowest rank's window, the unchanged job replayed
    predicted_us: float
    error_pct: float
    slowest_rank: int  # the rank whose window is the job's step (the breakdown's)
    steps: list[str]
    ranks: list[JobRank]
    straggler: Straggler | None
    collectives: dict[str, Any] | None  # JobCollectives in the shape the job's JSON has had (its to_builtins)
    tasks: int
    simulated_ranks: int  # ranks with tasks of their own (the others share a twin's)
    breakdown: dict[str, float]  # of the job's step: the slowest rank's tasks over its window (adds up to baseline_us)
    warnings: list[str]
    workers: WorkersUsed | None = None  # the workers that simulated the job (None: this process, every rank at once)
    device_type: str | None = None  # gpu, or a CPU recording's (x86_64 ...: cpu)


class WorkersUsed(msgspec.Struct):
    """The workers a job was simulated by (:mod:`daydream.api.job_workers`): how many, where (local processes, Ray
    actors, this process), the rounds they met in, and each one's peak resident memory."""

    count: int
    kind: str
    rounds: int
    peak_bytes: list[int]


@dataclass(repr=False)
class JobReplay:
    """A simulated multi-rank job: :attr:`report`, the data, with the job graph, its timeline and each rank's result
    (graph and timeline None where workers simulated it: no process holds the whole job), and when each collective
    started (by id, ``world#3``). ``repr`` is one line; :meth:`rows` gives one row per rank
    (``pandas.DataFrame(job.rows())``)."""

    report: JobReplayReport
    graph: nx.DiGraph | None
    timeline: Timeline | None
    ranks: list[RankResult]
    straggler: Straggler | None
    collective_starts: dict[str, float]

    def rows(self) -> list[dict[str, Any]]:
        """One row per rank: measured and baseline step, error, waits, offset, held time (us), and ``same_as``."""
        return [{k: v for k, v in msgspec.to_builtins(r).items() if k != "predicted_us"} for r in self.report.ranks]

    def __repr__(self) -> str:
        slowest = next(r for r in self.ranks if r.rank == self.report.slowest_rank)
        return (
            f"JobReplay(trace={self.report.trace!r}, {len(self.ranks)} ranks, slowest rank {slowest.rank}: "
            f"measured {ms(slowest.measured_us)}, baseline {ms(slowest.step_us)}, straggler "
            f"{self.straggler.rank if self.straggler is not None else None})"
        )

    # the report's fields, read through it: the data has one copy, the report's
    @property
    def measured_us(self) -> float:
        """The slowest rank's measured step."""
        return self.report.measured_us

    @property
    def baseline_us(self) -> float:
        """The slowest rank's step, the unchanged job replayed."""
        return self.report.baseline_us

    @property
    def breakdown(self) -> dict[str, float]:
        return self.report.breakdown

    @property
    def warnings(self) -> list[str]:
        return self.report.warnings

    @property
    def workers(self) -> WorkersUsed | None:
        """The workers that simulated the job (None: this process simulated every rank at once)."""
        return self.report.workers

    @property
    def error(self) -> float:
        return relative_error(self.baseline_us, self.measured_us)

    def to_dict(self) -> dict[str, Any]:
        """:attr:`report` as JSON values."""
        return msgspec.to_builtins(self.report)


__all__ = ["JobRank", "JobReplay", "JobReplayReport", "WorkersUsed"]
