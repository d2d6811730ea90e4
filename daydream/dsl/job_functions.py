"""Functions over a multi-rank job (a graph of several ranks, docs/multigpu.md): its ranks, each rank's pace in
the prediction so far, and the straggler. Each call that reads the prediction simulates the graph as it is now.

On a one-rank graph they answer for that rank (``job_ranks()`` is ``[its rank]``, ``straggler()`` is none).
"""

from __future__ import annotations

from typing import Any

import networkx as nx

from daydream.dsl.functions import Cost, is_whole, number_argument, register_function
from daydream.dsl.limits import SIMULATION_COST
from daydream.errors import DaydreamError
from daydream.graph import derived
from daydream.simulation import simulate
from daydream.simulation.ranks import RankResult, Straggler, rank_results


def _ranks_of(graph: nx.DiGraph) -> list[int]:
    ranks = graph.graph.get("ranks")
    if ranks:
        return [r.rank for r in ranks]
    return [int(graph.graph.get("rank") or 0)]


# A rank of a job simulated by workers (daydream.api.job_whatif) is held apart from the others: its graph says so
# (graph.graph[HELD_APART]) and keeps the job's baseline prediction beside it (derived, under JOB_PREDICTION), which
# is the prediction so far until the graph changes.
HELD_APART = "held_apart"
JOB_PREDICTION = "job prediction"


def _predicted(graph: nx.DiGraph) -> tuple[list[RankResult], Straggler | None]:
    if not graph.graph.get("ranks"):
        raise DaydreamError("the graph is one rank's, not a job's: give a folder of rank traces (docs/multigpu.md)")
    if graph.graph.get(HELD_APART):
        so_far = derived.cached(graph, JOB_PREDICTION, derived.ASPECTS)
        if so_far is None:
            raise DaydreamError(
                "the job's prediction after the script changed the graph: the job is simulated by workers, "
                "each rank where it lives, which know the prediction before any change only (call it "
                "before the script's first change, or give --no-by-workers)"
            )
        return so_far  # type: ignore[no-any-return]
    return rank_results(graph, simulate(graph))


def _rank(graph: nx.DiGraph, value: Any, fn: str) -> int:
    n = number_argument(value, fn, "rank")
    ranks = _ranks_of(graph)
    if not is_whole(n) or int(n) not in ranks:
        raise DaydreamError(f"{fn}(): no rank {value} in the job (ranks {min(ranks)} to {max(ranks)})")
    return int(n)


def _straggler(graph: nx.DiGraph) -> int | None:
    if not graph.graph.get("ranks"):
        return None
    _, straggler = _predicted(graph)
    return straggler.rank if straggler is not None else None


def _rank_work(graph: nx.DiGraph, rank: Any) -> float:
    r = _rank(graph, rank, "rank_work")
    results, _ = _predicted(graph)
    own = next(x for x in results if x.rank == r)
    return own.step_us - own.wait_us


def _rank_works(graph: nx.DiGraph) -> list[float]:
    results, _ = _predicted(graph)
    return [x.step_us - x.wait_us for x in results]


def _rank_offsets(graph: nx.DiGraph) -> list[float]:
    ranks = graph.graph.get("ranks")
    return [float(r.offset_us) for r in ranks] if ranks else [0.0]


def _rank_offset(graph: nx.DiGraph, rank: Any) -> float:
    r = _rank(graph, rank, "rank_offset")
    return next((float(x.offset_us) for x in graph.graph.get("ranks") or () if x.rank == r), 0.0)


for _name, _impl, _lo, _hi, _doc, _cost in [
    ("job_ranks", _ranks_of, 0, 0, "job_ranks(): the job's ranks, in order ([the trace's rank] for one trace)", 0),
    (
        "straggler",
        _straggler,
        0,
        0,
        "straggler(): the rank whose late arrival at collectives held the others back most, "
        "as predicted now; none when none did (and on one rank)",
        SIMULATION_COST,
    ),
    (
        "rank_work",
        _rank_work,
        1,
        1,
        "rank_work(rank): that rank's predicted step less its wait in collectives (us)",
        SIMULATION_COST,
    ),
    (
        "rank_works",
        _rank_works,
        0,
        0,
        "rank_works(): rank_work of every rank, in the order of job_ranks()",
        SIMULATION_COST,
    ),
    (
        "rank_offset",
        _rank_offset,
        1,
        1,
        "rank_offset(rank): how long after the job's first rank that rank's step starts (us)",
        0,
    ),
    ("rank_offsets", _rank_offsets, 0, 0, "rank_offsets(): rank_offset of every rank, in the order of job_ranks()", 0),
]:
    # a simulation of the job and its ranks' results: about 20 us a task, three times one rank's (bench_budget.py);
    # the graph's alone, so a repeated call on the unchanged graph reads the last one; 20 units a call for its
    # Python (the ranks looked up, on a loaded 2-core machine)
    register_function(_name, _impl, _lo, _hi, _doc, cost=Cost(per_task=3 * _cost, per_call=20, cached=_cost > 0))
