"""The simulated timeline: when each task ran, and what follows from it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import numpy as np

from daydream.graph.adjacency import attrs_of, successors_of
from daydream.graph.schema import CPU_KINDS, GPU_KINDS


@dataclass
class Timeline:
    """Start and end (microseconds) of every task of ``graph``, indexed like ``nodes``.

    ``cause[i]`` is the index of the task whose end (or thread slot) fixed task i's start, or -1 when
    its release time did: following it backwards from the last task gives the critical path.
    """

    graph: nx.DiGraph
    nodes: list[Any]
    start: np.ndarray
    end: np.ndarray
    cause: np.ndarray
    threads: list[str]
    task_attrs: list[dict[str, Any]] = field(default_factory=list)
    # when each task could have started alone (a collective's member: when it reached the collective; NaN for
    # the other tasks); None where the graph has no collective across ranks
    arrival: np.ndarray | None = None
    _of_kinds: dict[frozenset[str], list[int]] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.task_attrs:
            nodes = attrs_of(self.graph)
            self.task_attrs = [nodes[n] for n in self.nodes]

    def tasks_of(self, kinds: frozenset[str]) -> list[int]:
        """Indices of the tasks of ``kinds``, in task order (kept: the summaries of one timeline ask several times)."""
        found = self._of_kinds.get(kinds)
        if found is None:
            found = self._of_kinds[kinds] = [i for i, a in enumerate(self.task_attrs) if a["kind"] in kinds]
        return found

    def attrs(self, i: int) -> dict[str, Any]:
        """The attributes of task ``i`` (the graph's own dict for that node)."""
        return self.task_attrs[i]

    def makespan(self, indices: np.ndarray | list[int] | None = None) -> float:
        """First start to last end, of all tasks or of ``indices``."""
        if indices is None:
            return float(self.end.max() - self.start.min()) if len(self.nodes) else 0.0
        if len(indices) == 0:
            return 0.0
        return float(self.end[indices].max() - self.start[indices].min())

    def step_indices(self) -> dict[str, np.ndarray]:
        """Each step's task indices, in task order, by step name ("inserted": tasks of no step)."""
        code_of: dict[str, int] = {}
        codes = np.fromiter((code_of.setdefault(a.get("step") or "inserted", len(code_of)) for a in self.task_attrs), np.int64,
                            len(self.task_attrs))  # fmt: skip
        # one stable sort by step: each step's indices stay in task order
        by_step = np.split(np.argsort(codes, kind="stable"), np.cumsum(np.bincount(codes, minlength=len(code_of)))[:-1])
        return dict(zip(code_of, by_step))

    def step_times(self) -> dict[str, float]:
        """Predicted makespan of each step's tasks (inserted tasks count with the step of nothing)."""
        return {name: self.makespan(ix) for name, ix in self.step_indices().items() if name != "inserted"}

    def step_periods(self) -> dict[str, float]:
        """Each step's time as a pipeline of steps sees it, in the order the steps end: from the end of the step
        before (for the first, the start of the timeline) to its own end, its last task's. Where steps overlap (one
        step's communication under the next one's compute, the CPU issuing ahead of the GPU) the middle steps are
        the steady state; the periods add up to the makespan."""
        ends = sorted((float(self.end[ix].max()), name) for name, ix in self.step_indices().items() if name != "inserted")
        before = float(self.start.min()) if len(self.nodes) else 0.0
        out = {}
        for end, name in ends:
            out[name] = end - before
            before = end
        return out


def union_intervals(intervals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge [start, end) intervals (rows); return merged starts and ends."""
    if len(intervals) == 0:
        return np.empty(0), np.empty(0)
    order = np.argsort(intervals[:, 0], kind="stable")
    s, e = intervals[order, 0], intervals[order, 1]
    run_end = np.maximum.accumulate(e)
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > run_end[:-1]
    starts = s[new]
    group = np.cumsum(new) - 1
    ends = np.zeros(len(starts))
    np.maximum.at(ends, group, run_end)
    return starts, ends


def _overlap(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> float:
    """Length of the intersection of two unions of disjoint intervals: |A| + |B| - |A u B|."""
    if not len(a[0]) or not len(b[0]):
        return 0.0
    union = union_intervals(np.concatenate([np.stack(a, axis=1), np.stack(b, axis=1)]))
    return float((a[1] - a[0]).sum() + (b[1] - b[0]).sum() - (union[1] - union[0]).sum())


# the parts of a breakdown and what a table calls them, in the order tables show them
BREAKDOWN_PARTS: dict[str, str] = {"cpu_only_us": "CPU only", "gpu_only_us": "GPU only", "cpu_gpu_overlap_us": "CPU+GPU overlap",
                                   "idle_us": "idle"}  # fmt: skip


def breakdown(timeline: Timeline) -> dict[str, float]:
    """The paper's runtime breakdown (section 6): time when only the CPU, only the GPU, or both are busy.

    The CPU is busy during its tasks and the measured CPU time after them (gaps) on the threads that issue
    GPU work or run CPU ops; polling threads (e.g. a communication watchdog) are not counted.
    """
    attrs = timeline.task_attrs
    gpu_ix = timeline.tasks_of(GPU_KINDS)
    working = {a["thread"] for a in attrs if a["kind"] == "dataloader" or (a["kind"] == "cpu" and a.get("op") == a["name"])}
    # and the threads that launch GPU work: only a task on a thread not found yet can add one (a few threads, and
    # nearly every task is on one of them already)
    node_attrs, succ, nodes = attrs_of(timeline.graph), successors_of(timeline.graph), timeline.nodes
    for i, a in enumerate(attrs):
        if a["thread"] in working:
            continue
        for child, e in succ[nodes[i]].items():
            if e.get("kind") == "launch" and node_attrs[child]["kind"] in GPU_KINDS:
                working.add(a["thread"])
                break
    cpu_ix = [i for i in timeline.tasks_of(CPU_KINDS) if attrs[i]["thread"] in working]
    # fmax: a NaN gap counts as none, as max(0.0, NaN) did
    gaps = np.fmax(np.asarray([attrs[i].get("gap", 0.0) for i in cpu_ix], dtype=float), 0.0)
    total = timeline.makespan()
    t0 = float(timeline.start.min()) if len(timeline.nodes) else 0.0
    t1 = t0 + total
    cpu_rows = np.stack([timeline.start[cpu_ix], timeline.end[cpu_ix] + gaps], axis=1) if cpu_ix else np.empty((0, 2))
    gpu_rows = np.stack([timeline.start[gpu_ix], timeline.end[gpu_ix]], axis=1) if gpu_ix else np.empty((0, 2))
    cpu = union_intervals(np.clip(cpu_rows, t0, t1))
    gpu = union_intervals(gpu_rows)
    cpu_busy = float((cpu[1] - cpu[0]).sum())
    gpu_busy = float((gpu[1] - gpu[0]).sum())
    both = float(_overlap(cpu, gpu))
    return {
        "total_us": total,
        "cpu_only_us": cpu_busy - both,
        "gpu_only_us": gpu_busy - both,
        "cpu_gpu_overlap_us": both,
        "idle_us": max(0.0, total - cpu_busy - gpu_busy + both),
    }


def critical_path(timeline: Timeline) -> list[int]:
    """Indices of the tasks on the critical path, first to last."""
    if not len(timeline.nodes):
        return []
    i = int(np.argmax(timeline.end))
    cause = timeline.cause.tolist()
    path = []
    seen = set()
    while i >= 0 and i not in seen:
        seen.add(i)
        path.append(i)
        i = cause[i]
    path.reverse()
    return path


def totals(
    timeline: Timeline, by: str, indices: list[int] | None = None, kinds: frozenset[str] = GPU_KINDS,
    times: list[float] | None = None,
) -> dict[str, float]:  # fmt: skip
    """Summed duration of tasks of ``kinds`` grouped by attribute ``by`` (phase, layer, class, name, ...).

    ``times`` (parallel to ``indices``) replaces the tasks' durations, e.g. with critical-path segments.
    """
    return totals_by(timeline, (by,), indices, kinds, times)[by]


def totals_by(
    timeline: Timeline, bys: tuple[str, ...], indices: list[int] | None = None, kinds: frozenset[str] = GPU_KINDS,
    times: list[float] | None = None,
) -> dict[str, dict[str, float]]:  # fmt: skip
    """:func:`totals` for each attribute of ``bys``, in one pass over the tasks."""
    attrs = timeline.task_attrs
    if indices is None:
        indices = timeline.tasks_of(kinds)
    else:
        keep = [k for k, i in enumerate(indices) if attrs[i]["kind"] in kinds]
        indices = [indices[k] for k in keep]
        times = None if times is None else [times[k] for k in keep]
    if times is None:  # plain floats: indexing numpy arrays one element at a time costs more than the loop itself
        start, end = timeline.start.tolist(), timeline.end.tolist()
        times = [end[i] - start[i] for i in indices]
    result = {}
    for by in bys:
        # each key's index in order of first appearance, its times summed in task order (np.bincount adds them in the
        # order given: the same sums, bit for bit, as adding them one by one)
        code_of: dict[str, int] = {}
        codes = [code_of.setdefault(k if type(k) is str else "-" if k is None else str(k), len(code_of))
                 for k in [attrs[i].get(by) for i in indices]]  # fmt: skip
        sums = np.bincount(codes, weights=times, minlength=len(code_of)).tolist() if codes else []
        result[by] = dict(sorted(zip(code_of, sums), key=lambda kv: -kv[1]))
    return result


def critical_path_segments(timeline: Timeline, path: list[int]) -> list[float]:
    """Time each critical-path task holds the path: from its start to the next path task's start (its run,
    then the gap or delay until it releases the next), the last task its duration."""
    starts = timeline.start.tolist()
    seg = [starts[b] - starts[a] for a, b in zip(path, path[1:])]
    if path:
        seg.append(float(timeline.end[path[-1]]) - starts[path[-1]])
    return seg
