"""What-if scripts on a job simulated by workers: ``daydream run DIR SCRIPT`` on a job too large for one process.

Each worker holds some of the job's ranks (:mod:`daydream.api.job_workers`). The job is simulated as built (the
baseline); then every worker runs the scripts on each of its ranks' graphs, one rank at a time, where it lives: the
rank's graph read again from its trace and made its part of the job's graph (:func:`daydream.graph.job.place_rank`:
its ranks' numbers, its start on the job's clock, its collectives matched and priced), so a statement sees what it
would see of that rank in the joint graph (``select where rank == r`` selects there or nowhere). What the scripts
leave is kept as arrays, and the job is simulated again from them: the prediction.

What changes by workers, said where it matters:
- The job-level functions (``straggler()``, ``rank_work``, ``rank_works``) answer from the baseline's prediction,
  which is the prediction "so far" until the script changes the graph; a call after a change is an error (it would
  need the whole job simulated again in the middle of the script): give ``--no-by-workers``.
- A statement's effect is summed over the ranks; a line a script prints is printed once where every rank printed it
  alike, else once per rank, after ``rank N:``; a statement did nothing (a warning) where it did nothing on any rank.
- A script may change what a rank's collectives take, not which collectives there are (adding or removing one would
  match the job's collectives again): such a script is refused, saying so.
"""

from __future__ import annotations

import math
import os
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import networkx as nx
import numpy as np

from daydream.api.job_workers import (
    JobRun,
    JobWorker,
    PlannedJob,
    WorkersUsed,
    check_policy,
    job_details,
    open_workers,
    plan_job,
    simulate_job,
)
from daydream.api.workload import RunOptions, Workload
from daydream.dsl import Session, ast
from daydream.dsl.effects import Effect
from daydream.dsl.evaluate import format_value
from daydream.dsl.interpret import load_scripts
from daydream.dsl.job_functions import HELD_APART, JOB_PREDICTION
from daydream.errors import DaydreamError
from daydream.graph import derived
from daydream.graph.adjacency import attrs_of
from daydream.graph.job import place_rank, unplace_rank
from daydream.graph.schema import RankInfo
from daydream.perf.trust.uncertainty import gradient_sizes_part
from daydream.simulation import Policy, Timeline
from daydream.simulation.ranks import RankResult, Straggler
from daydream.simulation.shard import rank_arrays
from daydream.simulation.timeline import GPU_KINDS, key_codes
from daydream.trace.job import rank_trace_files


class ScriptsToRun(msgspec.Struct):
    """The scripts every worker runs on each of its ranks, and how: as ``daydream run`` takes them."""

    scripts: list[Any]  # paths, or parsed scripts
    params: dict[str, Any] | None
    budget: int | None
    include_dirs: list[str] | None
    policy: Policy


class JobView(msgspec.Struct):
    """The job's baseline prediction, which the job-level functions read on a rank held apart (until a change)."""

    results: list[RankResult]
    straggler: Straggler | None


@dataclass
class RankScripted:
    """What running the scripts on one rank left: its statements' effects, its printed lines and warnings; its
    task counts before and after; and, from the job's lowest rank, what a report says of the scripts (their params
    as bound and shown, the policy, samples per step, the scripts' texts, the device swaps made and the gradient
    sizes' part of the interval)."""

    rank: int
    effects: list[Effect]
    printed: list[str]
    warnings: list[str]
    tasks_before: int
    tasks_after: int
    first: dict[str, Any] = field(default_factory=dict)


class ScriptWorker(JobWorker):
    """A worker that also runs scripts on its ranks (:meth:`run_scripts`) and sums their GPU time (:meth:`gpu_time`)."""

    def __init__(self) -> None:
        super().__init__()
        self.request: ScriptsToRun | None = None
        self.infos: list[RankInfo] = []
        self.view: JobView | None = None
        self.world_size = 0
        self.collectives: dict[int, list[tuple[str | None, str, int, float]]] = {}
        # per rank, as built and as scripted: its GPU tasks of the measured steps, and each one's class and phase
        self.keys: dict[bool, dict[int, tuple[np.ndarray, list[Any], list[Any]]]] = {False: {}, True: {}}
        self.declared: list[set[str]] = []
        self.files: list[str] = []

    def run_scripts(
        self,
        request: ScriptsToRun,
        infos: list[RankInfo],
        world_size: int,
        collectives: dict[int, list[tuple[str | None, str, int, float]]],
        view: JobView,
    ) -> list[RankScripted]:
        """Run ``request``'s scripts on each rank this worker simulates (``collectives``: per rank, each comm task's
        collective id, group, group size and priced duration); keep what they leave as the rank's arrays."""
        self.request, self.infos, self.world_size, self.collectives, self.view = (
            request,
            infos,
            world_size,
            collectives,
            view,
        )
        out = []
        lowest = min(info.rank for info in infos)
        for rank in sorted(self.plans):
            graph = self.rank_graph(rank)
            self.keys[False][rank] = _gpu_keys(graph)
            before = graph.number_of_nodes()
            session = self._run(rank, graph)
            after = session.graph
            arrays, _ = rank_arrays(after, request.policy)
            # the comm tasks in task order, as place_rank gave them their collectives
            now = [a.get("collective_id") for a in attrs_of(after).values() if a["kind"] == "comm"]
            if now != [c[0] for c in self.collectives[rank]]:
                raise DaydreamError(
                    f"rank {rank}: the scripts add or remove collectives ({len(self.collectives[rank])} before, "
                    f"{len(now)} after): by workers a script may change what a collective takes, not which there are "
                    "(give --no-by-workers to simulate the job in one process)"
                )
            self.scripted[rank] = arrays
            self.keys[True][rank] = _gpu_keys(after)
            first: dict[str, Any] = {}
            if rank == lowest:
                first = {
                    "param_values": {k: _plain(v) for k, v in session.param_values.items()},
                    "shown": session.binder.shown(),
                    "policy": session.policy_text,
                    "samples": session.samples,
                    "texts": dict(session.loader.texts),
                    "swaps": derived.cached(after, "device_swaps", ()),
                    "gradient_part": gradient_sizes_part(after),
                    "declared": self.declared,
                    "files": self.files,
                    "graph": {
                        k: after.graph.get(k)
                        for k in ("device", "device_properties", "steps", "delays", "recording", "causality")
                    },
                }
            out.append(
                RankScripted(
                    rank,
                    list(session.effects.values()),
                    list(session.printed),
                    list(session.warnings),
                    before,
                    after.number_of_nodes(),
                    first,
                )
            )
            del session, after, graph
        return out

    def _run(self, rank: int, graph: nx.DiGraph) -> Session:
        """The scripts run on ``rank``'s graph made its part of the job's (its tasks then on its own clock again)."""
        assert self.request is not None and self.view is not None
        info = next(i for i in self.infos if i.rank == rank)
        place_rank(graph, info, self.infos, self.world_size, self.collectives[rank])
        graph.graph[HELD_APART] = True
        request = self.request
        # a copy: a session on the graph itself would simulate it first, one rank alone (a baseline no one reads)
        session = Session(
            graph,
            params=request.params,
            policy=request.policy,
            copy=True,
            budget=request.budget,
            include_dirs=request.include_dirs,
        )
        derived.keep(session.graph, JOB_PREDICTION, (self.view.results, self.view.straggler), derived.ASPECTS)
        parsed, self.declared = load_scripts(session, request.scripts)
        self.files = [s.file for s in parsed]
        for script in parsed:
            session.run(script, checked=True)
        unplace_rank(session.graph, info)
        return session

    def rank_graph(self, rank: int, scripted: bool = False) -> nx.DiGraph:
        graph = super().rank_graph(rank)
        if not scripted:
            return graph
        return self._run(rank, graph).graph

    def gpu_time(self, scripted: bool) -> tuple[dict[str, float], dict[str, float], dict[str, float], float, int]:
        """Over this worker's ranks as simulated last: GPU time by class and by phase (the measured steps' tasks,
        summed rank by rank in rank order), each step's last end and the earliest start, and the tasks."""
        assert self.shard is not None
        by_class: dict[str, float] = defaultdict(float)
        by_phase: dict[str, float] = defaultdict(float)
        ends: dict[Any, float] = {}
        first = math.inf
        for k, rank in enumerate(self.shard.ranks):
            b, e = int(self.shard.first[k]), int(self.shard.first[k + 1])
            ix, classes, phases = self.keys[scripted][rank]
            took = (self.shard.end[b:e][ix] - self.shard.start[b:e][ix]).tolist()
            for c, p, t in zip(classes, phases, took):
                by_class[c] += t
                by_phase[p] += t
            codes, names, _ = self.shard.steps[k]
            end = self.shard.end[b:e]
            for code, name in enumerate(names):
                if name == "inserted":
                    continue
                mine = end[codes == code]
                if len(mine):
                    ends[name] = max(ends.get(name, -math.inf), float(mine.max()))
            if e > b:
                first = min(first, float(self.shard.start[b:e].min()))
        return dict(by_class), dict(by_phase), ends, first, self.shard.tasks


def _plain(value: Any) -> Any:
    """A param's value as plain data (a selection, which holds the graph, as its text)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return format_value(value)


def _gpu_keys(graph: nx.DiGraph) -> tuple[np.ndarray, list[Any], list[Any]]:
    """The places of ``graph``'s GPU tasks of its measured steps (all its tasks where it has no context step, as
    :meth:`Timeline.measured_indices` picks them), with each one's class and phase as :func:`totals_by` keys them."""
    n = graph.number_of_nodes()
    timeline = Timeline(graph, list(graph), np.zeros(n), np.zeros(n), np.full(n, -1, np.int64), [])
    measured = timeline.measured_indices()
    gpu = set(timeline.tasks_of(GPU_KINDS))
    ix = np.asarray([i for i in (measured if measured is not None else range(n)) if i in gpu], np.int64)
    keys = []
    for by in ("class", "phase"):
        codes, code_of = key_codes(timeline, by, ix)
        names = list(code_of)  # numbered in order of first appearance
        keys.append([names[c] for c in codes.tolist()])
    return ix, keys[0], keys[1]


@dataclass
class JobSide:
    """One side of a what-if on a job by workers (the baseline, or the prediction): the job's run, the slowest rank's
    breakdown, the straggler, the GPU time by class and phase, each step's period and the tasks."""

    run: JobRun
    breakdown: dict[str, float]
    straggler: Straggler | None
    gpu_time_by_class: dict[str, float]
    gpu_time_by_phase: dict[str, float]
    step_periods: dict[str, float]
    tasks: int

    @property
    def step_us(self) -> float:
        return self.run.window[self.run.slowest][1]


@dataclass
class JobWhatIfRun:
    """A what-if on a job by workers, as :func:`daydream.api.whatif.whatif` reports it."""

    job: PlannedJob
    baseline: JobSide
    predicted: JobSide
    ranks: list[RankScripted]
    workers: WorkersUsed

    @property
    def first(self) -> dict[str, Any]:
        return next(r.first for r in self.ranks if r.first)

    def graph(self) -> nx.DiGraph:
        """A graph of no tasks that says what the job's graph says of itself (:func:`daydream.graph.job.join_ranks`):
        its device, steps, ranks and collectives, as renderers read them."""
        job, attrs = self.job, self.first["graph"]
        measured = max(info.measured_us for info in job.infos)
        graph = nx.DiGraph()
        graph.graph.update(
            trace=job.where,
            rank=None,
            world_size=job.world_size,
            device=attrs["device"],
            device_properties=attrs["device_properties"] or {},
            origin_us=min(info.origin_us for info in job.infos),
            steps=[msgspec.structs.replace(s, measured_us=measured) for s in attrs["steps"] or []],
            delays=attrs["delays"],
            warnings=[],
            measured_us=measured,
            recording=attrs["recording"],
            causality=attrs["causality"],
            ranks=[msgspec.structs.replace(r) for r in job.infos],
            collectives=job.collectives,
        )
        return graph

    def effects(self) -> list[Effect]:
        """Each statement's effect summed over the ranks, in the order the lowest rank ran them."""
        merged: dict[tuple[str, int, str], Effect] = {}
        for r in sorted(self.ranks, key=lambda r: r.rank):
            for e in r.effects:
                key = (e.file, e.line, e.statement)
                if key not in merged:
                    merged[key] = Effect(**vars(e))
                    continue
                m = merged[key]
                for name in (
                    "tasks",
                    "added",
                    "removed",
                    "duration_delta_us",
                    "step_tasks",
                    "step_duration_delta_us",
                    "tensors",
                    "memory_delta_bytes",
                ):
                    setattr(m, name, getattr(m, name) + getattr(e, name))
                m.runs = max(m.runs, e.runs)
                m.context = m.context or e.context
                m.stretch = m.stretch or e.stretch
        return list(merged.values())

    def printed(self) -> list[str]:
        """The lines the scripts printed: once where every rank printed the same lines, else each rank's after
        ``rank N:``."""
        ranks = sorted(self.ranks, key=lambda r: r.rank)
        if all(r.printed == ranks[0].printed for r in ranks):
            return list(ranks[0].printed)
        return [f"rank {r.rank}: {line}" for r in ranks for line in r.printed]

    def warnings(self) -> list[str]:
        """The scripts' warnings, each once: those every rank gave. A script's warning says a statement did nothing
        (its selection held no task, :meth:`daydream.dsl.effects.Recorder.noop`): in the job, where it did nothing
        on any rank; a selection of one rank's tasks does nothing on the others, and nothing is wrong."""
        counts: dict[str, int] = defaultdict(int)
        for r in self.ranks:
            for w in dict.fromkeys(r.warnings):
                counts[w] += 1
        lowest = min(self.ranks, key=lambda r: r.rank)
        return [w for w in lowest.warnings if counts[w] == len(self.ranks)]


def run_by_workers(
    work: Workload,
    scripts: Sequence[str | os.PathLike[str] | ast.Script],
    params: dict[str, Any] | None = None,
    options: RunOptions | None = None,
    workers: int = 2,
    in_process: bool = False,
) -> JobWhatIfRun:
    """Run ``scripts`` on the job ``work`` (its folder, step, link and Ray cluster) by ``workers`` workers that each
    hold some of its ranks (local processes; Ray actors on the cluster at ``work.ray``; ``in_process``: in this
    process), every rank its own tasks: the baseline simulated, the scripts run on each rank where it lives, the
    job simulated again (module docstring). :func:`daydream.api.whatif.whatif` makes its report."""
    opts = options or RunOptions()
    policy = opts.policy
    files = rank_trace_files(work.path)
    check_policy(policy)
    count = max(1, min(workers, len(files)))
    request = ScriptsToRun(
        [s if isinstance(s, ast.Script) else os.fspath(s) for s in scripts],
        params,
        opts.budget,
        [os.fspath(d) for d in opts.include_dirs] if opts.include_dirs else None,
        policy,
    )
    with open_workers(count, work.ray, in_process, ScriptWorker) as pool:
        job = plan_job(pool, work.path, files, work.step, work.link, False, policy)
        base_run = simulate_job(pool, job, policy)
        base_parts, base_straggler = job_details(pool, job, base_run)
        view = JobView(base_run.results, base_straggler)
        mine: list[dict[int, list[tuple[str | None, str, int, float]]]] = [{} for _ in range(count)]
        k = 0
        owner = {p.rank: w for w in range(count) for p in job.plans[w]}
        for info, b in job.own:  # each comm task as the joint graph holds it: matched (rank-major) and priced
            meta = []
            for t, g in zip(job.comm[k : k + len(b.comm)], job.gang_of[k : k + len(b.comm)]):
                meta.append(
                    (job.cid_of[g], t.group or "", int(t.group_size or 0), job.prices[g])
                    if g >= 0
                    else (None, "", 0, 0.0)
                )
            k += len(b.comm)
            mine[owner[info.rank]][info.rank] = meta
        answers = pool.call("run_scripts", [(request, job.infos, job.world_size, mine[w], view) for w in range(count)])
        base = _side(
            pool, job, base_run, base_parts, base_straggler, scripted=False
        )  # the ranks' keys read by the scripts' run
        ranks = [r for part in answers for r in part]
        run = simulate_job(pool, job, policy, scripted=True, label="predicting")
        parts, straggler = job_details(pool, job, run, scripted=True)
        predicted = _side(pool, job, run, parts, straggler, scripted=True)
        used = WorkersUsed(count, pool.kind, base_run.rounds + run.rounds, pool.call("peak_bytes", [()] * count))
    return JobWhatIfRun(job, base, predicted, ranks, used)


def _side(
    pool: Any, job: PlannedJob, run: JobRun, parts: dict[str, float], straggler: Straggler | None, scripted: bool
) -> JobSide:
    """One side's sums over the workers: GPU time by class and phase (times the step's share of its window, as
    Timeline.step_scale), the job's step periods (Timeline.step_periods over every rank) and tasks."""
    by_class: dict[str, float] = defaultdict(float)
    by_phase: dict[str, float] = defaultdict(float)
    ends: dict[Any, float] = {}
    first, tasks = math.inf, 0
    for c, p, e, f, n in pool.call("gpu_time", [(scripted,)] * job.count):
        for key, value in c.items():
            by_class[key] += value
        for key, value in p.items():
            by_phase[key] += value
        for name, end in e.items():
            ends[name] = max(ends.get(name, -math.inf), end)
        first, tasks = min(first, f), tasks + n
    w = run.windows[run.slowest]
    scale = w.step_us / (w.end_us - w.start_us) if w.measured > 1 and w.end_us > w.start_us else 1.0
    periods, before = {}, first
    for end, name in sorted((end, name) for name, end in ends.items()):
        periods[name] = end - before
        before = end
    return JobSide(run, parts, straggler, _scaled(by_class, scale), _scaled(by_phase, scale), periods, tasks)


def _scaled(totals: dict[str, float], scale: float) -> dict[str, float]:
    return dict(sorted(((k, v * scale if scale != 1.0 else v) for k, v in totals.items()), key=lambda kv: -kv[1]))


__all__ = ["JobWhatIfRun", "ScriptWorker", "run_by_workers"]
