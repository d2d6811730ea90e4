"""The ranks of a multi-GPU job in one graph: each rank's tasks placed at its own start, and each collective's
members, one comm task per rank, matched across ranks so that the simulator starts them together.

A collective is matched by its process group (a comm task's ``group``; ``world`` where the trace names none) and
the order in which each rank issued its group's collectives: the k-th collective a rank issues on a group is the
k-th of every other rank of that group (NCCL's own rule: collectives on one communicator run in issue order).
Members get ``collective_id`` = ``GROUP#k``. Ranks whose graphs are the same (``rank_fingerprint``: tasks, times,
dependencies and the step's start, rank ids aside) share one set of tasks: a job of a thousand identical ranks is
one rank's tasks, its collectives priced for a thousand.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import msgspec
import networkx as nx
import numpy as np

from daydream.errors import DaydreamError
from daydream.graph.adjacency import attrs_of, edge_arrays, fill, predecessors_of, task_columns
from daydream.graph.schema import EDGE_KINDS, Edge, JobCollectives, ProcessGroup, RankInfo, Task

WORLD = "world"  # the process group of a collective whose trace names none: every rank of the job


def rank_fingerprint(graph: nx.DiGraph) -> str:
    """A digest of what a simulation of ``graph`` depends on, rank ids aside: the tasks in order (kind, name, thread
    by order of first use, duration, gap, release, step, collective, size, group), the dependencies, the step's
    start and measured time. Equal digests: the ranks run the same tasks at the same times."""
    h = hashlib.blake2b(digest_size=16)
    threads: dict[str, int] = {}
    h.update(repr((graph.graph.get("origin_us"), graph.graph.get("measured_us"))).encode())
    tasks, edges = task_columns(graph), edge_arrays(graph)
    if tasks is not None and edges is not None:  # a built graph none of whose dicts is made: read as it is held
        kind, name, thread, duration, gap, release, step, collective, size, group = (
            tasks.values(k, 0.0 if k == "gap" else None)
            for k in ("kind", "name", "thread", "duration", "gap", "release", "step", "collective", "bytes", "group")
        )
        ptr, parent = edges.ptr.tolist(), edges.parent.tolist()
        edge_kind = list(map(EDGE_KINDS.__getitem__, edges.kind.tolist()))
        lag = [x if has else 0.0 for x, has in zip(edges.lag.tolist(), edges.has_lag.tolist())]
        for i in range(len(tasks)):
            t = threads.setdefault(thread[i], len(threads))
            parents = tuple(zip(parent[ptr[i] : ptr[i + 1]], edge_kind[ptr[i] : ptr[i + 1]], lag[ptr[i] : ptr[i + 1]]))
            row = (
                kind[i],
                name[i],
                t,
                duration[i],
                gap[i],
                release[i],
                step[i],
                collective[i],
                size[i],
                group[i],
                parents,
            )
            h.update(repr(row).encode())
        return h.hexdigest()
    index = {n: i for i, n in enumerate(graph)}
    pred = predecessors_of(graph)
    for n, a in attrs_of(graph).items():
        t = threads.setdefault(a["thread"], len(threads))
        row = (
            a["kind"],
            a["name"],
            t,
            a["duration"],
            a.get("gap", 0.0),
            a.get("release"),
            a.get("step"),
            a.get("collective"),
            a.get("bytes"),
            a.get("group"),
            tuple((index[p], e.get("kind"), e.get("lag", 0.0)) for p, e in pred[n].items()),
        )
        h.update(repr(row).encode())
    return h.hexdigest()


def join_ranks(graphs: Sequence[nx.DiGraph], ranks: Sequence[RankInfo], where: str | None = None) -> nx.DiGraph:
    """One graph of a job's ranks: ``graphs`` are the graphs of the ranks of ``ranks`` whose ``same_as`` is None, in
    that order (their attribute dicts are taken over, not copied); each rank's tasks start at its step's start
    after the job's first (``offset_us``: the roots of its graph are released then), and its comm tasks carry their
    ``collective_id``. ``where`` names the job in messages (its folder)."""
    own = [r for r in ranks if r.same_as is None]
    if len(own) != len(graphs):
        raise ValueError(f"{len(graphs)} graphs for {len(own)} ranks with tasks of their own")
    origin = min(r.origin_us for r in ranks)
    for r in ranks:
        r.offset_us = r.origin_us - origin
    job = nx.DiGraph()
    first = graphs[0].graph
    nodes: list[int] = []
    task_attrs: list[Task] = []
    parents: list[dict[Any, Edge]] = []
    warnings: list[str] = []
    for info, g in zip(own, graphs):
        offset = info.offset_us
        base = len(nodes)
        ids = {n: base + k for k, n in enumerate(g)}
        pred = predecessors_of(g)
        for n, a in attrs_of(g).items():
            _on_job_clock(a, bool(pred[n]), info.rank, offset)
            nodes.append(ids[n])
            task_attrs.append(a)
            parents.append({ids[p]: e for p, e in pred[n].items()})
        warnings.extend(f"rank {info.rank}: {w}" for w in g.graph.get("warnings", []))
    fill(job, nodes, task_attrs, parents)
    job.graph.update(
        trace=where,
        rank=None,
        world_size=max(len(ranks), int(first.get("world_size") or 0)),
        device=first.get("device"),
        device_properties=first.get("device_properties", {}),
        origin_us=origin,
        steps=[
            msgspec.structs.replace(s, measured_us=max(r.measured_us for r in ranks)) for s in first.get("steps", [])
        ],
        delays=first.get("delays"),
        warnings=warnings,
        measured_us=max(r.measured_us for r in ranks),
        recording=first.get("recording"),
        causality=first.get("causality"),
        next_task_id=len(nodes),
        ranks=[msgspec.structs.replace(r) for r in ranks],
    )
    job.graph["collectives"] = match_collectives(job, ranks)
    return job


def _on_job_clock(a: Task, has_parents: bool, rank: int, offset: float) -> None:
    """A rank's task as the job's graph holds it: its ``rank``, its times ``offset`` later, a root released then (the
    rank's step starts this late: what the job's previous step left)."""
    a["rank"] = rank
    if "start" in a:
        a["start"] += offset
    if a.get("release") is not None:
        a["release"] += offset
    elif not has_parents and offset:
        a["release"] = offset


def place_rank(
    graph: nx.DiGraph,
    info: RankInfo,
    ranks: Sequence[RankInfo],
    world_size: int,
    collectives: Sequence[tuple[str | None, str, int, float]],
) -> None:
    """Make one rank's graph (one trace's, built) its part of the job graph, in place, as :func:`join_ranks` and
    :func:`match_collectives` make it and pricing leaves it: its tasks carry ``rank``, start ``info.offset_us`` later
    (the roots released then), and its comm tasks (in :func:`comm_tasks`' order) their ``collective_id``, ``group``,
    ``group_size`` and priced ``duration`` (``collectives``: each one's, the id None where it matched none); the graph
    knows the job's ranks and world size. A script run on it sees what it would see of this rank in the job's graph:
    a job simulated by workers runs scripts on each rank where it lives (:mod:`daydream.api.job_whatif`)."""
    pred = predecessors_of(graph)
    attrs = attrs_of(graph)
    for n, a in attrs.items():
        _on_job_clock(a, bool(pred[n]), info.rank, info.offset_us)
    comm = [n for n, a in attrs.items() if a["kind"] == "comm"]
    if len(comm) != len(collectives):
        raise ValueError(f"rank {info.rank}: {len(comm)} comm tasks, {len(collectives)} collectives given")
    for n, (cid, group, size, us) in zip(comm, collectives):
        a = attrs[n]
        if cid is not None:
            a["collective_id"], a["group"], a["group_size"] = cid, group, size
            a.setdefault("traced_us", float(a["duration"]))
            a["duration"] = us
    graph.graph.update(rank=None, world_size=world_size, ranks=[msgspec.structs.replace(r) for r in ranks])


def unplace_rank(graph: nx.DiGraph, info: RankInfo) -> None:
    """A rank's part of the job graph (:func:`place_rank`, scripts may have changed it) back on its own clock, in
    place: start and release times less its offset (a root released at its step's start is released at 0: the job
    places it again, :meth:`daydream.simulation.shard.RankArrays.ready`)."""
    offset = info.offset_us
    if not offset:
        return
    for a in attrs_of(graph).values():
        if "start" in a:
            a["start"] -= offset
        if a.get("release") is not None:
            a["release"] -= offset


class CommTask(msgspec.Struct, frozen=True, array_like=True):
    """A comm task as matching and pricing a job's collectives read it, whether from a job graph
    (:func:`comm_tasks`) or from a rank simulated apart from the others (:mod:`daydream.simulation.shard`)."""

    rank: int
    order: Any  # its place among the job's tasks: the job graph's task (its number, rank-major, in a built job)
    issued_us: float  # its launch call's traced start, or its own: the order a rank issued its collectives in
    start_us: float  # its traced start, on the job's clock
    traced_us: float  # its traced duration (what it took, waits for slower ranks included)
    name: str
    collective: str | None
    bytes: int | float | None
    group: str | None  # its process group as the trace names it (None: the world)
    group_size: int | None
    group_ranks: tuple[int, ...] | None
    phase: str | None = None


def comm_tasks(
    graph: nx.DiGraph,
    rank: int | None = None,
    base: int = 0,
    offset_us: float = 0.0,
    nodes: Sequence[Any] | None = None,
) -> list[CommTask]:
    """The comm tasks of ``graph``, in task order (or the tasks ``nodes``): a job graph's (each task's ``rank``, its
    ``order`` the task), or one rank's graph as ``rank``, whose tasks come ``base`` places into the job's (``order``:
    that plus the task's place in the graph) and whose clock runs ``offset_us`` behind the job's. A built graph's
    are read from its columns, without making its task dicts."""
    keys = (
        "start",
        "duration",
        "traced_us",
        "name",
        "collective",
        "bytes",
        "group",
        "group_size",
        "group_ranks",
        "phase",
    )
    tasks, edges = task_columns(graph), edge_arrays(graph)
    if tasks is not None and edges is not None and nodes is None and rank is not None:
        chosen = [i for i, k in enumerate(tasks.values("kind")) if k == "comm"]
        columns = [tasks.values(k, None, chosen) for k in keys]
        launch = np.flatnonzero(edges.of_kind(("launch",)))
        child = edges.child()[launch]
        by_child = dict(zip(child.tolist(), edges.parent[launch].tolist()))  # a kernel has one launch
        launched = [by_child.get(i) for i in chosen]
        parent_start = tasks.values("start", 0.0, [p for p in launched if p is not None])
        starts = iter(parent_start)
        issued = [float(next(starts)) if p is not None else float(s or 0.0) for p, s in zip(launched, columns[0])]
        rows = zip(chosen, issued, *columns)
    else:
        attrs, pred = attrs_of(graph), predecessors_of(graph)
        place = {n: k for k, n in enumerate(attrs)} if rank is not None else {}
        picked = list(nodes) if nodes is not None else [n for n, a in attrs.items() if a["kind"] == "comm"]
        issued = []
        for n in picked:
            issue = float(attrs[n].get("start", 0.0))
            for p, e in pred[n].items():
                if e.get("kind") == "launch":
                    issue = float(attrs[p].get("start", 0.0))
                    break
            issued.append(issue)
        rows = zip(picked, issued, *([attrs[n].get(k) for n in picked] for k in keys))
        if rank is not None:
            rows = ((place[n], *rest) for n, *rest in rows)
        else:
            ranks = [attrs[n]["rank"] for n in picked]
    out = []
    for k, (n, issue, start, duration, traced, name, collective, size, group, group_size, members, phase) in enumerate(
        rows
    ):
        out.append(
            CommTask(
                rank=ranks[k] if rank is None else rank,
                order=n if rank is None else base + n,
                issued_us=issue + offset_us,
                start_us=float(start or 0.0) + offset_us,
                traced_us=float(traced if traced is not None else duration),
                name=name,
                collective=collective,
                bytes=size,
                group=group,
                group_size=group_size,
                group_ranks=tuple(members) if members else None,
                phase=phase,
            )
        )
    return out


def _label(a: CommTask) -> str:
    size = f", {a.bytes:,} bytes" if isinstance(a.bytes, int) else ""
    return f"{a.collective or a.name}{size}"


def match_collectives(graph: nx.DiGraph, ranks: Sequence[RankInfo]) -> JobCollectives:
    """Give each comm task of a job graph its ``collective_id``, ``group`` and ``group_size``; check that every rank
    of a group issues the same collectives in the same order. Returns what was matched: collectives per group."""
    attrs = attrs_of(graph)
    tasks = comm_tasks(graph)
    matched, collectives = match_comm_tasks(tasks, ranks, graph.graph.get("trace"))
    for t, (cid, group, size) in zip(tasks, matched):
        if cid is not None:
            a = attrs[t.order]
            a["collective_id"], a["group"], a["group_size"] = cid, group, size
    return collectives


def match_comm_tasks(
    tasks: Sequence[CommTask], ranks: Sequence[RankInfo], where: str | None = None
) -> tuple[list[tuple[str | None, str, int]], JobCollectives]:
    """Match the comm tasks of a job's ranks (those with tasks of their own; ``ranks``: every rank, ``same_as`` set
    for the others) into collectives: per task (in ``tasks``' order) its ``collective_id`` (``GROUP#k``), process
    group and group size; and the collectives per group. A clear error where a group's ranks disagree."""
    where = where or "job"
    stands_for: dict[int, list[int]] = defaultdict(list)  # rank with tasks -> the ranks it stands for
    for r in ranks:
        stands_for[r.rank if r.same_as is None else r.same_as].append(r.rank)
    all_ranks = sorted(r.rank for r in ranks)
    rep_of = {r.rank: r.rank if r.same_as is None else r.same_as for r in ranks}
    issued: dict[str, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    for k, t in enumerate(tasks):
        issued[t.group or WORLD][t.rank].append(k)
    matched: list[tuple[str | None, str, int]] = [(None, "", 0)] * len(tasks)
    out: dict[str, ProcessGroup] = {}
    for group, by_rank in sorted(issued.items()):
        for ks in by_rank.values():
            ks.sort(key=lambda k: (tasks[k].issued_us, tasks[k].order))
        members = all_ranks if group == WORLD else sorted(r for rep in by_rank for r in stands_for[rep])
        size = max((int(tasks[k].group_size or 0) for ks in by_rank.values() for k in ks), default=0)
        named = {tasks[k].group_ranks for ks in by_rank.values() for k in ks if tasks[k].group_ranks}
        if len(named) > 1:
            raise DaydreamError(
                f"{where}: the ranks disagree on the members of process group "
                f"{group!r}: {'; '.join(format_ranks(sorted(m)) for m in sorted(named))}"
            )
        if group == WORLD:
            size = len(all_ranks)
        elif named:
            # the trace names the group's members: each must be in the job, and each must issue its collectives
            listed = sorted(named.pop())  # type: ignore[arg-type]
            absent = [r for r in listed if r not in rep_of]
            if absent:
                raise DaydreamError(
                    f"{where}: process group {group!r} holds ranks "
                    f"{format_ranks(listed)}, and the job has no trace for rank{'s' if len(absent) > 1 else ''} "
                    f"{format_ranks(absent)}"
                )
            strangers = sorted(r for rep in by_rank for r in stands_for[rep] if r not in listed)
            if strangers:
                raise DaydreamError(
                    f"{where}: rank{'s' if len(strangers) > 1 else ''} {format_ranks(strangers)}"
                    f" issue{'' if len(strangers) > 1 else 's'} collectives on process group {group!r}, whose members"
                    f" are ranks {format_ranks(listed)}"
                )
            members = listed
            size = len(listed)
        elif size > len(members):
            raise DaydreamError(
                f"{where}: process group {group!r} spans {size} ranks, but only "
                f"ranks {format_ranks(members)} issue collectives on it"
            )
        reps = sorted(by_rank)
        missing = [r for r in members if rep_of[r] not in by_rank]
        if missing:
            _mismatch(tasks, where, group, {r: [] for r in missing} | {r: by_rank[r] for r in reps}, 0)
        counts = {len(by_rank[r]) for r in reps}
        names = {tuple(tasks[k].collective or tasks[k].name for k in by_rank[r]) for r in reps}
        if len(counts) > 1 or len(names) > 1:
            seqs = {r: by_rank[r] for r in reps}
            k = next(i for i in range(max(counts)) if len({_at(tasks, seqs[r], i) for r in reps}) > 1)
            _mismatch(tasks, where, group, seqs, k)
        for k in range(counts.pop()):
            cid = f"{group}#{k}"
            for r in reps:
                matched[by_rank[r][k]] = (cid, group, size)
        out[group] = ProcessGroup(ranks=size, collectives=len(by_rank[reps[0]]))
    return matched, JobCollectives(out)


def _at(tasks: Sequence[CommTask], ks: list[int], k: int) -> str | None:
    return tasks[ks[k]].collective or tasks[ks[k]].name if k < len(ks) else None


def _mismatch(tasks: Sequence[CommTask], where: str, group: str, seqs: dict[int, list[int]], k: int) -> None:
    """Say which ranks disagree on the k-th collective of ``group``, and how."""
    said: dict[str, list[int]] = defaultdict(list)
    example: dict[str, str] = {}
    for r, ks in sorted(seqs.items()):
        if k < len(ks):
            key = _at(tasks, ks, k) or ""
            example.setdefault(key, _label(tasks[ks[k]]))
        else:
            key = ""
            example.setdefault(key, f"no collective #{k + 1} (it issues {len(ks)} on this group)")
        said[key].append(r)
    parts = [
        f"rank{'s' if len(rs) > 1 else ''} {format_ranks(rs)} issue{'' if len(rs) > 1 else 's'} {example[key]}"
        for key, rs in sorted(said.items(), key=lambda kv: -len(kv[1]))
    ]
    raise DaydreamError(
        f"{where}: collective #{k + 1} of process group {group!r} does not match across ranks: "
        f"{'; '.join(parts)} (collectives are matched by group and order of issue)"
    )


def format_ranks(ranks: Sequence[Any]) -> str:
    """``0, 1, 2`` or ``0-5, 7`` (ranks that are no numbers as they are)."""
    if not all(isinstance(r, int) for r in ranks):
        return ", ".join(sorted(str(r) for r in ranks))
    out: list[str] = []
    nums = sorted(ranks)
    k = 0
    while k < len(nums):
        j = k
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        out.append(f"{nums[k]}-{nums[j]}" if j > k + 1 else ", ".join(str(x) for x in nums[k : j + 1]))
        k = j + 1
    return ", ".join(out)
