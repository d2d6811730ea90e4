"""Each rank of a simulated multi-rank job: its predicted step against its measured one, its wait in collectives,
and the straggler, the rank whose late arrival at collectives held the others back most.

A rank's predicted step is the period of its measured step (Timeline.step_us over its tasks): its own window, from
the end of its context step to the end of its step, or, without a context step, from its first task's start (at
its ``offset_us`` after the job's first rank, graph.graph["ranks"], unless a script moved it) to its last task's end,
as its measured step is measured. The ranks' windows start apart and, where the step ends in collectives, end close
together (a collective ends at once on all its ranks): the rank that starts first has the longest window and waits
most of it, and the longest window is not the straggler's. A rank that shares another's tasks (``same_as``) has
that rank's times. A rank *holds* a collective when it arrives last: by the time from the second-to-last arrival to
its own (what the others would have gained had it come as early as they did).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import msgspec
import networkx as nx
import numpy as np

from daydream.graph.schema import RankInfo
from daydream.simulation.timeline import Timeline


class RankResult(msgspec.Struct):
    """One rank of a simulated job: its step in the timeline it was taken from (the baseline, for the unchanged job;
    the prediction, after scripts)."""

    rank: int
    measured_us: float
    step_us: float  # its own window, from its own step's start
    error_pct: float
    wait_us: float  # in collectives, waiting for the ranks that reached them later
    offset_us: float  # its window's start after the job's first rank's (in this timeline: a script may move it)
    held_us: float  # how much later collectives started because this rank reached them last
    same_as: int | None


class HeldCollective(msgspec.Struct):
    """A collective the straggler reached last, and how long it held the others there."""

    id: str  # the collective's process group and place in it (world#3), as its members share it
    kind: str | None  # the collective (allreduce, alltoall, ...)
    name: str  # the straggler's kernel of it
    phase: str | None
    held_us: float  # its arrival after the second-to-last rank's: how much earlier the collective would have started
    reached_us: float  # its arrival, after its own step's start
    next_rank: int  # the rank that reached it second to last: the one the others would have waited for instead


class Straggler(msgspec.Struct):
    """The rank the others wait for: the rank that held them back most, summed over the collectives it reached last
    (the time from the second-to-last rank's arrival to its own); its late start; and its critical path on the way to
    those collectives."""

    rank: int
    held_us: float
    collectives: list[HeldCollective]  # those it reached last, the longest held first
    job_collectives: int  # the collectives of the job's step, for scale
    late_start_us: float  # its step's start after the median rank's (0 where it starts no later)
    offset_us: float  # its step's start after the first rank's
    first_rank: int  # the rank whose step starts first (the lowest of those tied)
    # its critical path back from the start of the last collective it held, through its own tasks, to its step's
    # start (or to where it waited for another rank, path_waited_for): from path_from_us to path_to_us after its
    # step's start, inside its window; ``tasks``, its five largest shares by task name, each moment counted once (they
    # add up to at most path_to_us - path_from_us)
    path_from_us: float
    path_to_us: float
    path_waited_for: int | None
    tasks: dict[str, float]


def rank_results(graph: nx.DiGraph, timeline: Timeline) -> tuple[list[RankResult], Straggler | None]:
    """Per rank of a simulated job graph: measured and predicted step, wait in collectives, how much it held the
    others; and the straggler."""
    infos: list[RankInfo] = graph.graph["ranks"]
    ranks = timeline.values("rank")
    arrival = timeline.arrival
    window: dict[int, tuple[float, float]] = {}  # each rank with tasks: its window's start and its step
    for r, ix in timeline.rank_tasks().items():
        window[r] = (timeline.step_window(ix)[0], timeline.step_us(ix))
    waits: dict[int, float] = defaultdict(float)
    latest: list[tuple[str, int, list[tuple[float, int]]]] = []  # each collective: its id, a member, its last arrivals
    ids: dict[str, list[int]] = defaultdict(list)
    if arrival is not None:
        for i, cid in enumerate(timeline.values("collective_id")):
            if cid is not None:
                ids[cid].append(i)
        for cid, members in ids.items():
            for m in members:
                waits[ranks[m]] += float(timeline.start[m] - arrival[m])
            if len(members) > 1:
                order = sorted(members, key=lambda m: arrival[m])
                latest.append((cid, order[-1], [(float(arrival[m]), ranks[m]) for m in order[-2:]]))
    held = held_collectives(infos, [(m, last) for _, m, last in latest])
    results = job_rank_results(infos, window, waits, held)
    r = straggler_rank(held)
    if r is None:
        return results, None
    start = window[r][0]
    members = [m for _, m, _ in held[r]]
    cids, names, phases, kinds = (
        timeline.values(key, tasks=members) for key in ("collective_id", "name", "phase", "collective")
    )
    collectives = [
        HeldCollective(
            id=str(cid),
            kind=kind,
            name=str(name),
            phase=phase,
            held_us=h,
            reached_us=float(arrival[m]) - start,
            next_rank=int(nxt),
        )  # type: ignore[index]
        for (h, m, nxt), cid, name, phase, kind in zip(held[r], cids, names, phases, kinds)
    ]
    way = _way_to(timeline, ranks, max(members, key=lambda m: timeline.start[m]), start)
    return results, straggler_of(results, r, collectives, len(ids), way, start)


def job_rank_results(
    infos: list[RankInfo],
    window: dict[int, tuple[float, float]],
    waits: dict[int, float],
    held: dict[int, list[tuple[float, Any, int]]],
) -> list[RankResult]:
    """Each rank's row (``infos``: every rank, in order) from its window's start and step (``window``), its wait in
    collectives and the collectives it held (:func:`held_collectives`), for the ranks with tasks of their own; a rank
    that shares a twin's tasks has the twin's."""
    first = min(start for start, _ in window.values()) if window else 0.0
    results = []
    for info in infos:
        own = info.rank if info.same_as is None else info.same_as
        start, predicted = window[own]
        results.append(
            RankResult(
                rank=info.rank,
                measured_us=info.measured_us,
                step_us=predicted,
                error_pct=100.0 * (predicted - info.measured_us) / info.measured_us if info.measured_us else 0.0,
                wait_us=waits.get(own, 0.0),
                offset_us=start - first,
                held_us=sum((h for h, _, _ in held.get(own, ())), 0.0),
                same_as=info.same_as,
            )
        )
    return results


def held_collectives(
    infos: list[RankInfo], latest: list[tuple[Any, list[tuple[float, int]]]]
) -> dict[int, list[tuple[float, Any, int]]]:
    """Which rank held each collective back and how long: ``latest`` holds, per collective of two members or more (in
    the job's order), a key for it (its member that arrived last, or its number) and its two latest arrivals with
    their ranks, the later last (arrival, then task order: as a stable sort by arrival leaves them). Per rank, the
    collectives it held: (the time from the second-to-last arrival to its own, the key, the second-to-last rank). A
    rank with twins (ranks sharing its tasks) arrives with them: none of them alone holds the others."""
    twins: dict[int, int] = defaultdict(int)  # ranks each rank with tasks stands for, itself included
    for info in infos:
        twins[info.rank if info.same_as is None else info.same_as] += 1
    held: dict[int, list[tuple[float, Any, int]]] = defaultdict(list)
    for key, ((second, second_rank), (last, last_rank)) in latest:
        gain = last - second if twins[last_rank] == 1 else 0.0
        if gain > 0:
            held[last_rank].append((gain, key, second_rank))
    return held


def straggler_rank(held: dict[int, list[tuple[float, Any, int]]]) -> int | None:
    """The rank that held the others back most, summed over the collectives it reached last (the lowest of those
    tied); None where none did."""
    if not held:
        return None
    return max(sorted(held), key=lambda k: sum(h for h, _, _ in held[k]))


def straggler_of(
    results: list[RankResult],
    r: int,
    collectives: list[HeldCollective],
    job_collectives: int,
    way: tuple[float, float, int | None, dict[str, float]],
    start: float,
) -> Straggler:
    """The straggler ``r`` from the collectives it held, the
    job's collective count, its way to the last one it held (:func:`_way_to`) and its window's start."""
    offsets = [x.offset_us for x in results]
    mine = next(x for x in results if x.rank == r)
    path_from, path_to, waited_for, tasks = way
    return Straggler(
        rank=r,
        held_us=mine.held_us,
        collectives=sorted(collectives, key=lambda c: -c.held_us),
        job_collectives=job_collectives,
        late_start_us=max(0.0, mine.offset_us - float(np.median(offsets))),
        offset_us=mine.offset_us,
        first_rank=min(results, key=lambda x: x.offset_us).rank,
        path_from_us=path_from - start,
        path_to_us=path_to - start,
        path_waited_for=waited_for,
        tasks=tasks,
    )


def _way_to(
    timeline: Timeline, ranks: list[int], member: int, since: float, top: int = 5
) -> tuple[float, float, int | None, dict[str, float]]:
    """The critical path of ``member``'s rank (``ranks``: each task's) up to ``member``'s start, back through its own
    tasks (collectives it reached last included) to the rank's window start ``since``, or to the first task whose
    start another rank fixed (the rank waited for it there): (its first moment, its last, that other rank or None,
    the ``top`` largest shares by task name). Each task holds the path from its start to the next path task's start,
    clipped to the window: one chain, so the shares add up to the path's length, within the rank's window."""
    out: dict[str, float] = defaultdict(float)
    rank = ranks[member]
    cause, start = timeline.cause, timeline.start
    to = float(start[member])
    begin, nxt, i = to, member, int(cause[member])
    seen = {member}  # causes that loop (a timeline built by hand) end where they first come back
    chain: list[tuple[int, float]] = []
    other = None
    while i != -1 and i not in seen and float(start[nxt]) > since:
        if i < -1 or ranks[i] != rank:
            # the rank waited for another here (a cause below -1: rank -2 - cause's task, in another part of a job
            # simulated in parts): the time before is the other's
            other = -2 - i if i < -1 else ranks[i]
            break
        seen.add(i)
        begin = max(float(start[i]), since)
        chain.append((i, float(start[nxt]) - begin))
        nxt, i = i, int(cause[i])
    names = timeline.values("name", tasks=[i for i, _ in chain])
    for name, (_, t) in zip(names, chain):
        out[str(name)] += t
    return begin, to, other, dict(sorted(out.items(), key=lambda kv: -kv[1])[:top])
