"""Each rank of a simulated multi-rank job: its predicted step against its measured one, its wait in collectives,
and the straggler, the rank whose late arrival at collectives held the others back most.

A rank's predicted step is the period of its measured step (Timeline.step_us over its tasks): from the end of its
context step to the end of its step, or, without a context step, from its first task's start (at its ``offset_us``
after the job's first rank, graph.graph["ranks"], unless a script moved it) to its last task's end, as its measured
step is measured. A rank that shares
another's tasks (``same_as``) has that rank's times. A rank *holds* a collective when it arrives last: by the time
from the second-to-last arrival to its own (what the others would have gained had it come as early as they did).
"""

from __future__ import annotations

from collections import defaultdict

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
    step_us: float
    error_pct: float
    wait_us: float  # in collectives, waiting for the ranks that reached them later
    offset_us: float  # its step's start after the job's first rank's
    held_us: float  # how much later collectives started because this rank reached them last
    same_as: int | None


class Straggler(msgspec.Struct):
    """The rank that held the others back most: by how much (summed over the collectives it reached last, the
    time from the second-to-last rank's arrival to its own) and where its time went before those arrivals."""

    rank: int
    held_us: float
    collectives: int
    late_start_us: float  # of that, its step starting after the median rank's
    tasks: dict[str, float]  # its tasks on the way to those collectives, by name (microseconds on its critical path)


def rank_results(graph: nx.DiGraph, timeline: Timeline) -> tuple[list[RankResult], Straggler | None]:
    """Per rank of a simulated job graph: measured and predicted step, wait in collectives, how much it held the
    others; and the straggler."""
    infos: list[RankInfo] = graph.graph["ranks"]
    twins: dict[int, int] = defaultdict(int)  # ranks each rank with tasks stands for, itself included
    for info in infos:
        twins[info.rank if info.same_as is None else info.same_as] += 1
    ranks = np.asarray([a.get("rank") for a in timeline.task_attrs])
    arrival = timeline.arrival
    waits: dict[int, float] = defaultdict(float)
    held: dict[int, float] = defaultdict(float)
    held_count: dict[int, int] = defaultdict(int)
    last_members: dict[int, list[int]] = defaultdict(list)
    if arrival is not None:
        by_id: dict[str, list[int]] = defaultdict(list)
        for i, a in enumerate(timeline.task_attrs):
            if a.get("collective_id") is not None:
                by_id[a["collective_id"]].append(i)
        for members in by_id.values():
            for m in members:
                waits[int(ranks[m])] += float(timeline.start[m] - arrival[m])
            if len(members) > 1:
                order = sorted(members, key=lambda m: arrival[m])
                last, second = order[-1], order[-2]
                # a rank with twins (ranks sharing its tasks) arrives with them: none of them alone holds the others
                gain = float(arrival[last] - arrival[second]) if twins[int(ranks[last])] == 1 else 0.0
                if gain > 0:
                    held[int(ranks[last])] += gain
                    held_count[int(ranks[last])] += 1
                    last_members[int(ranks[last])].append(last)
    span_of: dict[int, float] = {}
    for r in np.unique(ranks):
        span_of[int(r)] = timeline.step_us(np.flatnonzero(ranks == r))  # its step's period (its span without context)
    results = []
    for info in infos:
        own = info.rank if info.same_as is None else info.same_as
        predicted = span_of[own]
        results.append(RankResult(
            rank=info.rank, measured_us=info.measured_us, step_us=predicted,
            error_pct=100.0 * (predicted - info.measured_us) / info.measured_us if info.measured_us else 0.0,
            wait_us=waits.get(own, 0.0), offset_us=info.offset_us, held_us=held.get(own, 0.0), same_as=info.same_as,
        ))  # fmt: skip
    straggler = None
    if held:
        r = max(held, key=lambda k: held[k])
        median_offset = float(np.median([i.offset_us for i in infos]))
        offset = next(i.offset_us for i in infos if i.rank == r)
        straggler = Straggler(rank=r, held_us=held[r], collectives=held_count[r],
                              late_start_us=max(0.0, offset - median_offset), tasks=_way_to(timeline, last_members[r]))  # fmt: skip
    return results, straggler


def _way_to(timeline: Timeline, members: list[int], top: int = 5) -> dict[str, float]:
    """The tasks on the critical path of each member's rank up to its arrival (back to the rank's previous
    collective or its start), by name: where the straggler's time went."""
    out: dict[str, float] = defaultdict(float)
    attrs = timeline.task_attrs
    for m in members:
        rank = attrs[m].get("rank")
        nxt, i = m, int(timeline.cause[m])
        while i >= 0 and attrs[i].get("rank") == rank and attrs[i].get("collective_id") is None:
            out[attrs[i]["name"]] += float(timeline.start[nxt] - timeline.start[i])
            nxt, i = i, int(timeline.cause[i])
    return dict(sorted(out.items(), key=lambda kv: -kv[1])[:top])
