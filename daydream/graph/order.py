"""A topological order kept up to date as edits add tasks and edges, so that refusing a cycle costs what the edit
touches, not a search of the whole graph (Pearce and Kelly, "A dynamic topological sort algorithm for directed
acyclic graphs", JEA 2006).

The order is a number per task, cached on the graph with the graph's identity and task count (networkx counts
edges in time proportional to the graph, too slow to check per edit): a task added or removed without this module
makes the order stale and it is computed afresh on next use; ``add_dependency`` drops it. An edge added behind
the module's back can at worst hide a cycle from the check (a stale order never invents one), and the simulator
reports every cycle anyway; this is what lets an edit be refused and rolled back where it happens.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import networkx as nx

_KEY = "_topological_order"


def _counts(graph: nx.DiGraph) -> int:
    return len(graph._node)


def topological_order(graph: nx.DiGraph) -> dict[Any, float] | None:
    """The cached order (task -> number, parents before children), computed if missing or stale; None if the
    graph already has a cycle."""
    cached = graph.graph.get(_KEY)
    if cached is not None and cached[0] == id(graph) and cached[1] == _counts(graph):
        return cached[2]
    try:
        order = {node: float(i) for i, node in enumerate(nx.topological_sort(graph))}
    except nx.NetworkXUnfeasible:
        graph.graph.pop(_KEY, None)
        return None
    graph.graph[_KEY] = [id(graph), _counts(graph), order]
    return order


def forget(graph: nx.DiGraph) -> None:
    """Drop the cached order (after an edit was rolled back)."""
    graph.graph.pop(_KEY, None)


def edited(graph: nx.DiGraph, order: dict[Any, float], removed: Iterable[Any] = ()) -> None:
    """Record that ``order`` is valid for the graph as it is now (after removals that kept it valid)."""
    for node in removed:
        order.pop(node, None)
    graph.graph[_KEY] = [id(graph), _counts(graph), order]


def place_new(graph: nx.DiGraph, order: dict[Any, float], nodes: list[Any]) -> None:
    """Give new tasks a number between their parents and children where there is room, else after their parents
    (the edges that then point backwards are repaired by :func:`find_back_edge_cycle`)."""
    for node in nodes:
        before = [order[u] for u in graph._pred[node] if u in order]
        after = [order[v] for v in graph._succ[node] if v in order]
        low = max(before) if before else (min(after) - 1.0 if after else max(order.values(), default=0.0) + 1.0)
        high = min(after) if after else low + 1.0
        mid = (low + high) / 2 if high > low else low + 0.5
        order[node] = mid if low < mid < high or not after else low + 0.5


def find_back_edge_cycle(graph: nx.DiGraph, order: dict[Any, float], edges: Iterable[tuple[Any, Any]]) -> bool:
    """Repair ``order`` for newly added ``edges``; True if one of them closes a cycle (``order`` is then invalid:
    call :func:`forget` after rolling the edit back)."""
    succ, pred = graph._succ, graph._pred
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
        backward.sort(key=order.__getitem__)
        forward.sort(key=order.__getitem__)
        pool = sorted(order[n] for n in (*backward, *forward))
        for node, value in zip((*backward, *forward), pool):
            order[node] = value
    return False
