"""A job simulated by workers that each hold some of its ranks: ``daydream simulate DIR`` on a job too large for
one process (thousands of ranks, or ranks of a million events each), on local worker processes or a Ray cluster.

Each worker reads and builds its ranks' traces and keeps each rank as flat arrays (:mod:`daydream.simulation.shard`),
never its graph; no process holds the whole job. This process, the coordinator, learns from the workers only what
the job needs whole: each rank's number, step start and measured step, and its comm tasks, from which it numbers
the ranks, matches the collectives across them (:func:`daydream.graph.job.match_comm_tasks`) and prices them
(:func:`daydream.perf.collectives.job.price_gangs`), as the joint simulation does. Then the job runs in rounds:
each worker runs its ranks as far as it can without knowing when a collective with members elsewhere starts, and
says which collectives its members have all reached, when, and how far its ranks have come (its clock); the
coordinator starts each collective once every worker holding a member has reported it (at its last arrival, for
its longest member's duration) and tells each worker those starts and, for the collectives it still waits on, the
earliest the others could arrive. The result is the joint simulation's, rank for rank (tests/test_job_workers.py),
in memory that grows per worker with its own ranks.

Ranks with the same graph share one set of tasks here too (the lowest rank of each fingerprint is simulated); a
rank's breakdown and the straggler's way to the collectives it held are worked out by the worker that holds it, from
its trace read again.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing
import os
import resource
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
import networkx as nx
import numpy as np

from daydream import progress
from daydream.api.job_report import JobRank, JobReplay, JobReplayReport, WorkersUsed
from daydream.api.replay import recording_device, relative_error
from daydream.errors import DaydreamError, TraceError
from daydream.graph.build import build_graph
from daydream.graph.job import CommTask, format_ranks, match_comm_tasks, rank_fingerprint
from daydream.graph.schema import JobCollectives, RankInfo
from daydream.perf.collectives import Link
from daydream.perf.collectives.job import price_gangs
from daydream.simulation import EARLIEST, Policy, breakdown
from daydream.simulation.ranks import (
    HeldCollective,
    RankResult,
    Straggler,
    _way_to,
    held_collectives,
    job_rank_results,
    straggler_of,
    straggler_rank,
)
from daydream.simulation.shard import GangArrival, GangMembers, Progress, RankArrays, RankWindow, Shard, rank_arrays
from daydream.trace import load_trace
from daydream.trace.job import check_ranks, rank_trace_files
from daydream.workers import connect_ray

# seconds the Ray actors have to start (a cluster without room for them would otherwise leave the job waiting)
RAY_START_S = 120

# ranks a worker builds per call: the coordinator counts them as they come (progress) and hands out the rest
RANKS_PER_CALL = 16


class RankBuilt(msgspec.Struct):
    """What building a rank's graph tells the coordinator: the rank the trace names, its world and steps, its
    measured step and where it starts, its fingerprint (what twins share), task count, warnings, device and comm
    tasks (on its own clock)."""

    index: int
    trace: str
    named_rank: int | None
    world_size: int | None
    steps: list[str]
    measured_us: float
    origin_us: float
    fingerprint: str
    tasks: int
    warnings: list[str]
    device: tuple[str | None, str | None]  # its name and type, as recording_device says them
    comm: list[CommTask]


class RankPlan(msgspec.Struct, array_like=True):
    """What the coordinator tells a worker of one of its ranks: its number, its step's start after the job's first
    rank's, whether it is simulated (False: a twin's tasks stand for it), and per comm task its collective (its
    number among the job's; -1: none) and priced duration."""

    index: int
    rank: int
    offset_us: float
    simulated: bool
    gangs: list[int]
    durations: list[float]


class JobWorker:
    """The ranks one worker holds: built (:meth:`build`), planned (:meth:`plan`), simulated in rounds
    (:meth:`advance`) and read (:meth:`windows`, :meth:`members`, :meth:`detail`). Lives in a worker process or a Ray
    actor; every call's arguments and answer are plain data."""

    def __init__(self) -> None:
        self.built: dict[int, tuple[str, RankArrays]] = {}
        self.shard: Shard | None = None
        self.step: str | int | None = None
        self.paths: dict[int, str] = {}  # rank -> its trace
        self.plans: dict[int, RankPlan] = {}  # rank -> where the job placed it
        self.scripted: dict[int, RankArrays] = {}  # rank -> its arrays as scripts left them (daydream.api.job_whatif)

    def build(
        self, items: list[tuple[int, str]], step: str | int | None, share: bool, policy: Policy
    ) -> list[RankBuilt]:
        """Read and build the traces ``items`` (index, path) for ``step``; keep each as arrays."""
        self.step = step
        out = []
        for index, path in items:
            trace = load_trace(path)
            graph = build_graph(trace, step, release_events=True)
            named = trace.distributed.get("rank")
            size = trace.distributed.get("world_size")
            del trace
            arrays, comm = rank_arrays(graph, policy)
            g = graph.graph
            out.append(
                RankBuilt(
                    index=index,
                    trace=path,
                    named_rank=named if isinstance(named, int) else None,
                    world_size=size if isinstance(size, int) else None,
                    steps=[s.name for s in g.get("steps", [])],
                    measured_us=float(g.get("measured_us", math.nan)),
                    origin_us=float(g.get("origin_us", 0.0)),
                    fingerprint=rank_fingerprint(graph) if share else f"#{index}",
                    tasks=arrays.tasks,
                    warnings=list(g.get("warnings", [])),
                    device=recording_device(graph),
                    comm=comm,
                )
            )
            self.built[index] = (path, arrays)
            del graph
        return out

    def plan(self, plans: list[RankPlan], members: list[int], policy: Policy, scripted: bool = False) -> int:
        """Place this worker's ranks in the job (``plans``; ``members``: each collective's member count) and start
        its simulation; the ranks a twin stands for are dropped. ``scripted``: the ranks as the scripts left them
        (their collectives' durations theirs), else as built (priced as planned). Returns the tasks it simulates."""
        parts, gangs = [], []
        for p in sorted(plans, key=lambda p: p.rank):
            if scripted:
                path, arrays = self.paths[p.rank], self.scripted.pop(p.rank, None)
            else:
                path, arrays = self.built.pop(p.index)
            if not p.simulated or arrays is None:
                continue
            if arrays.nan:
                raise DaydreamError(
                    f"{path}: a NaN duration, gap, release time or priority: only one process orders those "
                    "(give --jobs 1)"
                )
            if not scripted:
                arrays.duration[arrays.comm] = p.durations
            parts.append((p.rank, p.offset_us, arrays))
            gangs.append(np.asarray(p.gangs, np.int64))
            self.paths[p.rank] = path
            self.plans[p.rank] = p
        self.built.clear()
        self.scripted.clear()
        self.shard = Shard(parts, gangs, np.asarray(members, np.int64), policy)
        return self.shard.tasks

    def advance(self, started: list[tuple[int, float, float, int]], bounds: dict[int, float]) -> Progress:
        assert self.shard is not None
        return self.shard.advance(started, bounds)

    def pending(self) -> dict[int, tuple[list[int], list[int]]]:
        assert self.shard is not None
        return self.shard.pending()

    def unfinished(self) -> dict[int, int]:
        """Per rank here, the tasks that never ran (a job that cannot finish)."""
        assert self.shard is not None
        return self.shard.unfinished()

    def windows(self) -> list[RankWindow]:
        assert self.shard is not None
        return self.shard.windows()

    def members(self) -> list[GangMembers]:
        assert self.shard is not None
        return self.shard.members()

    def details(
        self, requests: list[tuple[int, int | None]], scripted: bool = False
    ) -> list[tuple[dict[str, float], Any]]:
        """Per request (rank, collective or None): the rank's breakdown over its window, and, where a collective is
        given, its way to its member of it (the straggler's: its critical path there, by task name): from its trace
        read again (``scripted``: and the scripts run on it again), its tasks at the times simulated here."""
        assert self.shard is not None
        out = []
        for rank, gang in requests:
            k = self.shard.ranks.index(rank)
            graph = self.rank_graph(rank, scripted)
            timeline = self.shard.timeline(k, graph)
            way = None
            if gang is not None:
                member = self.shard.member_of(gang, rank) - int(self.shard.first[k])
                way = _way_to(timeline, [rank] * len(timeline.start), member, timeline.step_window()[0])
            out.append((breakdown(timeline), way))
        return out

    def rank_graph(self, rank: int, scripted: bool = False) -> nx.DiGraph:
        """Rank ``rank``'s graph read again from its trace, its tasks in the order its arrays hold them
        (``scripted``: as the scripts left it, :class:`daydream.api.job_whatif.ScriptWorker`)."""
        if scripted:
            raise DaydreamError("no scripts were run on this worker's ranks")
        return build_graph(load_trace(self.paths[rank]), self.step, release_events=True)

    def peak_bytes(self) -> int:
        """The largest this worker's process has been (resident memory)."""
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# --- where the workers run: in this process, in local processes, or as Ray actors; each call goes to every worker


class Workers:
    """``count`` workers; :meth:`call` calls a method of every worker, each with its own arguments, and returns the
    answers in order (at once where they run apart). Close when done."""

    count: int
    kind: str

    def call(self, method: str, args: Sequence[tuple[Any, ...]]) -> list[Any]:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class InProcess(Workers):
    """Workers in this process, called one after the other (tests; a job one process holds)."""

    kind = "this process"

    def __init__(self, count: int, kind: type[JobWorker] = JobWorker) -> None:
        self.count = count
        self.workers = [kind() for _ in range(count)]

    def call(self, method: str, args: Sequence[tuple[Any, ...]]) -> list[Any]:
        return [getattr(w, method)(*a) for w, a in zip(self.workers, args)]


def _serve(conn: Any, kind: type[JobWorker] = JobWorker) -> None:
    """A worker process: calls on its worker (a ``kind``) from the pipe until told to stop (None)."""
    worker = kind()
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message is None:
            return
        method, args = message
        try:
            answer: tuple[bool, Any] = (True, getattr(worker, method)(*args))
        except BaseException as exc:  # noqa: BLE001 - handed to the coordinator, which raises it
            answer = (False, exc if isinstance(exc, DaydreamError) else DaydreamError(f"{type(exc).__name__}: {exc}"))
        conn.send(answer)


class Processes(Workers):
    """Workers in local processes (started with ``spawn``), one pipe each."""

    kind = "local processes"

    def __init__(self, count: int, kind: type[JobWorker] = JobWorker) -> None:
        self.count = count
        ctx = multiprocessing.get_context("spawn")
        self.conns: list[Any] = []
        self.procs: list[Any] = []
        for _ in range(count):
            mine, theirs = ctx.Pipe()
            proc = ctx.Process(target=_serve, args=(theirs, kind), daemon=True, name="daydream-job-worker")
            proc.start()
            theirs.close()
            self.conns.append(mine)
            self.procs.append(proc)

    def call(self, method: str, args: Sequence[tuple[Any, ...]]) -> list[Any]:
        for conn, a in zip(self.conns, args):
            conn.send((method, a))
        answers, failure = [], None
        for k, conn in enumerate(self.conns):
            try:
                ok, value = conn.recv()
            except (EOFError, OSError):
                ok, value = (
                    False,
                    DaydreamError(
                        f"job worker {k + 1} of {self.count} died (exit code {self.procs[k].exitcode}; out of memory?)"
                    ),
                )
            if not ok and failure is None:
                failure = value
            answers.append(value)
        if failure is not None:
            raise failure
        return answers

    def close(self) -> None:
        for conn in self.conns:
            with contextlib.suppress(OSError, ValueError):
                conn.send(None)
        for proc in self.procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()
                proc.join()
        for conn in self.conns:
            conn.close()


class RayActors(Workers):
    """Workers as actors on the Ray cluster at ``address`` (``local``: a Ray started here with ``count`` CPUs). They
    read the traces at the same paths as this process: the folder is on storage the cluster shares."""

    kind = "Ray actors"

    def __init__(self, address: str, count: int, kind: type[JobWorker] = JobWorker) -> None:
        self.ray = connect_ray(address, count)
        # a CPU each where the cluster has them; shares of what it has where not (a Ray started earlier in this
        # process with fewer CPUs would otherwise never place the rest)
        cpus = float(self.ray.cluster_resources().get("CPU", 0.0))
        actor = self.ray.remote(num_cpus=min(1.0, cpus / count) if cpus else 0)(kind)
        self.count = count
        self.actors = [actor.remote() for _ in range(count)]
        ready, waiting = self.ray.wait(
            [a.peak_bytes.remote() for a in self.actors], num_returns=count, timeout=RAY_START_S
        )
        if waiting:
            self.close()
            raise DaydreamError(
                f"--ray {address}: {len(waiting)} of {count} job workers not started within "
                f"{RAY_START_S} s (the cluster has {cpus:g} CPUs)"
            )

    def call(self, method: str, args: Sequence[tuple[Any, ...]]) -> list[Any]:
        refs = [getattr(a, method).remote(*x) for a, x in zip(self.actors, args)]
        try:
            return list(self.ray.get(refs))
        except self.ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            raise (
                cause
                if isinstance(cause, DaydreamError)
                else DaydreamError(f"a job worker on Ray failed: {cause or exc}")
            ) from None
        except self.ray.exceptions.RayActorError as exc:
            raise DaydreamError(f"a job worker on Ray died ({str(exc).splitlines()[0]}; out of memory?)") from None

    def close(self) -> None:
        for a in self.actors:
            self.ray.kill(a)


def open_workers(
    count: int, ray: str | None = None, in_process: bool = False, kind: type[JobWorker] = JobWorker
) -> Workers:
    """``count`` workers of ``kind``: Ray actors on the cluster at ``ray``, local processes, or (``in_process``) in
    this one."""
    if ray is not None:
        return RayActors(ray, count, kind)
    return InProcess(count, kind) if in_process else Processes(count, kind)


# --- the coordinator


class _Gang:
    """A collective as the coordinator follows it: the workers holding its members, those that reported them all
    arrived, its latest arrival, the lowest rank that arrived then, its longest member."""

    __slots__ = ("holders", "reported", "arrival", "rank", "longest", "started")

    def __init__(self) -> None:
        self.holders: set[int] = set()
        self.reported: set[int] = set()
        self.arrival = -math.inf
        self.rank = -1
        self.longest = -math.inf
        self.started = False

    def add(self, a: GangArrival) -> None:
        if a.arrival_us > self.arrival or (a.arrival_us == self.arrival and a.rank < self.rank):
            self.arrival, self.rank = a.arrival_us, a.rank
        self.longest = max(self.longest, a.longest_us)


def simulate_in_rounds(workers: Workers, gangs: list[_Gang], say: Callable[[int], None] | None = None) -> int:
    """Run the job's rounds until every task has run; returns the rounds. ``gangs``: each collective, its holders
    set (those held by one worker alone it completes itself)."""
    started: list[list[tuple[int, float, float, int]]] = [[] for _ in range(workers.count)]
    bounds: list[dict[int, float]] = [{} for _ in range(workers.count)]
    waits: list[set[int]] = [set() for _ in range(workers.count)]
    clock = [-math.inf] * workers.count
    rounds = 0
    while True:
        rounds += 1
        answers: list[Progress] = workers.call("advance", [(started[w], bounds[w]) for w in range(workers.count)])
        started = [[] for _ in range(workers.count)]
        touched = set()
        for w, p in enumerate(answers):
            clock[w] = p.clock_us
            for a in p.arrived:
                gangs[a.gang].add(a)
                gangs[a.gang].reported.add(w)
                waits[w].add(a.gang)
                touched.add(a.gang)
        ran = sum(p.ran for p in answers)
        if say is not None:
            say(ran)
        now = sorted((g for g in touched if gangs[g].reported == gangs[g].holders), key=lambda g: (gangs[g].arrival, g))
        for g in now:
            gang = gangs[g]
            gang.started = True
            for w in sorted(gang.holders):
                started[w].append((g, gang.arrival, gang.arrival + gang.longest, gang.rank))
                waits[w].discard(g)
                clock[w] = min(clock[w], gang.arrival)
        if all(p.finished for p in answers) and not now:
            return rounds
        if not ran and not now:
            _stuck(workers, gangs)
        for w in range(workers.count):
            bounds[w] = {}
            for g in waits[w]:
                gang = gangs[g]
                pending = gang.holders - gang.reported
                bounds[w][g] = max(gang.arrival, min(clock[v] for v in pending))


def _stuck(workers: Workers, gangs: list[_Gang]) -> None:
    """Why the job cannot finish: a collective some ranks reached and others never did, or a dependency cycle."""
    came: dict[int, set[int]] = defaultdict(set)
    waiting: dict[int, set[int]] = defaultdict(set)
    for part in workers.call("pending", [()] * workers.count):
        for g, (arrived, missing) in part.items():
            came[g].update(arrived)
            waiting[g].update(missing)
    raise _Stuck(came, waiting, workers.call("unfinished", [()] * workers.count))


class _Stuck(Exception):
    def __init__(
        self, came: dict[int, set[int]], waiting: dict[int, set[int]], unfinished: list[dict[int, int]]
    ) -> None:
        self.came, self.waiting, self.unfinished = came, waiting, unfinished


def replay_job_by_workers(
    directory: str | os.PathLike[str],
    step: str | int | None = None,
    link: str | float | Link | None = None,
    workers: int = 2,
    policy: Policy = EARLIEST,
    share: bool = True,
    ray: str | None = None,
    in_process: bool = False,
) -> JobReplay:
    """Simulate the job in ``directory`` by ``workers`` workers that each hold some of its ranks (local processes;
    Ray actors on the cluster at ``ray``; ``in_process``: in this process): the joint simulation's result
    (:func:`daydream.api.job.replay_job`), without any process holding the whole job. Its ``graph`` and
    ``timeline`` are None (no process holds them)."""
    where = os.fspath(directory)
    files = rank_trace_files(where)
    check_policy(policy)
    count = max(1, min(workers, len(files)))
    with open_workers(count, ray, in_process) as pool:
        job = plan_job(pool, where, files, step, link, share, policy)
        run = simulate_job(pool, job, policy)
        parts_of_slowest, straggler = job_details(pool, job, run)
        used = WorkersUsed(count, pool.kind, run.rounds, pool.call("peak_bytes", [()] * count))
    first = job.first
    results, slowest = run.results, run.slowest
    measured = max(x.measured_us for x in results)
    baseline = run.window[slowest][1]
    warnings = [f"rank {info.rank}: {w}" for info, b in job.own for w in b.warnings]
    report = JobReplayReport(
        trace=where,
        device=first.device[0],
        device_type=first.device[1],
        world_size=job.world_size,
        measured_us=measured,
        baseline_us=baseline,
        predicted_us=baseline,
        error_pct=100.0 * relative_error(baseline, measured),
        slowest_rank=slowest,
        steps=first.steps,
        ranks=[JobRank.of(x) for x in results],
        straggler=straggler,
        collectives=job.collectives.to_builtins(),
        tasks=job.base,
        simulated_ranks=len(job.own),
        breakdown=parts_of_slowest,
        warnings=warnings,
        workers=used,
    )
    return JobReplay(report, None, None, results, straggler, {job.cid_of[g]: s for g, s in sorted(run.starts.items())})


def check_policy(policy: Policy) -> None:
    """Workers order tasks by time: a policy that does not (fifo) is refused, saying what to do."""
    if policy.kind == "fifo":
        raise DaydreamError(
            "--policy fifo: a job simulated by workers needs a policy that orders tasks by time "
            "(earliest or priority); give --jobs 1 for fifo"
        )


@dataclass
class PlannedJob:
    """A job as the coordinator plans it: its ranks built by the workers (``first``: the first file's), numbered
    (``infos``, every rank; ``own``: those with tasks of their own and what building them said), its comm tasks
    matched into collectives (``gang_of``: each task's, -1 none; ``by_gang``: each collective's members; ``cid_of``:
    their ids) and priced (``prices``), and what each worker holds (``plans``)."""

    where: str
    count: int
    first: RankBuilt
    infos: list[RankInfo]
    own: list[tuple[RankInfo, RankBuilt]]
    comm: list[CommTask]
    gang_of: list[int]
    by_gang: list[list[CommTask]]
    cid_of: list[str]
    collectives: JobCollectives
    prices: list[float]
    members: list[int]
    plans: list[list[RankPlan]]
    holders: list[set[int]]  # per collective, the workers holding its members (empty: completed by its one worker)
    base: int  # tasks simulated

    @property
    def world_size(self) -> int:
        return max(len(self.infos), int(self.first.world_size or 0))


def plan_job(
    pool: Workers,
    where: str,
    files: list[str],
    step: str | int | None,
    link: str | float | Link | None,
    share: bool,
    policy: Policy,
) -> PlannedJob:
    """Build every rank in the workers, number the ranks, match and price the collectives, and say what each worker
    holds (:class:`PlannedJob`)."""
    count = pool.count
    built = _build(pool, files, step, share, policy)
    infos, by_rank = _number_ranks(where, built)
    own = [(info, b) for info, b in zip(infos, by_rank) if info.same_as is None]
    comm, gang_of, by_gang, cid_of, collectives = _match_collectives(where, own, infos)
    prices, collectives.pricing = price_gangs(by_gang, link)
    worker_of = {b.index: w for w, block in enumerate(_blocks(len(files), count)) for b in built if b.index in block}
    plans: list[list[RankPlan]] = [[] for _ in range(count)]
    holders: list[set[int]] = [set() for _ in by_gang]
    k = 0
    for info, b in zip(infos, by_rank):
        n = len(b.comm) if info.same_as is None else 0
        gangs = gang_of[k : k + n]
        plans[worker_of[b.index]].append(
            RankPlan(b.index, info.rank, info.offset_us, info.same_as is None, gangs, [prices[g] for g in gangs])
        )
        for g in gangs:
            holders[g].add(worker_of[b.index])
        k += n
    holders = [h if len(h) > 1 else set() for h in holders]  # one worker's collectives it completes itself
    return PlannedJob(
        where,
        count,
        built[0],
        infos,
        own,
        comm,
        gang_of,
        by_gang,
        cid_of,
        collectives,
        prices,
        [len(m) for m in by_gang],
        plans,
        holders,
        sum(b.tasks for _, b in own),
    )


@dataclass
class JobRun:
    """A job simulated by the workers: each simulated rank's window (start, step) and wait, each collective's start
    and two latest arrivals, every rank's row (``results``), the collectives each rank held, the slowest rank (the
    job's step), the straggler (None: none), which worker holds each rank, and the rounds it took."""

    window: dict[int, tuple[float, float]]
    waits: dict[int, float]
    starts: dict[int, float]
    latest: dict[int, list[tuple[float, int]]]
    results: list[RankResult]
    held: dict[int, list[tuple[float, Any, int]]]
    slowest: int
    straggler: int | None
    owner: dict[int, int]
    rounds: int
    windows: dict[int, RankWindow]


def simulate_job(
    pool: Workers, job: PlannedJob, policy: Policy, scripted: bool = False, label: str = "simulating"
) -> JobRun:
    """Simulate the planned job in the workers, in rounds: the ranks as built, or (``scripted``) as the scripts
    left them (:mod:`daydream.api.job_whatif`)."""
    count = job.count
    pool.call("plan", [(job.plans[w], job.members, policy, scripted) for w in range(count)])
    gangs = [_Gang() for _ in job.by_gang]
    for gang, holders in zip(gangs, job.holders):
        gang.holders = set(holders)
    with progress.task(
        f"{label} {len(job.infos):,} ranks in {count} worker{'s' if count > 1 else ''}", total=job.base
    ) as advance:
        try:
            rounds = simulate_in_rounds(pool, gangs, advance)
        except _Stuck as stuck:
            raise DaydreamError(_stuck_message(job.where, stuck, job.cid_of, job.by_gang)) from None
    windows = {w.rank: w for part in pool.call("windows", [()] * count) for w in part}
    latest: dict[int, list[tuple[float, int]]] = defaultdict(list)
    starts: dict[int, float] = {}
    for part in pool.call("members", [()] * count):
        for m in part:
            latest[m.gang].extend(m.latest)
            starts[m.gang] = m.start_us
    window = {r: (w.start_us, w.step_us) for r, w in windows.items()}
    waits = {r: w.wait_us for r, w in windows.items()}
    held = held_collectives(
        job.infos, [(g, sorted(latest[g])[-2:]) for g in range(len(job.by_gang)) if job.members[g] > 1]
    )
    results = job_rank_results(job.infos, window, waits, held)
    # the job's step: its slowest simulated rank's window (the lowest of those tied)
    steps = {r: window[r][1] for r in sorted(window)}
    slowest = max(steps, key=steps.__getitem__)
    owner = {p.rank: w for w in range(count) for p in job.plans[w] if p.simulated}
    return JobRun(window, waits, starts, latest, results, held, slowest, straggler_rank(held), owner, rounds, windows)


def job_details(
    pool: Workers, job: PlannedJob, run: JobRun, scripted: bool = False
) -> tuple[dict[str, float], Straggler | None]:
    """The slowest rank's breakdown and the straggler, its way to the last collective it held worked out by the
    worker holding it (one reading of its trace where they are one rank)."""
    slowest, r, held, latest = run.slowest, run.straggler, run.held, run.latest
    requests: list[dict[int, int | None]] = [{} for _ in range(job.count)]
    requests[run.owner[slowest]][slowest] = None
    if r is not None:
        last = max(
            (g for _, g, _ in held[r]), key=lambda g: run.starts[g]
        )  # the first of the latest held, as max() picks
        requests[run.owner[r]][r] = last
    answers = [
        dict(zip(asked, told))
        for asked, told in zip(
            requests, pool.call("details", [(list(requests[w].items()), scripted) for w in range(job.count)])
        )
    ]
    parts_of_slowest = answers[run.owner[slowest]][slowest][0]
    straggler = None
    if r is not None:
        mine = {g: t for t, g in zip(job.comm, job.gang_of) if t.rank == r and g >= 0}
        held_there = [
            HeldCollective(
                id=job.cid_of[g],
                kind=mine[g].collective,
                name=mine[g].name,
                phase=mine[g].phase,
                held_us=h,
                reached_us=sorted(latest[g])[-1][0] - run.window[r][0],
                next_rank=nxt,
            )
            for h, g, nxt in held[r]
        ]
        way = answers[run.owner[r]][r][1]
        straggler = straggler_of(run.results, r, held_there, len(job.by_gang), way, run.window[r][0])
    return parts_of_slowest, straggler


def _number_ranks(where: str, built: list[RankBuilt]) -> tuple[list[RankInfo], list[RankBuilt]]:
    """Every rank's number (from its trace, or its file's name: check_ranks), its step's start after the job's first
    rank's, and the rank whose tasks stand for it (the lowest of its fingerprint), in rank order; the same step
    everywhere, or an error as the joint load gives it."""
    first = built[0]
    ranks = check_ranks(where, [(b.trace, b.named_rank, b.world_size) for b in built])
    file_rank = {path: r for r, path in ranks.items()}
    for b in built:
        if b.steps != first.steps:
            raise TraceError(
                f"{where}: rank {file_rank[b.trace]} ({b.trace}) simulates steps {', '.join(b.steps) or 'none'}, "
                f"rank {file_rank[first.trace]} {', '.join(first.steps)}: give --step",
                path=where,
            )
    by_rank = sorted(built, key=lambda b: file_rank[b.trace])
    origin = min(b.origin_us for b in by_rank)
    infos = [
        RankInfo(
            rank=file_rank[b.trace],
            trace=b.trace,
            measured_us=b.measured_us,
            origin_us=b.origin_us,
            fingerprint=b.fingerprint,
        )
        for b in by_rank
    ]
    rep: dict[str, int] = {}
    for info in infos:
        info.offset_us = info.origin_us - origin
        rep.setdefault(info.fingerprint, info.rank)
        if rep[info.fingerprint] != info.rank:
            info.same_as = rep[info.fingerprint]
    return infos, by_rank


def _match_collectives(
    where: str, own: list[tuple[RankInfo, RankBuilt]], infos: list[RankInfo]
) -> tuple[list[CommTask], list[int], list[list[CommTask]], list[str], JobCollectives]:
    """The comm tasks of the simulated ranks on the job's clock, placed as the joint graph places them (rank-major),
    matched into collectives as the joint job matches them: the tasks (with their group and its size), each one's
    collective (numbered in order of first appearance, as the joint job's; -1: none), each collective's members and
    id (``GROUP#k``), and the groups (JobCollectives)."""
    comm: list[CommTask] = []
    base = 0
    for info, b in own:
        comm.extend(
            msgspec.structs.replace(
                t,
                rank=info.rank,
                order=base + t.order,
                issued_us=t.issued_us + info.offset_us,
                start_us=t.start_us + info.offset_us,
            )
            for t in b.comm
        )
        base += b.tasks
    matched, collectives = match_comm_tasks(comm, infos, where)
    number: dict[str, int] = {}
    for cid, _, _ in matched:
        if cid is not None:
            number.setdefault(cid, len(number))
    gang_of = [number[cid] if cid is not None else -1 for cid, _, _ in matched]
    comm = [msgspec.structs.replace(t, group=group, group_size=size) for t, (_, group, size) in zip(comm, matched)]
    by_gang: list[list[CommTask]] = [[] for _ in number]
    for t, g in zip(comm, gang_of):
        if g >= 0:
            by_gang[g].append(t)
    return comm, gang_of, by_gang, list(number), collectives


def _blocks(n: int, count: int) -> list[range]:
    """``n`` ranks' files in ``count`` contiguous blocks, as even as they divide."""
    size, extra = divmod(n, count)
    out, start = [], 0
    for w in range(count):
        end = start + size + (1 if w < extra else 0)
        out.append(range(start, end))
        start = end
    return out


def _build(pool: Workers, files: list[str], step: str | int | None, share: bool, policy: Policy) -> list[RankBuilt]:
    """Every rank built by the worker whose block holds it, RANKS_PER_CALL at a time; the first rank first, on its
    own: the step it selects is every rank's (as the joint simulation picks it)."""
    blocks = [list(b) for b in _blocks(len(files), pool.count)]
    built: list[RankBuilt] = []
    with progress.task(f"building the graphs of {len(files):,} ranks", total=len(files)) as advance:
        first = pool.call(
            "build",
            [
                ([(0, files[0])], step, share, policy) if w == 0 else ([], step, share, policy)
                for w in range(pool.count)
            ],
        )[0][0]
        advance(1)
        built.append(first)
        blocks[0] = blocks[0][1:]
        chosen: str | int | None = step
        if step is None and len(first.steps) == 1:
            chosen = first.steps[0]  # the step the first rank's trace picked, for every rank
        while any(blocks):
            chunks = [block[:RANKS_PER_CALL] for block in blocks]
            blocks = [block[RANKS_PER_CALL:] for block in blocks]
            for answer in pool.call(
                "build", [([(i, files[i]) for i in chunk], chosen, share, policy) for chunk in chunks]
            ):
                built.extend(answer)
                advance(len(answer))
    return sorted(built, key=lambda b: b.index)


def _stuck_message(where: str, stuck: _Stuck, cid_of: list[str], by_gang: list[list[CommTask]]) -> str:
    """A collective some ranks reached and others never did (the first), or else a dependency cycle."""
    for g in sorted(stuck.came):
        came = sorted(stuck.came[g])
        missing = sorted({t.rank for t in by_gang[g]} - set(came))
        if came and missing:
            t = by_gang[g][0]
            more = sum(1 for h in stuck.came if h != g and stuck.waiting.get(h))
            return (
                f"{where}: collective {cid_of[g]} ({t.collective or t.name}) never starts:"
                f" rank{'s' if len(came) > 1 else ''} {format_ranks(came)} reached it,"
                f" rank{'s' if len(missing) > 1 else ''} {format_ranks(missing)} never did (it waits on work that waits"
                " on a collective the other ranks issue later, or on a cycle)"
                + (f"; {more} more collectives wait likewise" if more else "")
            )
    left = {r: n for part in stuck.unfinished for r, n in part.items() if n}
    return (
        f"{where}: the task graph has a dependency cycle: {sum(left.values()):,} tasks of rank"
        f"{'s' if len(left) > 1 else ''} {format_ranks(sorted(left))} never became ready"
    )


__all__ = [
    "JobRun",
    "JobWorker",
    "PlannedJob",
    "Workers",
    "job_details",
    "open_workers",
    "plan_job",
    "replay_job_by_workers",
    "simulate_job",
]
