"""A topological order kept up to date as edits add tasks and edges, so that refusing a cycle costs what the edit
touches, not a search of the whole graph (Pearce and Kelly, "A dynamic topological sort algorithm for directed
acyclic graphs", JEA 2006).

The order is a number per task, kept among the graph's derived indexes (:mod:`daydream.graph.derived`), valid while
no task or edge is added or removed (networkx counts edges in time proportional to the graph, too slow to check per
edit: the task count and the edit functions' change counters say it). A task added or removed some other way makes
the order stale and it is computed afresh on next use; ``add_dependency`` drops it. An edge added behind the edit
functions' back can at worst hide a cycle from the check (a stale order never invents one), and the simulator
reports every cycle anyway; this is what lets an edit be refused and rolled back where it happens.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import networkx as nx

from daydream.graph import derived
from daydream.graph.adjacency import predecessors_of, successors_of

_ORDER = "topological_order"
_DEPENDS_ON = (derived.TASKS, derived.EDGES)


def topological_order(graph: nx.DiGraph) -> dict[Any, float] | None:
    """The cached order (task -> number, parents before children), computed if missing or stale; None if the
    graph already has a cycle."""
    order = derived.cached(graph, _ORDER, _DEPENDS_ON)
    if order is not None:
        return order
    try:
        order = {node: float(i) for i, node in enumerate(nx.topological_sort(graph))}
    except nx.NetworkXUnfeasible:
        derived.drop(graph, _ORDER)
        return None
    return derived.keep(graph, _ORDER, order, _DEPENDS_ON)


def forget(graph: nx.DiGraph) -> None:
    """Drop the cached order (after an edit was rolled back)."""
    derived.drop(graph, _ORDER)


def edited(graph: nx.DiGraph, order: dict[Any, float], removed: Iterable[Any] = ()) -> None:
    """Record that ``order`` is valid for the graph as it is now (after removals that kept it valid)."""
    for node in removed:
        order.pop(node, None)
    derived.keep(graph, _ORDER, order, _DEPENDS_ON)


def place_new(graph: nx.DiGraph, order: dict[Any, float], nodes: list[Any]) -> None:
    """Give new tasks a number between their parents and children where there is room, else after their parents
    (the edges that then point backwards are repaired by :func:`find_back_edge_cycle`)."""
    pred, succ = predecessors_of(graph), successors_of(graph)
    for node in nodes:
        before = [order[u] for u in pred[node] if u in order]
        after = [order[v] for v in succ[node] if v in order]
        low = max(before) if before else (min(after) - 1.0 if after else max(order.values(), default=0.0) + 1.0)
        high = min(after) if after else low + 1.0
        mid = (low + high) / 2 if high > low else low + 0.5
        order[node] = mid if low < mid < high or not after else low + 0.5


@dataclass
class Work:
    """The tasks an edit's order repair went over (:func:`find_back_edge_cycle`): what the edit cost beyond its
    fixed part, for a script's work budget (an insert usually moves none; one that floats between two tasks already
    split 50 times moves its whole stretch)."""

    tasks: int = 0


def find_back_edge_cycle(
    graph: nx.DiGraph, order: dict[Any, float], edges: Iterable[tuple[Any, Any]], work: Work | None = None
) -> bool:
    """Repair ``order`` for newly added ``edges``; True if one of them closes a cycle (``order`` is then invalid:
    call :func:`forget` after rolling the edit back). ``work`` counts the tasks gone over."""
    succ, pred = successors_of(graph), predecessors_of(graph)
    for u, v in edges:
        if order[u] < order[v]:
            continue
        low, high = order[v], order[u]
        # what v reaches without passing u's number: u among them means a cycle
        forward, seen, stack = [], {v}, [v]
        while stack:
            w = stack.pop()
            forward.append(w)
            for x in succ[w]:
                if x == u:
                    if work is not None:
                        work.tasks += len(forward)
                    return True
                if x not in seen and order[x] <= high:
                    seen.add(x)
                    stack.append(x)
        # what reaches u above v's number
        backward, seen_b, stack = [], {u}, [u]
        while stack:
            w = stack.pop()
            backward.append(w)
            for x in pred[w]:
                if x not in seen_b and order[x] >= low:
                    seen_b.add(x)
                    stack.append(x)
        # the same numbers, given to the ancestors of u first and then to the descendants of v
        if work is not None:
            work.tasks += len(forward) + len(backward)
        backward.sort(key=order.__getitem__)
        forward.sort(key=order.__getitem__)
        pool = sorted(order[n] for n in (*backward, *forward))
        for node, value in zip((*backward, *forward), pool):
            order[node] = value
    return False
