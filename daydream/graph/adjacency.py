"""The task graph's adjacency as networkx stores it: the one module that reaches into a ``DiGraph``'s internals.

Hot loops (the builder, the simulator, selections, edits, copying a graph per what-if) read and fill the dicts behind
``graph.nodes`` / ``graph.succ`` / ``graph.pred`` directly: the public views build a view object per access and
``add_nodes_from`` / ``add_edges_from`` copy every attribute dict, which is a third of the build time on a
300k-task graph; ``copy_graph`` here is 1.8x faster than ``DiGraph.copy``. The dicts returned are networkx's own:
reading them and changing the attribute dicts in them is the contract; adding or removing tasks and edges goes
through :func:`fill`, :func:`copy_graph` or the networkx API, which keep the three dicts consistent.

A built graph (:class:`TaskGraph`) holds its tasks' attributes as columns (:class:`TaskColumns`) and its dependencies
as arrays (:class:`EdgeArrays`) until something reads them as dicts: a replay simulates and reports from the columns
and arrays (:func:`task_columns`, :func:`edge_arrays`), and the dicts, a dict per task and per dependency (a third of a
large trace's run), are made only for a script, the REPL or any other reader of the graph's tasks or adjacency.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import chain, repeat
from operator import is_not, itemgetter
from typing import Any

import networkx as nx
import numpy as np

from daydream._gc import paused_gc
from daydream.graph.schema import EDGE_KIND_NUMBER, EDGE_KINDS, Edge, Task, new_edge_attrs, task_dicts


def attrs_of(graph: nx.DiGraph) -> dict[Any, Task]:
    """Task -> its attribute dict (``graph.nodes[task]`` without the view)."""
    return graph._node


def successors_of(graph: nx.DiGraph) -> dict[Any, dict[Any, Edge]]:
    """Task -> {child: edge attribute dict}, children in the order their edges were added."""
    return graph._succ


def predecessors_of(graph: nx.DiGraph) -> dict[Any, dict[Any, Edge]]:
    """Task -> {parent: edge attribute dict} (the same dicts as :func:`successors_of`), in the order added."""
    return graph._pred


def fill(graph: nx.DiGraph, tasks: Iterable[Any], attrs: Iterable[Task], parents: Iterable[dict[Any, Edge]]) -> None:
    """Add ``tasks`` to a graph that has none, with their ``attrs`` and their ``parents`` (parallel to ``tasks``; each
    a dict parent -> edge attributes, naming tasks of ``tasks``). The dicts given become the graph's (no copies); a
    task's children are in the order of the tasks, then of their parents."""
    nodes, succ, pred = graph._node, graph._succ, graph._pred
    for node, a, p in zip(tasks, attrs, parents):
        nodes[node] = a
        succ[node] = {}
        pred[node] = p
    for node, parents in pred.items():
        for u, edge in parents.items():
            succ[u][node] = edge


def copy_graph(graph: nx.DiGraph) -> nx.DiGraph:
    """A copy whose task and edge attribute dicts are new (so changes stay in the copy); values are shared, and the
    dicts and lists of ``graph.graph`` are copied one level deep. A graph that holds its tasks as columns or its
    dependencies as arrays (:class:`TaskGraph`) gives a copy that holds them too (never written: shared), whose
    dicts, once read, are those a copy of the dicts would hold."""
    built, tasks = edge_arrays(graph), task_columns(graph)
    g = TaskGraph() if built is not None or tasks is not None else nx.DiGraph()
    g.graph.update(
        {k: (dict(v) if isinstance(v, dict) else list(v) if isinstance(v, list) else v) for k, v in graph.graph.items()}
    )
    if tasks is not None:  # (the columns are never written: shared, their dicts made for each graph when read)
        g.__dict__["_task_columns"] = tasks
    else:  # .copy(), not dict(): it copies a key-sharing dict (graph.schema.new_task_attrs) as one, 3.5x faster
        g._node.update((n, a.copy()) for n, a in graph._node.items())
    if built is not None:
        g.__dict__["_edge_arrays"] = built.parents_in_order()
        return g
    succ, pred = g._succ, g._pred
    for n in range(len(tasks)) if tasks is not None else graph._node:
        succ[n] = {}
        pred[n] = {}
    for u, nbrs in graph._succ.items():
        su = succ[u]
        for v, e in nbrs.items():
            d = e.copy()
            su[v] = d
            pred[v][u] = d
    return g


@dataclass(frozen=True, slots=True)
class EdgeArrays:
    """A graph's dependencies as arrays, child by child: task ``i``'s parents are ``parent[ptr[i]:ptr[i + 1]]``, in
    the order of its ``pred`` dict; each edge's kind (its number in schema.EDGE_KINDS) and ``lag`` (where
    ``has_lag``; the edge dict holds no ``lag`` otherwise). The tasks are numbered 0..n-1."""

    ptr: np.ndarray
    parent: np.ndarray
    kind: np.ndarray
    lag: np.ndarray
    has_lag: np.ndarray

    @classmethod
    def of_parents(cls, parents: list[dict[int, tuple[str, float | None]]]) -> EdgeArrays:
        """The edges of ``parents`` (per task 0..n-1, each parent's edge kind and lag, None: no lag), in their order."""
        ptr = np.zeros(len(parents) + 1, np.int64)
        np.cumsum(np.fromiter(map(len, parents), np.int64, len(parents)), out=ptr[1:])
        n = int(ptr[-1])
        parent = np.fromiter(chain.from_iterable(parents), np.int64, n)
        values = list(chain.from_iterable(map(dict.values, parents)))
        kind = np.fromiter(map(EDGE_KIND_NUMBER.__getitem__, map(itemgetter(0), values)), np.int8, n)
        lags = list(map(itemgetter(1), values))
        del values
        has_lag = np.fromiter(map(is_not, lags, repeat(None)), np.bool_, n)
        lag = np.fromiter((0.0 if x is None else x for x in lags), np.float64, n)
        return cls(ptr, parent, kind, lag, has_lag)

    def of_kind(self, kinds: Iterable[str]) -> np.ndarray:
        """Whether each edge is of one of ``kinds``."""
        return np.isin(self.kind, [EDGE_KIND_NUMBER[k] for k in kinds])

    def child(self) -> np.ndarray:
        """Each edge's child."""
        return np.repeat(np.arange(len(self.ptr) - 1, dtype=np.int64), np.diff(self.ptr))

    def parents_in_order(self) -> EdgeArrays:
        """The same edges, each task's parents in the order of the tasks: the order of a copy's ``pred`` dicts
        (:func:`copy_graph` adds each edge to them as it walks the ``succ`` dicts, task by task)."""
        order = np.lexsort((self.parent, self.child()))
        return EdgeArrays(self.ptr, self.parent[order], self.kind[order], self.lag[order], self.has_lag[order])


@dataclass(frozen=True, slots=True)
class TaskColumns:
    """A graph's tasks' attributes as columns: task ``i``'s value of ``key`` is ``own[key][i]``, or else
    ``columns[key][index[i]]`` (the builder's columns, of which the graph holds the tasks ``index``: each read
    column is gathered once, on its first read), None where it has none, as ``dict.get`` reads it;
    ``orders[codes[i]]`` the keys it has, in its dict's order. The tasks are numbered 0..n-1. Never written: copies
    share them."""

    own: dict[str, list[Any]]
    columns: dict[str, list[Any]]
    index: list[int]
    codes: np.ndarray  # each task's order of keys, a number in ``orders``
    orders: list[tuple[str, ...]]  # the orders of keys (a few; some perhaps no task's)
    gathered: dict[str, list[Any]] = field(default_factory=dict, compare=False)

    def __len__(self) -> int:
        return len(self.codes)

    def column(self, key: str) -> list[Any] | None:
        """Each task's value of ``key`` (None where it has none), or None where no task has it: not to be written."""
        found = self.own.get(key)
        if found is None:
            found = self.gathered.get(key)
        if found is None and key in self.columns:
            found = self.gathered[key] = list(map(self.columns[key].__getitem__, self.index))
        return found

    def values(self, key: str, default: Any = None, tasks: list[int] | None = None) -> list[Any]:
        """Each task's value of ``key`` (of ``tasks``, in that order, where given), ``default`` where it has none (as
        ``dict.get`` reads it): the column itself where it is every task's and every task has the key or the default
        is None (not to be written). Given tasks are read from a column not gathered yet without gathering it."""
        if tasks is None:
            found = self.column(key)
        elif (whole := self.own.get(key, self.gathered.get(key))) is not None:
            found = list(map(whole.__getitem__, tasks))
        elif key in self.columns:  # (not gathered: read through the index)
            found = list(map(self.columns[key].__getitem__, map(self.index.__getitem__, tasks)))
        else:
            found = None
        if found is None:
            return [default] * (len(self.codes) if tasks is None else len(tasks))
        has = np.array([key in k for k in self.orders], np.bool_)
        if default is None or has.all():
            return found
        lacks = ~has[self.codes if tasks is None else self.codes[tasks]]
        if not lacks.any():
            return found
        values = list(found)
        for i in np.flatnonzero(lacks).tolist():
            values[i] = default
        return values

    def dicts(self) -> list[Task]:
        """Every task's attribute dict, as the builder would have made it."""
        columns = {key: self.column(key) for key in {*self.own, *self.columns}}
        return task_dicts(columns, self.orders, self.codes, range(len(self.codes)))  # type: ignore[arg-type,return-value]


def _descriptor_of(name: str) -> Any:
    """networkx's own descriptor for ``DiGraph.<name>`` (it sets the dict and resets the views cached on it), or None
    where networkx keeps it as a plain attribute."""
    return next((c.__dict__[name] for c in nx.DiGraph.__mro__ if name in c.__dict__), None)


class _MadeWhenRead:
    """A ``TaskGraph``'s dict ``name`` (``_node``, or the adjacency's ``_adj``, ``_succ``, ``_pred``), made from what
    the graph holds as arrays (``pending``: its task columns, its edge arrays) the first time it is read or set; set,
    it is networkx's own."""

    def __init__(self, name: str, pending: str, make: Any) -> None:
        self.name, self.pending, self.make = name, pending, make
        self.networkx = _descriptor_of(name)

    def __get__(self, graph: Any, owner: Any = None) -> Any:
        if graph is None:
            return self
        if self.pending in graph.__dict__:
            self.make(graph)
        return graph.__dict__[self.name]

    def __set__(self, graph: Any, value: Any) -> None:
        if self.pending in graph.__dict__:
            self.make(graph)
        if self.networkx is not None:
            self.networkx.__set__(graph, value)
        else:
            graph.__dict__[self.name] = value


class TaskGraph(nx.DiGraph):  # type: ignore[type-arg]
    """A ``networkx.DiGraph`` in every way, whose tasks' attributes may be held as :class:`TaskColumns` and its
    dependencies as :class:`EdgeArrays` (:func:`fill_arrays`) until the first read of its tasks (their dicts made from
    the columns) or of its adjacency (the dicts :func:`fill` makes, made from the arrays). ``copy_graph`` and a pickle
    keep them; ``DiGraph.copy`` reads the dicts. (The attributes networkx keeps the tasks and the adjacency in are
    replaced by descriptors that make them when first read: checked on networkx 3.0 and 3.6.)"""

    _node = _MadeWhenRead("_node", "_task_columns", lambda graph: _make_nodes(graph))
    _adj = _MadeWhenRead("_adj", "_edge_arrays", lambda graph: _make_edges(graph))
    _succ = _MadeWhenRead("_succ", "_edge_arrays", lambda graph: _make_edges(graph))
    _pred = _MadeWhenRead("_pred", "_edge_arrays", lambda graph: _make_edges(graph))

    def __len__(self) -> int:
        tasks = task_columns(self)
        return len(tasks) if tasks is not None else len(self._node)

    def number_of_nodes(self) -> int:
        return len(self)

    def __repr__(self) -> str:
        """One line, whatever the graph's size (networkx's would name every task): its tasks, dependencies, trace and
        steps, read without making the dicts a graph held as arrays has not made yet."""
        arrays = edge_arrays(self)
        edges = len(arrays.parent) if arrays is not None else self.number_of_edges()
        steps = [getattr(s, "name", s) for s in self.graph.get("steps") or ()]
        shown = ", ".join(map(str, steps[:3])) + (f" and {len(steps) - 3:,} more" if len(steps) > 3 else "")
        trace = self.graph.get("trace")
        return (
            f"TaskGraph({len(self):,} tasks, {edges:,} dependencies"
            + (f", trace {str(trace)[-80:]!r}" if trace else "")
            + (f", steps {shown}" if steps else "")
            + ")"
        )

    __str__ = __repr__  # (networkx's str counts the nodes and edges: the repr says more)


def fill_arrays(graph: TaskGraph, tasks: TaskColumns, edges: EdgeArrays) -> None:
    """Give a ``TaskGraph`` with no tasks the tasks 0..n-1, their attributes ``tasks`` and their dependencies
    ``edges``, kept as columns and arrays until read (:func:`task_columns`, :func:`edge_arrays`)."""
    assert not graph._node
    graph.__dict__["_task_columns"] = tasks
    graph.__dict__["_edge_arrays"] = edges


def task_columns(graph: nx.DiGraph) -> TaskColumns | None:
    """The tasks' attributes of a graph that holds them as columns still (none of its tasks read), else None: a
    reader that can take the columns reads them without making the dicts."""
    return graph.__dict__.get("_task_columns")


def task_ids(graph: nx.DiGraph) -> list[Any]:
    """The graph's tasks in order, without making their dicts where it holds them as columns (its tasks 0..n-1)."""
    tasks = task_columns(graph)
    return list(range(len(tasks))) if tasks is not None else list(graph._node)


def edge_arrays(graph: nx.DiGraph) -> EdgeArrays | None:
    """The dependencies of a graph that holds them as arrays still (none of its adjacency read), else None: a reader
    that can take the arrays reads them without making the dicts."""
    return graph.__dict__.get("_edge_arrays")


@paused_gc()
def _make_nodes(graph: TaskGraph) -> None:
    """The task dicts of ``graph`` made from its task columns, which it then stops holding."""
    tasks: TaskColumns = graph.__dict__.pop("_task_columns")
    nodes = graph.__dict__["_node"]  # (networkx's empty dict: the graph had no tasks as dicts)
    nodes.update(zip(range(len(tasks)), tasks.dicts()))


@paused_gc()
def _make_edges(graph: TaskGraph) -> None:
    """The adjacency dicts of ``graph`` made from its edge arrays, which it then stops holding: the dicts
    :func:`fill` makes."""
    edges: EdgeArrays = graph.__dict__.pop("_edge_arrays")
    lags = [lag if has else None for lag, has in zip(edges.lag.tolist(), edges.has_lag.tolist())]
    attrs = list(map(new_edge_attrs, map(EDGE_KINDS.__getitem__, edges.kind.tolist()), lags))
    del lags
    succ, pred = graph._succ, graph._pred  # (networkx's empty dicts: the graph had no edges as dicts)
    for node in range(len(edges.ptr) - 1):  # a built graph's tasks: 0..n-1, its task dicts made or not
        succ[node] = {}
        pred[node] = {}
    # edge by edge in the arrays' order, child by child: each task's children in the order of the tasks, as fill()
    for v, u, edge in zip(edges.child().tolist(), edges.parent.tolist(), attrs):
        pred[v][u] = edge
        succ[u][v] = edge
