"""The builder's working data: the tasks found in a trace, as parallel columns, with the dependencies found on each.

Plain data that the builder's stages fill and read in turn (:mod:`~daydream.graph.build.cpu`,
:mod:`~daydream.graph.build.gpu`, :mod:`~daydream.graph.build.edges`, :mod:`~daydream.graph.build.delays`);
:func:`daydream.graph.build.build_graph` runs them and cuts the graph of the selected steps from the result.
Columns rather than a graph: most of the build is sweeps over every task, and lists indexed by task number are what
those sweeps read fastest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain, repeat
from typing import Any

import msgspec
import numpy as np

from daydream.graph.schema import EDGE_KIND_NUMBER, task_dicts


class InEdge(msgspec.Struct, gc=False):
    """A dependency held aside (``TaskTable.fallback_edges``): the parent task, the edge kind (schema.EDGE_KINDS) and
    the delay."""

    parent: int
    kind: str
    lag: float = 0.0


@dataclass(slots=True)
class Dependencies:
    """The dependencies found, task by task: task ``v``'s are ``ptr[v]:ptr[v + 1]``, in the order they were found.
    Each one's parent task, kind (its number in schema.EDGE_KINDS), ``lag`` (set by
    :func:`~daydream.graph.build.delays.measure_delays`; the order kinds keep 0, their delay being the parent's
    ``gap``) and whether it ``holds`` (measure_delays drops a wait the trace contradicts). Arrays, so that the stages
    that read every dependency (the delays, the cut) read them a column at a time: a 1M-event trace finds 420k."""

    ptr: np.ndarray
    parent: np.ndarray
    kind: np.ndarray
    lag: np.ndarray
    holds: np.ndarray

    @classmethod
    def of(cls, tasks: int, parent: list[int], child: list[int], kind: list[int]) -> Dependencies:
        """The dependencies of ``tasks`` tasks given edge by edge (``child[i]`` on ``parent[i]``), each task's in the
        order given."""
        ptr, order = _by_child(tasks, np.asarray(child, np.int64))
        m = len(order)
        return cls(ptr, np.asarray(parent, np.int64)[order], np.asarray(kind, np.int8)[order], np.zeros(m), np.ones(m, np.bool_))

    def child(self) -> np.ndarray:
        """Each dependency's child."""
        return np.repeat(np.arange(len(self.ptr) - 1, dtype=np.int64), np.diff(self.ptr))

    def with_added(self, child: list[int], parent: list[int], kind: list[int]) -> tuple[Dependencies, np.ndarray]:
        """These dependencies and the ones given, each after its child's others; and where each one now is (these
        first, then those given)."""
        ptr, order = _by_child(len(self.ptr) - 1, np.concatenate([self.child(), np.asarray(child, np.int64)]))
        place = np.empty(len(order), np.int64)
        place[order] = np.arange(len(order))
        added = Dependencies(
            ptr,
            np.concatenate([self.parent, np.asarray(parent, np.int64)])[order],
            np.concatenate([self.kind, np.asarray(kind, np.int8)])[order],
            np.concatenate([self.lag, np.zeros(len(child))])[order],
            np.concatenate([self.holds, np.ones(len(child), np.bool_)])[order],
        )
        return added, place

    def held(self, v: int) -> list[int]:
        """Task ``v``'s dependencies that hold, in order (their numbers in these arrays)."""
        return [e for e in range(int(self.ptr[v]), int(self.ptr[v + 1])) if self.holds[e]]


def _by_child(tasks: int, child: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Edges with these children grouped by child: each child's first edge (``ptr``), and the edges' order (a stable
    sort: each child's edges in the order given)."""
    ptr = np.zeros(tasks + 1, np.int64)
    np.cumsum(np.bincount(child, minlength=tasks), out=ptr[1:])
    return ptr, np.argsort(child, kind="stable")


@dataclass(slots=True)
class TaskTable:
    """Tasks numbered in order of discovery (CPU tasks, GPU tasks, then those later stages add), as parallel columns.

    A task's attributes (what the graph's task dict will hold) are columns too: ``columns[key][task]`` (None where the
    task has no such key, as ``dict.get`` reads it), and the keys it has, in the order its dict holds them, are
    ``orders[order_codes[task]]``: the tasks share a few orders of keys, numbered, so that a stage that gives every
    task a key changes those few, not a tuple per task. No dict is made per task while the stages run: the graph
    gets the selected tasks' columns, and makes their dicts when they are first read
    (:class:`~daydream.graph.adjacency.TaskColumns`)."""

    _columns: dict[str, list[Any]] = field(default_factory=dict)
    _orders: list[tuple[str, ...]] = field(default_factory=list)  # the orders of keys met, numbered
    _order_number: dict[tuple[str, ...], int] = field(default_factory=dict)
    _codes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))  # each task's order of keys
    _added: list[dict[str, Any]] = field(default_factory=list)  # tasks added one at a time, not yet columns
    ts: list[float] = field(default_factory=list)  # traced start
    end: list[float] = field(default_factory=list)  # traced end (of a blocking call's issue: where its wait begins)
    launch_ts: list[float] = field(default_factory=list)  # when the work was issued: a GPU task's launch call's start
    # the runtime call that launched the task (its ``launch`` edge's parent; -1: none): what a GPU task takes its
    # step and phase from, read without a walk over its dependencies
    launcher: list[int] = field(default_factory=list)
    # the dependencies found, in the order found: ``edge_child[i]`` waits on ``edge_parent[i]``, its kind
    # ``edge_kind[i]`` (schema.EDGE_KIND_NUMBER); measure_delays makes them ``dependencies``
    edge_parent: list[int] = field(default_factory=list)
    edge_child: list[int] = field(default_factory=list)
    edge_kind: list[int] = field(default_factory=list)
    # per task, a dependency that holds it only where the window cut all its others (see build._cut)
    fallback_edges: dict[int, InEdge] = field(default_factory=dict)
    dependencies: Dependencies | None = None  # the dependencies by task, with their delays (measure_delays on)
    # each task's gap (schema.Task), measured (measure_delays on): the cut writes it into the window's tasks
    gap: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self._codes) + len(self._added)

    @property
    def columns(self) -> dict[str, list[Any]]:
        """The tasks' attributes, by key (not to be replaced; the lists' values a stage may set, see :meth:`column`)."""
        self._take_added()
        return self._columns

    @property
    def orders(self) -> list[tuple[str, ...]]:
        """The orders of keys the tasks have, numbered (:attr:`order_codes`); not to be written."""
        self._take_added()
        return self._orders

    @property
    def order_codes(self) -> np.ndarray:
        """Each task's order of keys: its number in :attr:`orders`; not to be written."""
        self._take_added()
        return self._codes

    def column(self, key: str) -> list[Any]:
        """Each task's value of ``key`` (None where it has none): the table's own list, whose values a stage may set
        for tasks that have the key (:meth:`set_all` gives every task a key)."""
        found = self.columns.get(key)
        if found is None:
            found = self._columns[key] = [None] * len(self._codes)
        return found

    def add_task(self, attrs: dict[str, Any], ts: float, dur: float) -> int:
        """A new task with these attributes (in their order), issued when it starts; returns its number. (Its
        attributes join the columns, with those of the tasks added after it, when the columns are next read: a
        task at a time, by C-level passes.)"""
        task = len(self)
        self._added.append(attrs)
        self.ts.append(ts)
        self.end.append(ts + dur)
        self.launch_ts.append(ts)
        self.launcher.append(-1)
        return task

    def _number(self, orders: list[tuple[str, ...]]) -> np.ndarray:
        """The numbers of these orders of keys (those not met yet numbered next)."""
        number = self._order_number
        for order in orders:
            if order not in number:
                number[order] = len(self._orders)
                self._orders.append(order)
        return np.fromiter(map(number.__getitem__, orders), np.int32, len(orders))

    def _take_added(self) -> None:
        added = self._added
        if not added:
            return
        columns, n = self._columns, len(self._codes)
        for key in dict.fromkeys(chain.from_iterable(added)).keys() - columns.keys():
            columns[key] = [None] * n
        for key, column in columns.items():
            column += map(dict.get, added, repeat(key))
        self._codes = np.concatenate([self._codes, self._number(list(map(tuple, added)))])
        added.clear()

    def add_tasks(self, orders: list[tuple[str, ...]], codes: np.ndarray, values: dict[str, list[Any]], ts: list[float],
                  end: list[float]) -> None:
        """New tasks, issued when they start: each one's keys in order (``orders[codes[i]]``), and per key a value for
        each task (None where the task lacks it)."""
        self._take_added()
        m, n, columns = len(codes), len(self._codes), self._columns
        for key, column in columns.items():
            column += values[key] if key in values else [None] * m
        for key in values.keys() - columns.keys():
            columns[key] = [None] * n + values[key]
        self._codes = np.concatenate([self._codes, self._number(orders)[np.asarray(codes, np.int64)]])
        self.ts += ts
        self.end += end
        self.launch_ts += ts
        self.launcher += [-1] * m

    def set_all(self, key: str, values: list[Any]) -> None:
        """Every task's ``key`` (a key a task lacks comes after those it has)."""
        self._take_added()
        assert len(values) == len(self._codes)
        self._columns[key] = values
        self._orders = [k if key in k else (*k, key) for k in self._orders]  # the tasks' numbers unchanged
        self._order_number = {}
        for number, order in enumerate(self._orders):
            self._order_number.setdefault(order, number)

    def attrs_of(self, tasks: list[int]) -> list[dict[str, Any]]:
        """The attribute dicts of ``tasks`` (:func:`~daydream.graph.schema.task_dicts`)."""
        return task_dicts(self.columns, self.orders, self.order_codes, tasks)

    def add_edge(self, u: int, v: int, kind: str) -> None:
        """``v`` depends on ``u``."""
        self.edge_parent.append(u)
        self.edge_child.append(v)
        self.edge_kind.append(EDGE_KIND_NUMBER[kind])
