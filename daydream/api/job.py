"""A multi-GPU job, one trace per rank in a folder, simulated jointly: ``daydream simulate DIR``.

Each rank's graph is built on its own (in worker processes with ``jobs`` > 1); ranks whose graphs are the same
share one set of tasks (:mod:`daydream.graph.job`); the collectives are matched across ranks and priced by a model
(:mod:`daydream.perf.collectives.job`); the simulator starts each collective when its last rank reaches it.
Per rank: the measured step, the predicted one (its own window, from its own step's start), the time spent waiting in
collectives; for the job, the rank the others wait for (the straggler): its late start, the collectives it reached
last and how long it held the others at each, and where its time went on the way. The job's step is its slowest
rank's window, and its breakdown is of that window.
"""

from __future__ import annotations

import math
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import networkx as nx

from daydream import progress
from daydream.api.job_report import JobRank, JobReplay, JobReplayReport
from daydream.api.replay import recording_device, relative_error
from daydream.errors import TraceError
from daydream.graph.build import build_graph
from daydream.graph.job import join_ranks, rank_fingerprint
from daydream.graph.schema import RankInfo
from daydream.perf.collectives import Link
from daydream.perf.collectives.job import price_collectives
from daydream.simulation import EARLIEST, Policy, breakdown, simulate
from daydream.simulation.ranks import HeldCollective, RankResult, Straggler, rank_results
from daydream.trace import load_trace
from daydream.trace.job import check_ranks, is_job, rank_trace_files
from daydream.trace.load import size_as_gzip
from daydream.units import ms
from daydream.workers import connect_ray, processes_for, worker_count

# ranks a worker process builds before it pays for its start (bench/bench_multirank.py on 2 cores: 32 ranks of dlrm8
# built in 1.2 s by this process, 1.3 s by 2 workers; 64 ranks 2.6 s against 2.0 s; 128 ranks 4.9 s against 2.9 s)
RANKS_PER_PROCESS = 32


@dataclass
class _Built:
    info: RankInfo
    world_size: int | None
    named_rank: int | None
    steps: list[str]
    graph: nx.DiGraph | None  # None: a graph with this fingerprint went back from this process already


_SEEN: set[str] = set()  # fingerprints this worker process has sent back a graph for


def _build_rank(path: str, step: str | int | None, seen: set[str] | None = None, share: bool = True) -> _Built:
    trace = load_trace(path)
    graph = build_graph(trace, step, release_events=True)
    named = trace.distributed.get("rank")
    named = named if isinstance(named, int) else None
    size = trace.distributed.get("world_size")
    fp = rank_fingerprint(graph)
    seen = _SEEN if seen is None else seen
    new = not share or fp not in seen
    seen.add(fp)
    info = RankInfo(
        rank=-1,
        trace=path,
        measured_us=float(graph.graph.get("measured_us", math.nan)),
        origin_us=float(graph.graph.get("origin_us", 0.0)),
        fingerprint=fp,
    )
    return _Built(
        info,
        size if isinstance(size, int) else None,
        named,
        [s.name for s in graph.graph.get("steps", [])],
        graph if new else None,
    )


def _build_in_worker(args: tuple[str, str | int | None, bool]) -> _Built:
    path, step, share = args
    return _build_rank(path, step, None, share)


def _build_on_ray(address: str, rest: list[tuple[str, str | int | None, bool]], jobs: int) -> list[_Built]:
    """The ranks' graphs built by Ray tasks on the cluster at ``address`` (``local``: a Ray started on this machine),
    in chunks, in order. The workers read the traces at the same paths: the folder is on storage they share."""
    ray = connect_ray(address, jobs)
    build = ray.remote(_build_chunk)
    size = max(1, len(rest) // (4 * max(1, jobs)))
    refs = [build.remote(rest[i : i + size]) for i in range(0, len(rest), size)]
    return [b for chunk in ray.get(refs) for b in chunk]


def _build_chunk(chunk: list[tuple[str, str | int | None, bool]]) -> list[_Built]:
    return [_build_in_worker(args) for args in chunk]


def load_job(
    directory: str | os.PathLike[str],
    step: str | int | None = None,
    jobs: int | None = 1,
    share: bool = True,
    ray: str | None = None,
) -> nx.DiGraph:
    """The job graph of the rank traces in ``directory`` (collectives matched, not yet priced). ``step`` as for one
    trace; every rank simulates the step the first rank's trace selects. ``jobs``: worker processes that build the
    ranks' graphs (None: one for every RANKS_PER_PROCESS ranks, at most one per core - the CLI's default); ``ray``:
    build them on the Ray cluster at this address instead (``local``: a Ray started here, with ``jobs`` CPUs);
    ``share``: ranks with the same graph share one set of tasks (False: every rank its own)."""
    where = os.fspath(directory)
    files = rank_trace_files(where)
    jobs = processes_for(len(files) - 1, RANKS_PER_PROCESS) if jobs is None else worker_count(jobs, local=ray is None)
    with progress.task(f"building the graphs of {len(files):,} ranks", total=len(files)) as advance:
        first = _build_rank(files[0], step, set())
        advance(1)
        chosen: str | int | None = step
        if step is None and len(first.steps) == 1:
            chosen = first.steps[0]  # the step the first rank's trace picked, for every rank
        rest = [(f, chosen, share) for f in files[1:]]
        if ray is not None and rest:
            built = [first, *_build_on_ray(ray, rest, jobs)]
        elif jobs > 1 and len(rest) > 1:
            ctx = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
                built = [first]
                for b in pool.map(_build_in_worker, rest, chunksize=max(1, len(rest) // (4 * jobs))):
                    built.append(b)
                    advance(1)
        else:
            seen = {first.info.fingerprint}
            built = [first]
            for f, s, sh in rest:
                built.append(_build_rank(f, s, seen, sh))
                advance(1)
    ranks = check_ranks(where, [(b.info.trace or "", b.named_rank, b.world_size) for b in built])
    file_rank = {path: r for r, path in ranks.items()}
    for b in built:
        b.info.rank = file_rank[b.info.trace or ""]
        if b.steps != first.steps:
            raise TraceError(
                f"{where}: rank {b.info.rank} ({b.info.trace}) simulates steps {', '.join(b.steps) or 'none'}, "
                f"rank {built[0].info.rank} {', '.join(first.steps)}: give --step",
                path=where,
            )
    built.sort(key=lambda b: b.info.rank)
    # the lowest rank of each fingerprint stands for its twins, with the graph of whichever came back (twins' graphs
    # are the same, rank ids aside, and join_ranks writes the rank)
    graph_of: dict[str, nx.DiGraph] = {}
    rep: dict[str, int] = {}
    for b in built:
        if b.graph is not None:
            graph_of.setdefault(b.info.fingerprint, b.graph)
        rep.setdefault(b.info.fingerprint, b.info.rank)
    graphs = []
    for b in built:
        if not share:
            graphs.append(b.graph)
        elif rep[b.info.fingerprint] == b.info.rank:
            graphs.append(graph_of[b.info.fingerprint])
        else:
            b.info.same_as = rep[b.info.fingerprint]
    return join_ranks(graphs, [b.info for b in built], where)


def replay_job_graph(graph: nx.DiGraph, policy: Policy = EARLIEST) -> JobReplay:
    """Simulate a job graph (collectives priced) and compare each rank with its measurement."""
    timeline = simulate(graph, policy)
    ranks, straggler = rank_results(graph, timeline)
    g = graph.graph
    measured, baseline = max(r.measured_us for r in ranks), timeline.step_us()
    slowest = timeline.step_rank()
    collectives = g.get("collectives")
    device, device_type = recording_device(graph)
    report = JobReplayReport(
        trace=g.get("trace"),
        device=device,
        world_size=g.get("world_size"),
        measured_us=measured,
        baseline_us=baseline,
        predicted_us=baseline,
        error_pct=100.0 * relative_error(baseline, measured),
        slowest_rank=slowest if slowest is not None else max(ranks, key=lambda r: r.step_us).rank,
        steps=[s.name for s in g.get("steps", [])],
        ranks=[JobRank.of(r) for r in ranks],
        straggler=straggler,
        collectives=collectives.to_builtins() if collectives is not None else None,
        tasks=graph.number_of_nodes(),
        simulated_ranks=sum(1 for r in ranks if r.same_as is None),
        breakdown=breakdown(timeline),
        warnings=list(g.get("warnings", [])),
        device_type=device_type,
    )
    starts: dict[str, float] = {}
    for i, cid in enumerate(timeline.values("collective_id")):
        if cid is not None:
            starts.setdefault(cid, float(timeline.start[i]))
    return JobReplay(report, graph, timeline, ranks, straggler, starts)


def load_priced_job(
    directory: str | os.PathLike[str],
    step: str | int | None = None,
    link: str | float | Link | None = None,
    jobs: int | None = 1,
    share: bool = True,
    ray: str | None = None,
) -> nx.DiGraph:
    """:func:`load_job`, its collectives priced (``link``: a preset or GB/s; None: fitted to the job's own transfers;
    how, in ``graph.graph["collectives"].pricing``)."""
    graph = load_job(directory, step, jobs, share, ray)
    graph.graph["collectives"].pricing = price_collectives(graph, link)
    return graph


def replay_job(
    directory: str | os.PathLike[str],
    step: str | int | None = None,
    link: str | float | Link | None = None,
    jobs: int | None = 1,
    policy: Policy = EARLIEST,
    share: bool = True,
    ray: str | None = None,
    by_workers: bool | None = None,
) -> JobReplay:
    """Load the job in ``directory``, price its collectives (:func:`load_priced_job`) and simulate all ranks
    together. ``by_workers``: simulate it by ``jobs`` workers that each hold some of its ranks (local processes, or
    Ray actors on the cluster at ``ray``; :mod:`daydream.api.job_workers`) instead of in this process, with the same
    result; None: where the job is large enough for that to pay (:func:`by_workers_pays`)."""
    if by_workers is None:
        by_workers = by_workers_pays(directory, policy)
    if by_workers:
        from daydream.api.job_workers import replay_job_by_workers

        count = job_worker_count(directory, jobs, ray)
        # one worker on this machine is this process: no process to start (and no __main__ guard to ask of a script)
        return replay_job_by_workers(
            directory, step, link, count, policy, share, ray, in_process=count == 1 and ray is None
        )
    return replay_job_graph(load_priced_job(directory, step, link, jobs, share, ray), policy)


# a job's rank traces, in bytes on disk, past which workers simulate it (by_workers_pays), and the MiB of traces
# worth a worker of its own (the CLI's default --jobs there): measured with bench/bench_job_workers.py on 2 cores
# (docs/speed.md, "Jobs of any size"): dlrm8's ranks varied, 64 ranks (3.8 MB) as fast either way, 256 ranks (15 MB)
# 39-43 s by 2 workers against 59-61 s jointly, 1,024 ranks 84 s against 141 s (and 0.3 GB per process against 2.6)
BY_WORKERS_BYTES = 8 << 20
MIB_PER_WORKER = 16


def job_worker_count(directory: str | os.PathLike[str], jobs: int | None, ray: str | None = None) -> int:
    """The workers that simulate the job in ``directory`` (``jobs``; None: one per RANKS_PER_PROCESS ranks or per
    MIB_PER_WORKER of traces, the CLI's default), at most one per core here and one per rank."""
    n = len(rank_trace_files(directory))
    if jobs is None:
        jobs = max(processes_for(n, RANKS_PER_PROCESS), processes_for(job_trace_bytes(directory) >> 20, MIB_PER_WORKER))
    return worker_count(jobs, n, local=ray is None)


def job_trace_bytes(directory: str | os.PathLike[str]) -> int:
    """The size on disk of a job's rank traces, xz ones as gzip would hold them (0 where one cannot be read: the load
    says why)."""
    total = 0
    for path in rank_trace_files(directory):
        try:
            total += size_as_gzip(path)
        except OSError:
            return 0
    return total


def by_workers_pays(directory: str | os.PathLike[str], policy: Policy = EARLIEST) -> bool:
    """Whether workers that each hold some ranks simulate the job in ``directory`` (``daydream simulate``'s
    default): where its rank traces hold more than BY_WORKERS_BYTES on disk; never under the fifo policy, which
    orders tasks by when they became ready, not by time."""
    return policy.kind != "fifo" and job_trace_bytes(directory) > BY_WORKERS_BYTES


# --- the straggler in words: what simulate, run and report say of it, the same sentences in the terminal and the page


def straggler_sentence(s: Straggler) -> str:
    """The straggler named as the rank the others wait for, with its late start and the time it held them."""
    n = len(s.collectives)
    start = (
        f"its step starts {ms(s.late_start_us)} after the median rank's ({ms(s.offset_us)} after rank "
        f"{s.first_rank}'s, the first to start)"
        if s.late_start_us > 0
        else (
            f"its step starts no later than the median rank's ({ms(s.offset_us)} after rank {s.first_rank}'s, the first"
            " to start)"
        )
    )
    return (
        f"rank {s.rank}, the rank the others wait for: {start}, and it reached {n:,} of the job's "
        f"{s.job_collectives:,} collective{'s' if s.job_collectives != 1 else ''} last, holding the others back "
        f"{ms(s.held_us)} in all"
    )


def straggler_path_sentence(s: Straggler, step_us: float) -> str:
    """Where the straggler's time went on the way to the collectives it held: its critical path, within its window."""
    since = "its step's start" if s.path_from_us <= 0 else f"{ms(s.path_from_us)} into its step"
    if s.path_waited_for is not None:
        since += f" (where it waited for rank {s.path_waited_for})"
    shares = ", ".join(f"{name} {ms(t)}" for name, t in s.tasks.items())
    return (
        f"rank {s.rank}'s critical path from {since} to the last collective it held,"
        f" {ms(s.path_to_us - s.path_from_us)} of its {ms(step_us)} step, by task (each moment counted once; a task"
        f" holds the path from its start to the next one's): {shares}"
    )


def longest_window_sentence(s: Straggler, rank: int, step_us: float, wait_us: float, offset_us: float) -> str | None:
    """Why the longest per-rank step (``rank``'s: its window, its wait and its start after the first rank's; the
    job's step) is not the straggler's (None where it is): each rank's step is its own window, and one that starts
    early waits long in it."""
    if rank == s.rank:
        return None
    start = "it starts first" if rank == s.first_rank else f"it starts {ms(offset_us)} after rank {s.first_rank}'s"
    return (
        f"rank {rank}'s step is the longest, {ms(step_us)}, and is the job's step: {start} and waits "
        f"{ms(wait_us)} of it for the others. Each rank's step is its own window, from its own step's start to its "
        "end, and a rank that starts earlier waits longer for the same collectives: the straggler is the rank whose "
        "arrivals end those waits, not the rank with the longest step."
    )


def ranks_legend(first_rank: int) -> str:
    """What the per-rank table's columns mean (starts, waiting, working, delays others)."""
    return (
        f"starts: its step's start after the first rank's (rank {first_rank}'s); waiting: in collectives, for the "
        "ranks that reached them later; working: its step less its waiting; delays others: how much earlier the "
        "collectives it reached last would have started without it"
    )


def job_inputs(directory: str | os.PathLike[str]) -> list[str]:
    """The files reading a job reads: its rank traces."""
    try:
        return rank_trace_files(directory)
    except TraceError:
        return []


__all__ = [
    "HeldCollective",
    "JobReplay",
    "RankResult",
    "Straggler",
    "is_job",
    "longest_window_sentence",
    "ranks_legend",
    "straggler_path_sentence",
    "straggler_sentence",
    "job_inputs",
    "load_job",
    "load_priced_job",
    "rank_results",
    "replay_job",
    "replay_job_graph",
]
