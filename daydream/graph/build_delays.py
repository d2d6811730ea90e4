"""Builder stage 4: each dependency's delay, measured so that simulating the unmodified graph reproduces the trace
(docs/graph.md, "Delays").

For each task the dependency that released it (the parent that ended last) keeps the delay it had in the trace, and
every other dependency gets its mechanism's typical delay (median over the trace), never more than it had. When a
transform changes the work, the typical delays take over. A CPU call that waited keeps as its duration only the part
after the wait: the waiting is the edge.
"""

from __future__ import annotations

import bisect
import statistics
from typing import Any

from daydream.graph.build_edges import BackwardWait, LoaderWait
from daydream.graph.build_table import InEdge, TaskTable
from daydream.graph.schema import CPU_KINDS

# Defaults where a trace has no sample of a mechanism (typical of CUDA 11/12 on current GPUs).
DEFAULT_LAUNCH_LATENCY_US = 2.0
DEFAULT_STREAM_GAP_US = 1.0
# A GPU task that starts this long after everything known to hold it back waited on another stream.
UNEXPLAINED_DELAY_US = 5.0
CROSS_STREAM_WINDOW_US = 10.0


def typical_delays(table: TaskTable) -> tuple[float, float]:
    """Median launch latency (idle stream) and median inter-kernel gap (queued work), measured."""
    ts, end, in_edges = table.ts, table.end, table.in_edges
    launch, gap = [], []
    for v, launcher in enumerate(table.launcher):
        if launcher < 0:
            continue
        pred = None  # the last stream edge, as a dict by kind would keep
        for e in in_edges[v]:
            if e.kind == "stream":
                pred = e.parent
        if pred is None or end[pred] < ts[launcher]:
            launch.append(ts[v] - end[launcher])
        elif end[launcher] < end[pred]:
            gap.append(ts[v] - end[pred])
    l0 = statistics.median(launch) if launch else DEFAULT_LAUNCH_LATENCY_US
    g0 = max(0.0, statistics.median(gap)) if gap else DEFAULT_STREAM_GAP_US
    return l0, g0


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
    trace does not record); returns the typical launch latency and stream gap."""
    l0, g0 = typical_delays(table)
    typical = {"launch": l0, "stream": g0, "thread": 0.0, "sync": 0.0, "comm": 0.0}
    attrs, ts, end = table.attrs, table.ts, table.end
    for a in attrs:
        a["gap"] = 0.0
        a["release"] = None
    stream_ends = _StreamEnds(table, threads) if infer_waits else None
    unexplained = UNEXPLAINED_DELAY_US + max(l0, g0, 0.0)
    for v, edges in enumerate(table.in_edges):
        if not edges:
            continue  # nothing known holds it: it starts with the window (see build._cut: the unanchored starts)
        if attrs[v]["kind"] in CPU_KINDS:
            if len(edges) == 1 and edges[0].kind == "thread":  # most CPU tasks: held by their thread alone
                u = edges[0].parent
                attrs[u]["gap"] = ts[v] - end[u]
            else:
                _cpu_delays(table, v, edges)
            continue
        s = ts[v]
        binding = edges[0] if len(edges) == 1 else min(edges, key=lambda e: s - end[e.parent])
        if stream_ends is not None and s - end[binding.parent] > unexplained:
            source = _cross_stream_source(table, v, stream_ends)
            if source is not None:
                kind = "comm" if "comm" in (attrs[v]["kind"], attrs[source]["kind"]) else "sync"
                binding = InEdge(source, kind, 0.0)
                edges.append(binding)
        for e in edges:
            slack = s - end[e.parent]
            value = slack if e is binding else min(slack, typical[e.kind])
            if e.kind == "stream":
                attrs[e.parent]["gap"] = value
            else:
                e.lag = value
    return l0, g0


def _cpu_delays(table: TaskTable, v: int, edges: list[InEdge]) -> None:
    """A CPU task: a call that waited (sync parents that ended inside it) keeps the part after the wait as its
    duration, and starts with no delay after what it waited for; the thread's gap before it is what the trace shows."""
    attrs, end = table.attrs, table.end
    s = table.ts[v]
    waited = [e.parent for e in edges if e.kind == "sync"]
    if waited:
        te = max(end[u] for u in waited)
        if te > end[v]:  # the trace says the call returned first: not a wait on these
            edges[:] = [e for e in edges if e.kind != "sync" or end[e.parent] <= end[v]]
            waited = [e.parent for e in edges if e.kind == "sync"]
            te = max((end[u] for u in waited), default=s)
        if te > s:
            attrs[v]["duration"] = end[v] - te  # the part of the call after the wait: its own cost
    for e in edges:
        if e.kind == "thread":
            attrs[e.parent]["gap"] = s - end[e.parent]
        else:
            e.lag = 0.0


def _cross_stream_source(table: TaskTable, v: int, stream_ends: _StreamEnds) -> int | None:
    """What a GPU task that started later than anything known explains waited for: the task that ended last, within
    CROSS_STREAM_WINDOW_US before it started, on another stream of its device, and was issued before it."""
    thread = table.attrs[v]["thread"]
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
    attrs, ts, end = table.attrs, table.ts, table.end
    for p, n, last, first in waits:
        attrs[p]["gap"] = 0.0
        for x, source, lag in ((n, last, ts[n] - end[last]), (first, p, ts[first] - end[p])):
            for e in table.in_edges[x]:
                if e.parent == source and e.kind == "sync":
                    e.lag = lag
                elif e.kind == "thread" and x == first:
                    attrs[e.parent]["gap"] = 0.0  # the autograd thread was idle, waiting for the call


def split_loader_gaps(table: TaskTable, waits: list[LoaderWait]) -> None:
    """Of the idle stretch before the task that waited for a batch, the part a ready batch also takes (taking it
    from the workers' queue) stays the thread's, and follows the batch too (the edge's delay); the rest was the
    wait. A one-task range keeps that part as its duration (measure_delays cut it at the batch's arrival)."""
    attrs = table.attrs
    for worker, consumer, before, own in waits:
        if before is not None:
            attrs[before]["gap"] = own
        for e in table.in_edges[consumer]:
            if e.parent == worker:
                e.lag = own
