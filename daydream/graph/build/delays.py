"""Builder stage 4: each dependency's delay, measured so that simulating the unmodified graph reproduces the trace
(docs/graph.md, "Delays").

For each task the dependency that released it (the parent that ended last) keeps the delay it had in the trace, and
every other dependency gets its mechanism's typical delay (median over the trace), never more than it had. When a
transform changes the work, the typical delays take over. A CPU call that waited keeps as its duration only the part
after the wait: the waiting is the edge.
"""

from __future__ import annotations

import bisect
from typing import Any

import numpy as np

from daydream._arrays import unique_ints
from daydream.graph.build.edges import BackwardWait, LoaderWait
from daydream.graph.build.table import Dependencies, TaskTable
from daydream.graph.schema import CPU_KINDS, EDGE_KIND_NUMBER, EDGE_KINDS

# Defaults where a trace has no sample of a mechanism (typical of CUDA 11/12 on current GPUs).
DEFAULT_LAUNCH_LATENCY_US = 2.0
DEFAULT_STREAM_GAP_US = 1.0
# A GPU task that starts this long after everything known to hold it back waited on another stream.
UNEXPLAINED_DELAY_US = 5.0
CROSS_STREAM_WINDOW_US = 10.0


def typical_delays(
    table: TaskTable, deps: Dependencies, child: np.ndarray, ts: np.ndarray, end: np.ndarray
) -> tuple[float, float]:
    """Median launch latency (idle stream) and median inter-kernel gap (queued work), measured (``child``: each
    dependency's; ``ts``, ``end``: the table's, as arrays)."""
    launcher = np.asarray(table.launcher, np.int64)
    # each task's last stream dependency's parent (-1: none), as a dict by kind would keep it
    stream = np.flatnonzero(deps.kind == EDGE_KIND_NUMBER["stream"])
    last = stream[_last_index(child[stream])]
    pred = np.full(len(launcher), -1, np.int64)
    pred[child[last]] = deps.parent[last]
    v = np.flatnonzero(launcher >= 0)
    call, before = launcher[v], pred[v]
    idle = (before < 0) | (end[before] < ts[call])  # (end[-1] is read where there is none, and not used)
    queued = ~idle & (end[call] < end[before])
    launch = ts[v[idle]] - end[call[idle]]
    gap = ts[v[queued]] - end[before[queued]]
    # (np.median: statistics.median's value, the middle one or the mean of the middle two, without a list's sort)
    l0 = float(np.median(launch)) if len(launch) else DEFAULT_LAUNCH_LATENCY_US
    g0 = max(0.0, float(np.median(gap))) if len(gap) else DEFAULT_STREAM_GAP_US
    return l0, g0


def _last_index(keys: np.ndarray) -> np.ndarray:
    """Where each distinct value of ``keys`` last occurs."""
    _, first_from_end = unique_ints(keys[::-1], return_index=True)
    return len(keys) - 1 - first_from_end


class _StreamEnds:
    """Per GPU stream, its tasks' ends in order, and per device its streams: where a cross-stream wait is sought."""

    __slots__ = ("ends", "pairs", "streams_of_device")

    def __init__(self, table: TaskTable, threads: dict[str, list[int]]) -> None:
        end = table.end
        self.streams_of_device: dict[Any, list[str]] = {}
        for t in threads:
            if t.startswith("gpu:"):
                self.streams_of_device.setdefault(t.split("/")[0], []).append(t)
        self.pairs = {t: sorted((end[x], x) for x in tasks) for t, tasks in threads.items() if t.startswith("gpu:")}
        self.ends = {t: [e for e, _ in pairs] for t, pairs in self.pairs.items()}


def measure_delays(table: TaskTable, threads: dict[str, list[int]], infer_waits: bool) -> tuple[float, float]:
    """Set every task's ``gap`` and every edge's ``lag`` (and, where ``infer_waits``, add the cross-stream waits the
    trace does not record); returns the typical launch latency and stream gap. The table's dependencies become
    ``table.dependencies``, its gaps ``table.gap``.

    Over arrays, each task's dependencies in their order, as a loop over the tasks would go: for a CPU task, a call
    that waited (sync parents that ended inside it) keeps the part after the wait as its duration and starts with no
    delay after what it waited for, and the thread's gap before it is what the trace shows; for a GPU task, the
    dependency that released it (the first of those that left the least slack) keeps its slack, the others the
    typical delay of their mechanism where less. A gap set twice keeps the value the later dependency gave."""
    n = len(table)
    table.set_all("gap", [0.0] * n)  # each task's keys, in the order a task's dict gets them (the cut writes the
    table.set_all("release", [None] * n)  # gaps measured)
    deps = Dependencies.of(n, table.edge_parent, table.edge_child, table.edge_kind)
    table.edge_parent, table.edge_child, table.edge_kind = [], [], []
    ts, end = np.asarray(table.ts), np.asarray(table.end)
    child = deps.child()
    l0, g0 = typical_delays(table, deps, child, ts, end)
    typical = np.zeros(len(EDGE_KINDS))
    typical[EDGE_KIND_NUMBER["launch"]], typical[EDGE_KIND_NUMBER["stream"]] = l0, g0
    cpu = np.fromiter(map(CPU_KINDS.__contains__, table.column("kind")), np.bool_, n)
    binding = _releasing(deps, child, ts, end, ~cpu[child])
    if infer_waits:  # a GPU task released long after everything known: what it waited for on another stream
        deps, child, binding = _cross_stream_waits(table, threads, deps, child, binding, max(l0, g0, 0.0), ts, end)
    slack = ts[child] - end[deps.parent]
    thread, sync = deps.kind == EDGE_KIND_NUMBER["thread"], deps.kind == EDGE_KIND_NUMBER["sync"]
    on_cpu = cpu[child]
    # a CPU call the trace says returned before a sync parent ended did not wait on it
    deps.holds &= ~(on_cpu & sync & (end[deps.parent] > end[child]))
    waited = np.flatnonzero(on_cpu & sync & deps.holds)
    wait_end = np.full(n, -np.inf)
    np.maximum.at(wait_end, child[waited], end[deps.parent[waited]])
    duration = table.column("duration")
    for v in np.flatnonzero(wait_end > ts).tolist():  # the part of the call after the wait: its own cost
        duration[v] = table.end[v] - wait_end[v].item()
    is_binding = np.zeros(len(child), np.bool_)
    is_binding[binding] = True
    value = np.where(is_binding, slack, np.minimum(slack, typical[deps.kind]))
    gpu_lag = ~on_cpu & (deps.kind != EDGE_KIND_NUMBER["stream"])
    deps.lag[gpu_lag] = value[gpu_lag]  # (a CPU task's dependencies keep no delay but the thread's gap)
    gaps = np.flatnonzero((on_cpu & thread & deps.holds) | (~on_cpu & (deps.kind == EDGE_KIND_NUMBER["stream"])))
    table.gap = np.zeros(n)
    last = gaps[_last_index(deps.parent[gaps])]
    table.gap[deps.parent[last]] = np.where(on_cpu[last], slack[last], value[last])
    table.dependencies = deps
    return l0, g0


def _releasing(deps: Dependencies, child: np.ndarray, ts: np.ndarray, end: np.ndarray, among: np.ndarray) -> np.ndarray:
    """Of each task with dependencies ``among`` those given, the one that released it: the first of those that left
    it the least slack (``min`` over them in order)."""
    e = np.flatnonzero(among)
    slack = ts[child[e]] - end[deps.parent[e]]
    c = child[e]
    if not len(c):
        return e
    if not (c[1:] >= c[:-1]).all():  # (the dependencies are held by child: not expected)
        order = np.lexsort((e, slack, c))
        first = np.ones(len(order), np.bool_)
        first[1:] = c[order][1:] != c[order][:-1]
        return e[order][first]
    # each child's dependencies together, in order: the first of each child's least slack, without a sort
    begins = np.concatenate(([True], c[1:] != c[:-1]))
    group = np.cumsum(begins) - 1
    least = np.flatnonzero(slack == np.minimum.reduceat(slack, np.flatnonzero(begins))[group])
    first = np.concatenate(([True], group[least][1:] != group[least][:-1]))
    return e[least[first]]


def _cross_stream_waits(table: TaskTable, threads: dict[str, list[int]], deps: Dependencies, child: np.ndarray,
                        binding: np.ndarray, typical: float, ts: np.ndarray,
                        end: np.ndarray) -> tuple[Dependencies, np.ndarray, np.ndarray]:
    """The dependencies with, for each GPU task that started more than UNEXPLAINED_DELAY_US after the one that
    released it, the cross-stream wait timing explains (:func:`_cross_stream_source`) added after its others and
    releasing it instead."""
    kind = table.column("kind")
    released = child[binding]
    late = released[ts[released] - end[deps.parent[binding]] > UNEXPLAINED_DELAY_US + typical]
    if not len(late):
        return deps, child, binding
    stream_ends = _StreamEnds(table, threads)
    added: list[tuple[int, int, int]] = []  # (task, source, kind)
    for v in late.tolist():
        source = _cross_stream_source(table, v, stream_ends)
        if source is not None:
            edge = "comm" if "comm" in (kind[v], kind[source]) else "sync"
            added.append((v, source, EDGE_KIND_NUMBER[edge]))
    if not added:
        return deps, child, binding
    tasks, sources, kinds = (list(x) for x in zip(*added))
    before = len(deps.parent)
    deps, place = deps.with_added(tasks, sources, kinds)
    child = deps.child()
    moved = place[binding]
    keep = ~np.isin(child[moved], tasks)
    return deps, child, np.sort(np.concatenate([moved[keep], place[before:]]))


def _cross_stream_source(table: TaskTable, v: int, stream_ends: _StreamEnds) -> int | None:
    """What a GPU task that started later than anything known explains waited for: the task that ended last, within
    CROSS_STREAM_WINDOW_US before it started, on another stream of its device, and was issued before it."""
    thread = table.column("thread")[v]
    s, launch_ts, end = table.ts[v], table.launch_ts, table.end
    best = None
    for other in stream_ends.streams_of_device.get(thread.split("/")[0], ()):
        if other == thread:
            continue
        i = bisect.bisect_right(stream_ends.ends[other], s) - 1
        if i >= 0:
            e, x = stream_ends.pairs[other][i]
            if s - e <= CROSS_STREAM_WINDOW_US and launch_ts[x] <= launch_ts[v] and (best is None or e > end[best]):
                best = x
    return best


def split_backward_gaps(table: TaskTable, waits: list[BackwardWait]) -> None:
    """The idle stretches were waits: the calling thread's from the call to the backward's start, then until the
    backward ended; the autograd thread's before it, for the call. Each becomes the delay of its edge (the call
    -> the first backward task, the last backward task -> the caller's next task), the threads keep no gap there,
    and replay stays exact."""
    ts, end, deps, gap = table.ts, table.end, table.dependencies, table.gap
    assert deps is not None and gap is not None  # (measure_delays ran)
    sync, thread = EDGE_KIND_NUMBER["sync"], EDGE_KIND_NUMBER["thread"]
    for p, n, last, first in waits:
        gap[p] = 0.0
        for x, source, lag in ((n, last, ts[n] - end[last]), (first, p, ts[first] - end[p])):
            for e in deps.held(x):
                if deps.parent[e] == source and deps.kind[e] == sync:
                    deps.lag[e] = lag
                elif deps.kind[e] == thread and x == first:
                    gap[deps.parent[e]] = 0.0  # the autograd thread was idle, waiting for the call


def split_loader_gaps(table: TaskTable, waits: list[LoaderWait]) -> None:
    """Of the idle stretch before the task that waited for a batch, the part a ready batch also takes (taking it
    from the workers' queue) stays the thread's, and follows the batch too (the edge's delay); the rest was the
    wait. A one-task range keeps that part as its duration (measure_delays cut it at the batch's arrival)."""
    deps, gap = table.dependencies, table.gap
    assert deps is not None and gap is not None  # (measure_delays ran)
    for worker, consumer, before, own in waits:
        if before is not None:
            gap[before] = own
        for e in deps.held(consumer):
            if deps.parent[e] == worker:
                deps.lag[e] = own
