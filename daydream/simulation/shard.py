"""Some of a job's ranks simulated apart from the others, meeting them at collectives: a job too large for one
process is simulated by workers that each hold a :class:`Shard` of its ranks (:mod:`daydream.api.job_workers`).

Ranks depend on one another only through their collectives (a collective starts when its last member arrives, and
ends at once on all), so a shard runs its ranks' tasks with the joint simulation's loop
(:func:`daydream.simulation.compiled._advance`, the same code) until it could go no further without knowing when a
collective starts: once every member it holds of a collective has arrived, and some are elsewhere, the tasks it may
run are those that would run no later than the earliest the collective can start (its members' latest arrival known
so far, and the earliest any part still to report could arrive: conservative synchronization, as parallel
discrete-event simulators do it). A coordinator gathers the arrivals of each round, starts each collective once all
its parts have reported (at its last arrival, for the longest member's duration: the joint simulation's rule), and
tells each part its collectives' starts and how far the others have come. Every task starts when it would in the
joint simulation: the same loop, with the same arrivals, in the same order on each thread.

A shard holds each rank as flat arrays (:class:`RankArrays`, some 150 bytes a task with the simulation's state),
never its graph: a worker's memory grows with its own ranks' tasks, not the job's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import msgspec
import networkx as nx
import numpy as np

from daydream.graph.adjacency import task_columns
from daydream.graph.job import CommTask, comm_tasks
from daydream.simulation import compiled
from daydream.simulation.engine import read_arrays, timing_arrays
from daydream.simulation.policies import Policy
from daydream.simulation.timeline import Timeline


@dataclass(frozen=True, slots=True)
class RankArrays:
    """One rank's graph as a shard simulates it: the compiled loop's arrays (engine.GraphArrays: its threads
    numbered from 0, each task's release time, -inf where it has none), each task's step as a number
    (``step_names``: in order of first appearance, as Timeline.codes numbers them) and the graph's steps, and the
    places of its comm tasks."""

    duration: np.ndarray
    prio: np.ndarray
    gap: np.ndarray
    thread: np.ndarray
    n_threads: int
    release: np.ndarray
    ptr: np.ndarray
    child: np.ndarray
    order: np.ndarray
    lag: np.ndarray
    indegree: np.ndarray
    step_codes: np.ndarray
    step_names: list[Any]
    steps: list[Any]
    comm: np.ndarray  # the places of its comm tasks, in task order (as comm_tasks lists them)
    nan: bool  # a NaN duration, gap, lag, release time or priority: only the Python loop orders those

    @property
    def tasks(self) -> int:
        return len(self.duration)

    @property
    def nbytes(self) -> int:
        return sum(
            a.nbytes
            for a in (
                self.duration,
                self.prio,
                self.gap,
                self.thread,
                self.release,
                self.ptr,
                self.child,
                self.order,
                self.lag,
                self.indegree,
                self.step_codes,
                self.comm,
            )
        )

    def ready(self, offset_us: float) -> np.ndarray:
        """Each task's release time on the job's clock, its step starting ``offset_us`` after the job's first rank's:
        a task's own moved by the offset, a task with no parent released at the offset (as join_ranks releases
        them), -inf for the others (released by their parents)."""
        ready = self.release + offset_us
        ready[(self.indegree == 0) & (self.release == -math.inf)] = offset_us if offset_us else 0.0
        return ready


def rank_arrays(graph: nx.DiGraph, policy: Policy) -> tuple[RankArrays, list[CommTask]]:
    """A rank's graph (one trace's, built; scripts may have changed it) as a shard holds it, and its comm tasks on
    its own clock (rank -1, its tasks numbered from 0: the job places them)."""
    arrays = read_arrays(graph)
    duration, prio = timing_arrays(graph, arrays, policy)
    tasks = task_columns(graph)
    released = tasks.values("release") if tasks is not None else [a.get("release") for a in arrays.attrs or ()]
    steps = tasks.values("step") if tasks is not None else [a.get("step") for a in arrays.attrs or ()]
    release = np.fromiter((-math.inf if r is None else r for r in released), np.float64, len(released))
    distinct = dict.fromkeys(steps)
    number = dict(zip(distinct, range(len(distinct))))
    comms = comm_tasks(graph, -1)
    nan = bool(arrays.nan or np.isnan(duration).any() or np.isnan(prio).any() or np.isnan(release).any())
    return RankArrays(
        duration=duration,
        prio=prio,
        gap=arrays.gap,
        thread=arrays.thread,
        n_threads=len(arrays.thread_ids),
        release=release,
        ptr=arrays.ptr,
        child=arrays.child,
        order=arrays.order,
        lag=arrays.lag,
        indegree=arrays.indegree,
        step_codes=np.fromiter(map(number.__getitem__, steps), np.int32, len(steps)),
        step_names=list(distinct),
        steps=list(graph.graph.get("steps") or []),
        comm=np.asarray([t.order for t in comms], np.int64),
        nan=nan,
    ), comms


class GangArrival(msgspec.Struct, frozen=True, array_like=True):
    """A shard's members of a collective, all arrived: the latest arrival, the lowest rank that arrived then (the
    member the others' starts wait for, as the joint loop picks it), the longest duration."""

    gang: int
    arrival_us: float
    rank: int
    longest_us: float


class Progress(msgspec.Struct, frozen=True, array_like=True):
    """What a round of a shard did: tasks run, its clock (the earliest key of a task still to run: no member of a
    collective it holds arrives earlier, but for the collectives still to start), the collectives whose members here
    have all arrived, and whether every task has run."""

    ran: int
    clock_us: float
    arrived: list[GangArrival]
    finished: bool


class GangMembers(msgspec.Struct, frozen=True, array_like=True):
    """A shard's members of a collective once the job has run: its start, and the two latest arrivals with their
    ranks (by arrival, then rank: the order the joint job's stable sort leaves them in)."""

    gang: int
    start_us: float
    latest: list[tuple[float, int]]


class RankWindow(msgspec.Struct, frozen=True, array_like=True):
    """A rank once the job has run: its window's start and its step (Timeline.step_us over its tasks), and its
    wait in collectives (each collective's start less its arrival, added in collective order); its window's end and
    the measured steps it holds (Timeline.step_window)."""

    rank: int
    start_us: float
    step_us: float
    wait_us: float
    end_us: float = 0.0
    measured: int = 0


class Shard:
    """Ranks of a job simulated together, their collectives with ranks elsewhere completed from outside.

    ``ranks``: (rank, its step's start after the job's first rank's, its arrays), in rank order; ``gangs``: per rank,
    each comm task's collective (its number among the job's, in order of first appearance; -1: none); ``members``:
    each collective's members in the whole job (a collective of one member is none: its task runs alone, as in the
    joint simulation). The arrays are taken over (the durations are the ranks' own, changed in place)."""

    def __init__(
        self, parts: list[tuple[int, float, RankArrays]], gangs: list[np.ndarray], members: np.ndarray, policy: Policy
    ) -> None:
        if policy.kind == "fifo":
            raise ValueError("a job simulated in parts needs a policy that orders tasks by time (earliest or priority)")
        self.mode = compiled.PRIORITY if policy.kind == "priority" else compiled.EARLIEST
        self.ranks = [rank for rank, _, _ in parts]
        ranks = [arrays for _, _, arrays in parts]
        sizes = [r.tasks for r in ranks]
        self.first = np.zeros(len(ranks) + 1, np.int64)
        np.cumsum(sizes, out=self.first[1:])
        n = int(self.first[-1])
        thread_base = np.cumsum([0] + [r.n_threads for r in ranks])
        self.n_threads = int(thread_base[-1])
        cat = np.concatenate
        self.duration = cat([r.duration for r in ranks]) if ranks else np.zeros(0)
        self.prio = cat([r.prio for r in ranks]) if self.mode == compiled.PRIORITY else np.zeros(1)
        self.gap = cat([r.gap for r in ranks]) if ranks else np.zeros(0)
        self.thread = cat([r.thread + b for r, b in zip(ranks, thread_base)]) if ranks else np.zeros(0, np.int64)
        self.ready = cat([r.ready(offset) for _, offset, r in parts]) if ranks else np.zeros(0)
        self.indegree = cat([r.indegree for r in ranks]) if ranks else np.zeros(0, np.int64)
        edge_base = np.cumsum([0] + [len(r.child) for r in ranks])
        self.ptr = np.zeros(n + 1, np.int64)
        for r, b, e in zip(ranks, self.first, edge_base):
            self.ptr[b : b + r.tasks + 1] = r.ptr + e
        self.child = cat([r.child + b for r, b in zip(ranks, self.first)]) if ranks else np.zeros(0, np.int64)
        self.order = cat([r.order for r in ranks]) if ranks else np.zeros(0, np.bool_)
        self.lag = cat([r.lag for r in ranks]) if ranks else np.zeros(0)
        self.steps = [(r.step_codes, r.step_names, r.steps) for r in ranks]
        self.nan = any(r.nan for r in ranks)
        # the collectives: gang g's members here in task order, and its size in the whole job
        n_gangs = len(members)
        self.gang_of = np.full(n if n_gangs else 1, -1, np.int64)
        for r, b, g in zip(ranks, self.first, gangs):
            real = (g >= 0) & (members[np.maximum(g, 0)] > 1) if len(g) else np.zeros(0, np.bool_)
            self.gang_of[b + r.comm[real]] = g[real]
        held = np.flatnonzero(self.gang_of >= 0) if n_gangs else np.zeros(0, np.int64)
        by_gang = np.argsort(self.gang_of[held], kind="stable")
        self.gang_members = held[by_gang]
        self.gang_ptr = np.zeros(n_gangs + 1, np.int64)
        np.cumsum(np.bincount(self.gang_of[held], minlength=n_gangs), out=self.gang_ptr[1:])
        self.gang_size = np.where(members > 1, members, 0).astype(np.int64)
        self.gang_bound = np.full(n_gangs, -np.inf)
        self.waiting: set[int] = set()  # collectives whose members here have all arrived, not started yet
        self.state = compiled._new_state(self.mode, n, n_gangs, self.n_threads)
        (
            self.start,
            self.end,
            self.cause,
            self.arrival,
            self.arrived,
            self.progress,
            self.last_on_thread,
            self.holding,
            self.park_head,
            self.park_tail,
            self.park_next,
            self.k1,
            self.k2,
            self.k3,
            self.sq,
            self.tk,
            self.queue,
            self.counters,
            self.horizon,
            self.became,
        ) = self.state
        compiled._seed(
            self.mode,
            self.ready,
            self.progress,
            self.thread,
            self.prio,
            self.indegree,
            self.k1,
            self.k2,
            self.k3,
            self.sq,
            self.tk,
            self.queue,
            self.counters,
        )

    @property
    def tasks(self) -> int:
        return len(self.duration)

    def holds(self) -> list[int]:
        """The collectives with a member here (of two members or more in the job)."""
        return np.flatnonzero(np.diff(self.gang_ptr) > 0).tolist()

    def rank_of(self, task: int) -> int:
        return self.ranks[int(np.searchsorted(self.first, task, side="right")) - 1]

    def advance(self, started: list[tuple[int, float, float, int]], bounds: dict[int, float]) -> Progress:
        """One round: the collectives ``started`` (gang, start, end, the rank whose arrival started it) run here;
        ``bounds``: for collectives still waiting, the earliest their other members can arrive as far as the others
        have come. Then run every task that cannot depend on a collective still to start."""
        before = int(self.counters[compiled.DONE])
        size, qtail, seq = (
            int(self.counters[compiled.SIZE]),
            int(self.counters[compiled.QTAIL]),
            int(self.counters[compiled.SEQ]),
        )
        for g, s, e, last_rank in started:
            self.waiting.discard(g)
            last = self.member_of(g, last_rank)
            size, qtail, seq = compiled._finish_gang(
                g,
                s,
                e,
                last if last >= 0 else -2 - last_rank,
                -1,
                self.mode,
                self.gang_ptr,
                self.gang_members,
                self.start,
                self.end,
                self.progress,
                self.last_on_thread,
                self.gap,
                self.ready,
                self.cause,
                self.arrival,
                self.indegree,
                self.ptr,
                self.child,
                self.order,
                self.lag,
                self.thread,
                self.prio,
                self.holding,
                self.park_head,
                self.park_tail,
                self.park_next,
                self.k1,
                self.k2,
                self.k3,
                self.sq,
                self.tk,
                size,
                self.queue,
                qtail,
                seq,
            )
            self.counters[compiled.DONE] += self.gang_ptr[g + 1] - self.gang_ptr[g]
        self.counters[compiled.SIZE], self.counters[compiled.QTAIL], self.counters[compiled.SEQ] = size, qtail, seq
        for g, b in bounds.items():
            self.gang_bound[g] = b
        self.horizon[0] = min((self._earliest(g) for g in self.waiting), default=math.inf)
        n_before = int(self.counters[compiled.BECAME])
        compiled._advance(
            self.mode,
            self.duration,
            self.gap,
            self.thread,
            self.ready,
            self.prio,
            self.indegree,
            self.ptr,
            self.child,
            self.order,
            self.lag,
            self.gang_of,
            self.gang_ptr,
            self.gang_members,
            self.gang_size,
            self.gang_bound,
            *self.state,
        )
        arrived = []
        for g in self.became[n_before : int(self.counters[compiled.BECAME])].tolist():
            self.waiting.add(g)
            members = self.gang_members[self.gang_ptr[g] : self.gang_ptr[g + 1]]
            last = int(members[0])  # the first member to arrive last, as the joint loop picks it
            for m in members[1:].tolist():
                if self.arrival[m] > self.arrival[last]:
                    last = m
            arrived.append(
                GangArrival(g, float(self.arrival[last]), self.rank_of(last), float(self.duration[members].max()))
            )
        size = int(self.counters[compiled.SIZE])
        clock = float(self.k1[0]) if size else math.inf
        done = int(self.counters[compiled.DONE])
        return Progress(done - before, clock, arrived, done == self.tasks)

    def _earliest(self, g: int) -> float:
        """The earliest collective g can start: its members' latest arrival here, or its bound if later."""
        members = self.gang_members[self.gang_ptr[g] : self.gang_ptr[g + 1]]
        return max(float(self.gang_bound[g]), float(self.arrival[members].max()))

    def member_of(self, g: int, rank: int) -> int:
        """Rank ``rank``'s member of collective g, where the rank is here; -1 where it is not."""
        if rank not in self.ranks:
            return -1
        k = self.ranks.index(rank)
        members = self.gang_members[self.gang_ptr[g] : self.gang_ptr[g + 1]]
        mine = members[(members >= self.first[k]) & (members < self.first[k + 1])]
        return int(mine[0]) if len(mine) else -1

    def pending(self) -> dict[int, tuple[list[int], list[int]]]:
        """Collectives reached here and not started (a job that cannot finish): per collective, the ranks here that
        reached it and those that did not."""
        out = {}
        partial = (self.arrived > 0) & (self.arrived < np.diff(self.gang_ptr))
        for g in sorted({*np.flatnonzero(partial).tolist(), *self.waiting}):
            members = self.gang_members[self.gang_ptr[g] : self.gang_ptr[g + 1]].tolist()
            came = [self.rank_of(m) for m in members if not math.isnan(self.arrival[m])]
            out[g] = (came, [self.rank_of(m) for m in members if math.isnan(self.arrival[m])])
        return out

    def unfinished(self) -> dict[int, int]:
        """Per rank here, the tasks that never became ready (their parents never all ran)."""
        counts = {}
        for k, rank in enumerate(self.ranks):
            b, e = int(self.first[k]), int(self.first[k + 1])
            counts[rank] = int(self.indegree[b:e].astype(np.bool_).sum())
        return counts

    def timeline(self, k: int, graph: nx.DiGraph | None = None) -> Timeline:
        """Rank ``self.ranks[k]``'s tasks as a timeline of their own: over ``graph``, its graph (read again from its
        trace: its tasks in the same order), or else over a graph that holds only its steps (enough for its window
        and step, Timeline.step_us). A task's cause in another rank is -2 - that rank (the critical path stops
        there, and _way_to names the rank)."""
        b, e = int(self.first[k]), int(self.first[k + 1])
        codes, names, steps = self.steps[k]
        columns: dict[str, tuple[np.ndarray, list[Any]]] = {"step": (codes.astype(np.int64), names)}
        if graph is None:
            graph = nx.DiGraph()
            graph.graph["steps"] = steps
        elif len(graph) != e - b:
            raise ValueError(f"rank {self.ranks[k]}'s graph has {len(graph)} tasks, its arrays {e - b}")
        cause = self.cause[b:e].copy()
        inside = (cause >= b) & (cause < e)
        cause[inside] -= b
        elsewhere = np.flatnonzero((cause >= 0) & ~inside)
        if len(elsewhere):  # another rank of this shard's
            cause[elsewhere] = [-2 - self.rank_of(int(c)) for c in self.cause[b:e][elsewhere].tolist()]
        arrival = self.arrival[b:e] if len(self.arrival) == self.tasks else None
        return Timeline(
            graph, list(range(e - b)), self.start[b:e], self.end[b:e], cause, [], arrival=arrival, _columns=columns
        )

    def windows(self) -> list[RankWindow]:
        """Each rank's window, step and wait in collectives."""
        out = []
        for k, rank in enumerate(self.ranks):
            timeline = self.timeline(k)
            b, e = int(self.first[k]), int(self.first[k + 1])
            wait = 0.0
            mine = (
                np.flatnonzero(self.gang_of[b:e] >= 0) + b if len(self.gang_of) == self.tasks else np.zeros(0, np.int64)
            )
            for m in mine[np.argsort(self.gang_of[mine], kind="stable")].tolist():
                wait += float(self.start[m] - self.arrival[m])
            start, end, measured = timeline.step_window()
            out.append(RankWindow(rank, start, timeline.step_us(), wait, end, measured))
        return out

    def members(self) -> list[GangMembers]:
        """Each collective with a member here: its start and the two latest arrivals here."""
        out = []
        for g in self.holds():
            members = self.gang_members[self.gang_ptr[g] : self.gang_ptr[g + 1]].tolist()
            latest = sorted((float(self.arrival[m]), self.rank_of(m)) for m in members)[-2:]
            out.append(GangMembers(g, float(self.start[members[0]]), latest))
        return out
