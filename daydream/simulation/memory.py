"""A simulated step's memory: the graph's tensors (:mod:`daydream.graph.memory`) placed where the timeline runs the
tasks that allocate and free them, their levels added up, and the step's peak.

A tensor is allocated at its task's simulated start plus its traced offset, stretched as the task was (a task twice
as long allocates halfway through at twice the offset; past the task's end, in the gap after it, the offset past the
end stays), and freed likewise; one allocated before the window lives from its start, one never freed to its end. A
script's stretch of a tensor's life (``Window``) adds the change of its bytes between the two moments. The level is
the device's floor less the tensors held from before, plus every tensor live; ties at one moment keep the trace's
order. The step's peak is the largest level over the measured step(s) - on the CPU's clock, which every allocation
keeps: from the end of the context steps' CPU work to the end of the measured steps' (:func:`memory_window`), the level
carried into it included - as the trace's own peak is the largest total its events report there: on the unchanged
graph, replayed exactly, the two are the same number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from daydream.graph.memory import BEFORE, CATEGORIES, NO_TASK, GraphMemory, memory_of
from daydream.graph.schema import CPU_KINDS
from daydream.simulation.timeline import Timeline

MAX_POINTS = 4000  # a memory timeline drawn: at most this many points (each the largest level of its stretch)


@dataclass(frozen=True)
class MemoryTimeline:
    """One device's memory over a simulated step: its peak, when (us on the timeline), what holds it then (bytes by
    category, ``CATEGORIES``; adding up to the peak), and its level over the step's window (times, bytes)."""

    device: str
    gpu: bool
    source: str  # "trace" or "shapes"
    capacity_bytes: float | None
    floor_bytes: float
    peak_bytes: float
    peak_us: float
    at_peak: dict[str, float]
    times_us: np.ndarray = field(repr=False)
    levels: np.ndarray = field(repr=False)


def memory_timeline(
    timeline: Timeline, memory: GraphMemory | None = None, device: int | None = None
) -> MemoryTimeline | None:
    """The step's memory on ``device`` (default: the graph's main device) as ``timeline`` runs it; None where the
    graph holds no memory."""
    memory = memory if memory is not None else memory_of(timeline.graph)
    if memory is None:
        return None
    k = memory.main_device() if device is None else device
    dev = memory.devices[k]
    on = np.flatnonzero(memory.device == k)
    alloc_t = _times(timeline, memory, memory.alloc_task[on], memory.alloc_offset[on], -math.inf)
    free_t = _times(timeline, memory, memory.free_task[on], memory.free_offset[on], math.inf)
    # a tensor whose task left the timeline (none should: removal moves or drops them) is dropped
    live = ~np.isnan(alloc_t) & ~np.isnan(free_t)
    b = (memory.nbytes[on] * memory.scale[on])[live]
    a_seq, f_seq = memory.alloc_seq[on][live], memory.free_seq[on][live]
    alloc_t, free_t, on = alloc_t[live], free_t[live], on[live]
    # the floor less every tensor it holds (those held from before the window, the parameters and optimizer state
    # split from it): they are added back as the tensors they are, a script's changes included
    base = dev.floor_bytes - float(memory.nbytes[on][memory.in_floor[on]].sum())
    times = [alloc_t, free_t]
    deltas = [b, -b]
    seqs = [a_seq, f_seq]
    factor_at: list[
        tuple[np.ndarray, float, float, float]
    ] = []  # (tensor rows, from, to, factor): for the peak's parts
    position = {int(t): i for i, t in enumerate(on.tolist())}
    for w in memory.windows:
        rows = np.asarray([position[int(t)] for t in w.tensors.tolist() if int(t) in position], np.int64)
        if not len(rows):
            continue
        t0 = alloc_t[rows] if w.after is None else np.full(len(rows), _edge(timeline, w.after, end=True))
        t1 = free_t[rows] if w.until is None else np.full(len(rows), _edge(timeline, w.until, end=False))
        t0, t1 = np.maximum(t0, alloc_t[rows]), np.minimum(t1, free_t[rows])
        ok = t0 < t1
        change = b[rows] * (w.factor - 1.0)
        times += [t0[ok], t1[ok]]
        deltas += [change[ok], -change[ok]]
        seqs += [np.full(int(ok.sum()), -1, np.int64)] * 2
        factor_at.append((rows[ok], t0[ok], t1[ok], w.factor))
    t = np.concatenate(times)
    d = np.concatenate(deltas)
    s = np.concatenate(seqs)
    finite = np.isfinite(t)
    carried = base + float(d[~finite & (t < 0)].sum())  # the tensors held from before the window
    t, d, s = t[finite], d[finite], s[finite]
    order = np.lexsort((s, t))
    t, d = t[order], d[order]
    level = carried + np.cumsum(d)
    w0, w1 = memory_window(timeline)
    inside = (t >= w0) & (t <= w1)
    last_before = np.flatnonzero(t < w0)
    start_level = float(level[last_before[-1]]) if len(last_before) else carried
    if inside.any():
        at = int(np.flatnonzero(inside)[np.argmax(level[inside])])
        peak, peak_us = float(level[at]), float(t[at])
        if start_level > peak:
            peak, peak_us = start_level, w0
    else:
        peak, peak_us = start_level, w0
    parts = _at_peak(memory, on, b, alloc_t, free_t, peak_us, factor_at, base)
    series_t = np.concatenate([[w0], t[inside]])
    series_l = np.concatenate([[start_level], level[inside]])
    series_t, series_l = _thinned(series_t, series_l)
    return MemoryTimeline(
        dev.key, dev.gpu, memory.source, dev.capacity_bytes, dev.floor_bytes, peak, peak_us, parts, series_t, series_l
    )


def memory_window(timeline: Timeline) -> tuple[float, float]:
    """The stretch a step's memory is measured over: from the end of the context steps' last CPU task (every
    allocation is a CPU task's: a CPU that runs ahead of its GPU allocates a step's activations before the GPU's part
    of the step begins, which the step's own window would miss) to the end of the measured steps' work, CPU or GPU;
    the step's window where the graph names no steps."""
    steps = timeline.graph.graph.get("steps") or []
    context = {s.name for s in steps if s.context}
    measured = {s.name for s in steps if not s.context}
    cpu = np.asarray(timeline.tasks_of(CPU_KINDS), np.int64)
    if not len(cpu) or not measured:
        w0, w1, _ = timeline.step_window()
        return w0, w1
    step = timeline.values("step", tasks=cpu.tolist())
    in_context = np.fromiter((s in context for s in step), np.bool_, len(cpu))
    in_measured = np.fromiter((s in measured for s in step), np.bool_, len(cpu))
    if not in_measured.any():
        w0, w1, _ = timeline.step_window()
        return w0, w1
    ends = timeline.end[cpu]
    w0 = float(ends[in_context].max()) if in_context.any() else float(timeline.start.min())
    # and to the step's end where its GPU work ends later: a script may hold memory between GPU tasks (a pipeline's
    # micro-batches) whose CPU calls ran ahead
    g0, g1, _ = timeline.step_window()
    return min(w0, g0), max(float(ends[in_measured].max()), g1)


def _times(timeline: Timeline, memory: GraphMemory, tasks: np.ndarray, offsets: np.ndarray, none: float) -> np.ndarray:
    """Where the timeline puts each (task, traced offset): ``none`` for NO_TASK, NaN for a task not in it."""
    out = np.full(len(tasks), none, np.float64)
    index = _index(timeline)
    for k, (task, offset) in enumerate(zip(tasks.tolist(), offsets.tolist())):
        if task == NO_TASK:
            continue
        i = index.get(task)
        if i is None:
            out[k] = math.nan
            continue
        start0, dur0 = memory.traced_us.get(task, (0.0, 0.0))
        s, e = float(timeline.start[i]), float(timeline.end[i])
        out[k] = _stretched(s, e, dur0, offset)
    return out


def _stretched(s: float, e: float, dur0: float, offset: float) -> float:
    """A moment ``offset`` us from a task's traced start, the task now running from ``s`` to ``e``."""
    if offset <= 0 or dur0 <= 0:
        return s + offset if offset <= 0 else e + (offset - dur0)
    if offset <= dur0:
        return s + offset / dur0 * (e - s)
    return e + (offset - dur0)


def _edge(timeline: Timeline, task: Any, end: bool) -> float:
    i = _index(timeline).get(task)
    if i is None:
        return math.nan
    return float(timeline.end[i] if end else timeline.start[i])


def _index(timeline: Timeline) -> dict[Any, int]:
    """The timeline's task -> its index (kept on the timeline: its tasks do not change)."""
    cached = timeline._columns.get("__memory_index__")
    if cached is None:
        index = {n: i for i, n in enumerate(timeline.nodes)}
        timeline._columns["__memory_index__"] = (np.zeros(0), [index])
        return index
    return cached[1][0]


def _at_peak(
    memory: GraphMemory,
    on: np.ndarray,
    b: np.ndarray,
    alloc_t: np.ndarray,
    free_t: np.ndarray,
    when: float,
    windows: list[tuple[np.ndarray, np.ndarray, np.ndarray, float]],
    base: float,
) -> dict[str, float]:
    """Bytes by category held at ``when``: the tensors live then (a stretch a script changed at its factor), the
    floor's rest as ``before the step``; adding up to the level then."""
    live = (alloc_t <= when) & (free_t > when)
    held = np.where(live, b, 0.0)
    for rows, t0, t1, factor in windows:
        inside = (t0 <= when) & (t1 > when)
        held[rows[inside]] *= factor
    out = dict.fromkeys(CATEGORIES, 0.0)
    cats = memory.category[on]
    for k, name in enumerate(CATEGORIES):
        out[name] = float(held[cats == k].sum())
    out[CATEGORIES[BEFORE]] += base
    return {k: v for k, v in out.items() if v}


def _thinned(times: np.ndarray, levels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """At most MAX_POINTS points, each stretch's largest level (a plot of the peak stays the peak)."""
    if len(times) <= MAX_POINTS:
        return times, levels
    edges = np.linspace(0, len(times), MAX_POINTS + 1).astype(np.int64)
    picks = [int(lo + np.argmax(levels[lo:hi])) for lo, hi in zip(edges[:-1], edges[1:]) if hi > lo]
    return times[picks], levels[picks]
