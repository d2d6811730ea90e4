"""What is computed from a graph and kept for reuse (a topological order, the tasks of each thread, the typical
launch-call cost, ...), held beside the graph in one :class:`DerivedIndexes` object per graph.

Each value remembers the change counters of the aspects of the graph it was computed from; it is stale once one of
them moved. The edit functions (:mod:`daydream.graph.edit`) bump the counters through :func:`changed`; for a value
that depends on the tasks, the task count also catches tasks added or removed behind their back (through the
networkx API). Edges added that way go unnoticed: an edit that adds edges says so.
An index an edit keeps up to date itself (the topological order, the thread members) is stored again after the edit.

The object lives in a weak mapping keyed by the graph, not in ``graph.graph``: a copy of the graph (``copy_graph``,
``DiGraph.copy``, a pickle) starts with none, so it never reads a value computed on the original, and
``graph.graph`` holds only what the builder wrote.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from itertools import islice
from typing import Any

import networkx as nx

from daydream.graph.adjacency import attrs_of

# The aspects of a graph an index can depend on, each with its change counter.
TASKS = "tasks"  # tasks added or removed
EDGES = "edges"  # dependencies added or removed
DURATIONS = "durations"  # task durations changed
ATTRIBUTES = "attributes"  # other task attributes changed (set)
ASPECTS = (TASKS, EDGES, DURATIONS, ATTRIBUTES)
# Finer aspects, changed besides those above: a value that follows only them is made again less often.
HOST_DURATIONS = "host durations"  # durations of tasks not on a GPU changed (besides DURATIONS)
LAUNCH_EDGES = "launch edges"  # a launch dependency added between tasks already there (besides EDGES)


def attribute(name: str) -> str:
    """The aspect of one task attribute, changed (besides ATTRIBUTES or DURATIONS) when a ``set`` changes it: a value
    computed from that attribute alone need not follow the others."""
    return f"attribute:{name}"


class DerivedIndexes:
    """The derived values of one graph, each stored with the stamp (the change counters of the aspects it depends on)
    it was computed at."""

    __slots__ = ("counters", "values")

    def __init__(self) -> None:
        self.counters: dict[str, int] = dict.fromkeys(ASPECTS, 0)
        self.values: dict[str, tuple[tuple[int, ...], Any]] = {}

    def stamp(self, graph: nx.DiGraph, depends_on: Iterable[str]) -> tuple[int, ...]:
        """The change counters of ``depends_on``, with the task count where the value depends on the tasks."""
        counters = self.counters
        out = tuple(counters.get(a, 0) for a in depends_on)
        return (*out, len(graph)) if TASKS in depends_on else out


_INDEXES: weakref.WeakKeyDictionary[nx.DiGraph, DerivedIndexes] = weakref.WeakKeyDictionary()


def indexes(graph: nx.DiGraph) -> DerivedIndexes:
    """The graph's derived indexes (created empty on first use)."""
    found = _INDEXES.get(graph)
    if found is None:
        found = _INDEXES[graph] = DerivedIndexes()
    return found


def cached(graph: nx.DiGraph, name: str, depends_on: Iterable[str]) -> Any:
    """The value kept under ``name`` if nothing it depends on changed since, else None."""
    idx = indexes(graph)
    entry = idx.values.get(name)
    if entry is None or entry[0] != idx.stamp(graph, depends_on):
        return None
    return entry[1]


def keep(graph: nx.DiGraph, name: str, value: Any, depends_on: Iterable[str]) -> Any:
    """Keep ``value`` under ``name``, valid for the graph as it is now; returns it."""
    idx = indexes(graph)
    idx.values[name] = (idx.stamp(graph, depends_on), value)
    return value


def drop(graph: nx.DiGraph, name: str) -> None:
    """Forget the value kept under ``name``."""
    idx = _INDEXES.get(graph)
    if idx is not None:
        idx.values.pop(name, None)


def changed(graph: nx.DiGraph, *aspects: str) -> None:
    """Record that ``aspects`` of the graph changed: every value that depends on one of them is stale."""
    idx = _INDEXES.get(graph)
    if idx is not None:  # nothing kept yet: nothing to invalidate
        counters = idx.counters
        for a in aspects:
            counters[a] = counters.get(a, 0) + 1


def added_since(graph: nx.DiGraph, count: int, last: Any) -> list[Any] | None:
    """The tasks added, in graph order, since the graph held ``count`` tasks, ``last`` the last of them; None where a
    task was removed since. Inserts append to the graph's order, so the task before the new ones must be ``last``:
    how an index that grows with inserts (rather than being made again) knows it may."""
    nodes = attrs_of(graph)
    n = len(nodes)
    if n < count:
        return None
    if not count:
        return list(nodes)
    newest = list(islice(reversed(nodes), n - count + 1))  # the new tasks, last first, and the one before
    return newest[-2::-1] if newest[-1] == last else None
