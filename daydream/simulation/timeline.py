"""The simulated timeline: when each task ran, and what follows from it."""

from __future__ import annotations

import operator
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import count, repeat
from typing import Any

import msgspec
import networkx as nx
import numpy as np

from daydream.graph.adjacency import attrs_of, edge_arrays, successors_of, task_columns
from daydream.graph.schema import CPU_KINDS, GPU_KINDS
from daydream.units import ms


class _TaskDicts:
    """``Timeline.task_attrs``: the graph's task dicts in the timeline's order, read from the graph (which makes them
    then, where it holds its tasks as columns) the first time they are read; a reader that can take a column reads
    :meth:`Timeline.values` instead."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = "_" + name

    def __get__(self, timeline: Any, owner: Any = None) -> Any:
        if timeline is None:
            return None  # (the dataclass field's default: none given)
        found = timeline.__dict__.get(self.slot)
        if found is None:
            nodes = attrs_of(timeline.graph)
            found = timeline.__dict__[self.slot] = [nodes[n] for n in timeline.nodes]
        return found

    def __set__(self, timeline: Any, value: list[dict[str, Any]] | None) -> None:
        timeline.__dict__[self.slot] = value or None


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
    task_attrs: list[dict[str, Any]] = _TaskDicts()  # type: ignore[assignment]
    # when each task could have started alone (a collective's member: when it reached the collective; NaN for
    # the other tasks); None where the graph has no collective across ranks
    arrival: np.ndarray | None = None
    _of_kinds: dict[frozenset[str], list[int]] = field(default_factory=dict, repr=False, compare=False)
    _columns: dict[str, tuple[np.ndarray, list[Any]]] = field(default_factory=dict, repr=False, compare=False)
    # a job's slowest rank and its tasks (step_rank), once: the step time and the breakdown both read it
    _slowest: tuple[int, np.ndarray] | None = field(default=None, repr=False, compare=False)
    _slowest_read: bool = field(default=False, repr=False, compare=False)

    def __repr__(self) -> str:
        """One line (a dataclass's would print every task): its tasks and threads, and the span they ran in."""
        n = len(self.nodes)
        span = float(np.max(self.end) - np.min(self.start)) if n else 0.0
        return (
            f"Timeline({n:,} tasks on {len(set(self.threads)):,} threads and streams, {ms(span)} from the first "
            f"start to the last end; step_us() for the step's period)"
        )

    def tasks_of(self, kinds: frozenset[str]) -> list[int]:
        """Indices of the tasks of ``kinds``, in task order (kept: the summaries of one timeline ask several times)."""
        found = self._of_kinds.get(kinds)
        if found is None:
            codes, values = self.codes("kind")
            found = self._of_kinds[kinds] = np.flatnonzero(np.isin(codes, _codes_of(values, kinds))).tolist()
        return found

    def codes(self, attribute: str) -> tuple[np.ndarray, list[Any]]:
        """Each task's value of ``attribute`` (None where it has none) as a number: (the numbers, in task order; the
        values they stand for, in order of first appearance). Kept: the summaries of one timeline read the same
        attributes. Read by map() over C-level getters: a Python loop per task is most of a large graph's summary."""
        found = self._columns.get(attribute)
        if found is None:
            values = self.values(attribute)
            distinct = dict.fromkeys(values)
            number = dict(zip(distinct, count()))
            found = self._columns[attribute] = (
                np.fromiter(map(number.__getitem__, values), np.int64, len(values)),
                list(distinct),
            )
        return found

    def values(self, attribute: str, default: Any = None, tasks: list[int] | None = None) -> list[Any]:
        """Each task's value of ``attribute`` (of ``tasks``, in that order, where given), ``default`` where it has
        none (as ``dict.get`` reads it; not to be written): from the graph's task columns where it holds them still
        (a built graph none of whose task dicts was read, :func:`~daydream.graph.adjacency.task_columns`), else from
        the task dicts."""
        columns = task_columns(self.graph)
        if columns is not None and len(columns) == len(self.nodes):  # (its tasks 0..n-1, as the simulation reads them)
            return columns.values(attribute, default, tasks)
        attrs = self.task_attrs if tasks is None else map(self.task_attrs.__getitem__, tasks)
        return list(map(dict.get, attrs, repeat(attribute), repeat(default)))

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
        return self._steps_of(None)

    def step_times(self) -> dict[str, float]:
        """Predicted makespan of each step's tasks (inserted tasks count with the step of nothing)."""
        return {name: self.makespan(ix) for name, ix in self.step_indices().items() if name != "inserted"}

    def measured_steps(self) -> list[str]:
        """The steps whose periods make the step time: the graph's steps but its context (the step simulated before
        the measured one so that it starts with what that step left pending); a graph built by hand without that
        list, every step its tasks name; [] where they name none."""
        listed = self.graph.graph.get("steps")
        if not listed:
            return [name for name in self.step_indices() if name not in ("inserted", None)]
        return [s.name for s in listed if not s.context]

    def rank_tasks(self) -> dict[int, np.ndarray]:
        """A job's tasks by rank, each rank's in task order (the ranks with tasks of their own: a rank that shares a
        twin's has none); {} where the graph is not a job's."""
        if not self.graph.graph.get("ranks"):
            return {}
        raw, values = self.codes("rank")
        return {int(rank): np.flatnonzero(raw == code) for code, rank in enumerate(values) if rank is not None}

    def step_rank(self) -> int | None:
        """The rank whose window is a job's step: its slowest rank, the one whose own step (from its own step's start
        to its end) is longest, the lowest of those tied; None where the timeline is not a job's of two ranks or
        more with tasks of their own. A job's step time is that rank's: the ranks' steps start apart (their offsets),
        and the job's span across them is no rank's step."""
        slowest = self._slowest_rank()
        return slowest[0] if slowest is not None else None

    def step_tasks(self) -> np.ndarray | None:
        """The tasks whose window the step time measures: a job's slowest rank's (:meth:`step_rank`); None: every
        task."""
        slowest = self._slowest_rank()
        return slowest[1] if slowest is not None else None

    def _slowest_rank(self) -> tuple[int, np.ndarray] | None:
        if not self._slowest_read:
            by_rank = self.rank_tasks()
            if len(by_rank) > 1:
                steps = {rank: self.step_us(ix) for rank, ix in sorted(by_rank.items())}
                rank = max(steps, key=steps.__getitem__)  # the first of the longest: the lowest rank of those tied
                self._slowest = rank, by_rank[rank]
            self._slowest_read = True
        return self._slowest

    def step_us(self, indices: np.ndarray | None = None) -> float:
        """The step time, one meaning everywhere (simulate, run, compare, report, the scripts' ``baseline`` and
        ``predicted``): the period of the measured step, from the end of the step before (its context) to its own
        end; the median of the periods of several ("all"); the makespan where the graph names no step, or none of
        its steps is left. ``indices``: of those tasks only (one rank of a job). A job's step time is its slowest
        rank's (:meth:`step_rank`)."""
        if indices is None:
            indices = self.step_tasks()
        periods = self.step_periods(indices)
        names = [n for n in self.measured_steps() if n in periods]
        if not names:
            return self.makespan(indices)
        return float(statistics.median(periods[n] for n in names))

    def step_window(self, indices: np.ndarray | None = None) -> tuple[float, float, int]:
        """The stretch the step time is measured over: from the end of the last context step (the timeline's start
        without one) to the end of the last measured step, and how many measured steps it holds (0: the whole
        timeline, no step named). ``indices``: of those tasks only (one rank of a job: its own window)."""
        if not len(self.nodes) or (indices is not None and not len(indices)):
            return 0.0, 0.0, 0
        start, end = (self.start, self.end) if indices is None else (self.start[indices], self.end[indices])
        t0, t1 = float(start.min()), float(end.max())
        ends = {
            name: float(self.end[ix].max())
            for name, ix in self._steps_of(indices).items()
            if name != "inserted" and len(ix)
        }
        measured = [n for n in self.measured_steps() if n in ends]
        if not measured:
            return t0, t1, 0
        context = [end for name, end in ends.items() if name not in measured]
        begin = max([e for e in context if e <= min(ends[n] for n in measured)], default=t0)
        return begin, max(ends[n] for n in measured), len(measured)

    def step_scale(self) -> float:
        """What a total over the step's window (:meth:`step_window`) is multiplied by to be one step's: the step time
        over the window where it holds several measured steps (the median step's share, as in :func:`breakdown`),
        else 1. The tables of one step (time by phase, class, layer, kernel; the critical path's shares) use it."""
        t0, t1, measured = self.step_window(self.step_tasks())
        return self.step_us() / (t1 - t0) if measured > 1 and t1 > t0 else 1.0

    def measured_indices(self) -> list[int] | None:
        """The tasks of the measured steps (and those of no step), in task order, for the tables of one step (time by
        phase, class, layer, kernel); None: every task (no context step in the graph)."""
        names = set(self.measured_steps())
        by_step = self.step_indices()
        context = [n for n in by_step if n != "inserted" and n not in names]
        if not names or not context:
            return None
        return np.sort(np.concatenate([ix for n, ix in by_step.items() if n not in context])).tolist()

    def step_periods(self, indices: np.ndarray | None = None) -> dict[str, float]:
        """Each step's time as a pipeline of steps sees it, in the order the steps end: from the end of the step
        before (for the first, the start of the timeline) to its own end, its last task's. Where steps overlap (one
        step's communication under the next one's compute, the CPU issuing ahead of the GPU) the middle steps are
        the steady state; the periods add up to the makespan. ``indices``: of those tasks only."""
        by_step = self._steps_of(indices)
        ends = sorted(
            (float(self.end[ix].max()), name) for name, ix in by_step.items() if name != "inserted" and len(ix)
        )
        start = self.start if indices is None else self.start[indices]
        before = float(start.min()) if len(start) else 0.0
        out = {}
        for end, name in ends:
            out[name] = end - before
            before = end
        return out

    def _steps_of(self, indices: np.ndarray | None) -> dict[str, np.ndarray]:
        """:meth:`step_indices`, of ``indices`` only where given (every step named, its tasks among them, maybe
        none): one sort of those tasks, so that a job's ranks cost one sort of the job's tasks together."""
        raw, values = self.codes("step")
        code_of: dict[str, int] = {}
        # the values in order of first appearance: each name's code is that of its first task, as one pass gives it
        renumber = np.asarray([code_of.setdefault(v or "inserted", len(code_of)) for v in values], np.int64)
        codes = renumber[raw] if len(raw) else raw
        ix = None if indices is None else np.sort(np.asarray(indices, np.int64))
        of = codes if ix is None else codes[ix]
        # one stable sort by step: each step's indices stay in task order
        order = np.argsort(of, kind="stable")
        by_step = np.split(order if ix is None else ix[order], np.cumsum(np.bincount(of, minlength=len(code_of)))[:-1])
        return dict(zip(code_of, by_step))


def _codes_of(values: list[Any], wanted: Iterable[Any]) -> list[int]:
    """The numbers (positions in ``values``, as :meth:`Timeline.codes` gives them) of the values in ``wanted``."""
    wanted = set(wanted)
    return [i for i, v in enumerate(values) if v in wanted]


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
BREAKDOWN_PARTS: dict[str, str] = {
    "cpu_only_us": "CPU only",
    "gpu_only_us": "GPU only",
    "cpu_gpu_overlap_us": "CPU+GPU overlap",
    "idle_us": "idle",
}


def breakdown(timeline: Timeline) -> dict[str, float]:
    """The paper's runtime breakdown (section 6): time when only the CPU, only the GPU, or both are busy; the parts
    add up to the step time (``total_us``).

    The CPU is busy during its tasks and the measured CPU time after them (gaps) on the threads that issue
    GPU work or run CPU ops; polling threads (e.g. a communication watchdog) are not counted. A job's breakdown is of
    its step, its slowest rank's window (:meth:`Timeline.step_rank`): that rank's tasks over it.
    """
    n = len(timeline.nodes)
    gpu_ix = timeline.tasks_of(GPU_KINDS)
    kind, kinds = timeline.codes("kind")
    thread, _ = timeline.codes("thread")
    # the threads that run data loading or CPU ops (a task whose op is its own name)...
    op = np.fromiter(map(operator.eq, timeline.values("op"), timeline.values("name")), np.bool_, n)
    loads = np.isin(kind, _codes_of(kinds, {"dataloader"})) | (np.isin(kind, _codes_of(kinds, {"cpu"})) & op)
    working = set(np.unique(thread[loads]).tolist())
    # ...and those that launch GPU work: only a task on a thread not found yet can add one (a few threads, and
    # nearly every task is on one of them already)
    built = edge_arrays(timeline.graph)
    if built is not None:  # a built graph's dependencies, still arrays (its tasks 0..n-1): its launches at once
        launch = np.flatnonzero(built.of_kind(("launch",)))
        of_gpu = np.isin(kind[built.child()[launch]], _codes_of(kinds, GPU_KINDS))
        working.update(thread[built.parent[launch[of_gpu]]].tolist())
    else:
        node_attrs, succ, nodes = attrs_of(timeline.graph), successors_of(timeline.graph), timeline.nodes
        threads = thread.tolist()
        for i in np.flatnonzero(~np.isin(thread, list(working))).tolist():
            if threads[i] in working:
                continue
            for child, e in succ[nodes[i]].items():
                if e.get("kind") == "launch" and node_attrs[child]["kind"] in GPU_KINDS:
                    working.add(threads[i])
                    break
    of_step = np.ones(n, np.bool_)
    ix = timeline.step_tasks()
    if ix is not None:  # a job: its slowest rank's tasks alone (the job's step is that rank's window)
        of_step[:] = False
        of_step[ix] = True
        gpu_ix = np.asarray(gpu_ix, np.int64)[of_step[gpu_ix]].tolist()
    cpu_ix = np.flatnonzero(np.isin(kind, _codes_of(kinds, CPU_KINDS)) & np.isin(thread, list(working)) & of_step)
    # fmax: a NaN gap counts as none, as max(0.0, NaN) did
    gaps = np.fmax(np.asarray(list(map(timeline.values("gap", 0.0).__getitem__, cpu_ix.tolist())), dtype=float), 0.0)
    # over the step's window (after its context step), in the step's time: several measured steps, their share each
    t0, t1, measured = timeline.step_window(ix)
    total = t1 - t0
    cpu_rows = (
        np.stack([timeline.start[cpu_ix], timeline.end[cpu_ix] + gaps], axis=1) if len(cpu_ix) else np.empty((0, 2))
    )
    gpu_rows = np.stack([timeline.start[gpu_ix], timeline.end[gpu_ix]], axis=1) if gpu_ix else np.empty((0, 2))
    cpu = union_intervals(np.clip(cpu_rows, t0, t1))
    gpu = union_intervals(np.clip(gpu_rows, t0, t1) if measured else gpu_rows)
    cpu_busy = float((cpu[1] - cpu[0]).sum())
    gpu_busy = float((gpu[1] - gpu[0]).sum())
    both = float(_overlap(cpu, gpu))
    parts = {
        "total_us": total,
        "cpu_only_us": cpu_busy - both,
        "gpu_only_us": gpu_busy - both,
        "cpu_gpu_overlap_us": both,
        "idle_us": max(0.0, total - cpu_busy - gpu_busy + both),
    }
    if measured <= 1:
        return parts
    scale = timeline.step_us() / total if total else 0.0  # the median step's share of each part (Timeline.step_scale)
    return {k: v * scale for k, v in parts.items()}


class PathTask(msgspec.Struct, frozen=True):
    """One task of the critical path, as a reader wants it: which task (``node``: its id in the graph; ``index``: in
    the timeline), what it is, where and when it ran, and how long it holds the path (its run, then the gap or wait
    until it releases the next task; these add up to the path's length)."""

    index: int
    node: Any
    name: str
    kind: str
    thread: str  # the CPU thread or GPU stream it ran on
    rank: int | None
    phase: str | None
    layer: str | None
    start_us: float
    duration_us: float
    holds_us: float
    kernel_class: str | None = None  # a GPU kernel's class (gemm, conv, ...); None for other tasks


class CriticalPathTasks(list):  # type: ignore[type-arg]
    """The critical path's tasks, first to last (a list of :class:`PathTask`), with what a reader asks of it: how long
    it is (:meth:`length_us`), where it goes (:meth:`by`: the time it holds by name, kind, phase, layer or kernel
    class, largest first), and a repr of one screen."""

    def length_us(self) -> float:
        """The path's length: what its tasks hold of it, added up."""
        return float(sum(t.holds_us for t in self))

    def by(self, attribute: str = "name", top: int | None = None) -> dict[str, float]:
        """The time the path's tasks hold it, summed by ``attribute`` of theirs (``name``, ``kind``, ``phase``,
        ``layer``, ``thread``; ``class``: a GPU kernel's class), largest first; the ``top`` largest where given."""
        out: dict[str, float] = {}
        for t in self:
            value = getattr(t, attribute, None) if attribute != "class" else t.kernel_class
            key = "-" if value is None else str(value)  # (no layer, no class: "-", as the tables say it)
            out[key] = out.get(key, 0.0) + t.holds_us
        ranked = sorted(out.items(), key=lambda kv: -kv[1])
        return dict(ranked if top is None else ranked[:top])

    def __repr__(self) -> str:
        if not self:
            return "CriticalPathTasks(no tasks)"
        top = ", ".join(f"{k[:60]} {ms(v)}" for k, v in self.by("name", 3).items())
        layers = ", ".join(f"{k[:60]} {ms(v)}" for k, v in self.by("layer", 3).items())
        return (
            f"CriticalPathTasks({len(self):,} tasks holding {ms(self.length_us())}; by name: {top}; by layer: "
            f"{layers}; .by('phase' | 'layer' | 'class' | 'kind' | 'name') for the rest)"
        )


def critical_path(timeline: Timeline) -> CriticalPathTasks:
    """The tasks on the critical path, first to last: the chain of tasks whose ends fixed the next one's start, back
    from the last task to end (:func:`critical_path_indices` gives their indices alone), with the time they hold by
    name, layer, phase or kernel class (:meth:`CriticalPathTasks.by`)."""
    path = critical_path_indices(timeline)
    held = critical_path_segments(timeline, path)
    out = []
    for i, holds in zip(path, held):
        a = timeline.task_attrs[i]
        start, end = float(timeline.start[i]), float(timeline.end[i])
        out.append(
            PathTask(
                index=i,
                node=timeline.nodes[i],
                name=str(a.get("name", "")),
                kind=str(a.get("kind", "")),
                thread=str(a.get("thread", "")),
                rank=a.get("rank"),
                phase=a.get("phase"),
                layer=a.get("layer"),
                start_us=start,
                duration_us=end - start,
                holds_us=holds,
                kernel_class=a.get("class"),
            )
        )
    return CriticalPathTasks(out)


def critical_path_indices(timeline: Timeline, last: int | None = None) -> list[int]:
    """Indices of the tasks on the critical path, first to last: the path to the task that ends last, or to
    ``last`` (a job's slowest rank's last task: the path of the job's step)."""
    if not len(timeline.nodes):
        return []
    i = int(np.argmax(timeline.end)) if last is None else int(last)
    cause = timeline.cause.tolist()
    path = []
    seen = bytearray(len(cause))  # causes that loop (a timeline built by hand) end where they first come back
    while i >= 0 and not seen[i]:
        seen[i] = 1
        path.append(i)
        i = cause[i]
    path.reverse()
    return path


def totals(
    timeline: Timeline,
    by: str,
    indices: list[int] | None = None,
    kinds: frozenset[str] = GPU_KINDS,
    times: list[float] | None = None,
) -> dict[str, float]:
    """Summed duration of tasks of ``kinds`` grouped by attribute ``by`` (phase, layer, class, name, ...).

    ``times`` (parallel to ``indices``) replaces the tasks' durations, e.g. with critical-path segments.
    """
    return totals_by(timeline, (by,), indices, kinds, times)[by]


def totals_by(
    timeline: Timeline,
    bys: tuple[str, ...],
    indices: list[int] | None = None,
    kinds: frozenset[str] = GPU_KINDS,
    times: list[float] | None = None,
    scale: float = 1.0,
) -> dict[str, dict[str, float]]:
    """:func:`totals` for each attribute of ``bys``, in one pass over the tasks; each total times ``scale`` (one
    step's share of a window of several: :meth:`Timeline.step_scale`)."""
    kind, kind_values = timeline.codes("kind")
    if indices is None:
        ix = np.asarray(timeline.tasks_of(kinds), np.int64)
    else:
        given = np.asarray(indices, np.int64)
        keep = np.flatnonzero(np.isin(kind[given], _codes_of(kind_values, kinds)))
        ix = given[keep]
        times = None if times is None else np.asarray(times, np.float64)[keep]
    # the same floats as end - start one task at a time
    weights = timeline.end[ix] - timeline.start[ix] if times is None else np.asarray(times, np.float64)
    result = {}
    for by in bys:
        # each key's index in order of first appearance, its times summed in task order (np.bincount adds them in the
        # order given: the same sums, bit for bit, as adding them one by one)
        codes, code_of = key_codes(timeline, by, ix)
        sums = np.bincount(codes, weights=weights, minlength=len(code_of)).tolist() if len(codes) else []
        if scale != 1.0:
            sums = [x * scale for x in sums]
        result[by] = dict(sorted(zip(code_of, sums), key=lambda kv: -kv[1]))
    return result


def key_codes(timeline: Timeline, by: str, ix: np.ndarray) -> tuple[np.ndarray, dict[str, int]]:
    """The tasks ``ix``'s values of ``by`` as keys (text; none: "-"; else its text), numbered in order of first
    appearance: (the numbers, key -> number). Only these tasks' values are read: a summary's tasks (the GPU tasks,
    the critical path) are often a small part of the graph."""
    code_of: dict[str, int] = {}
    chosen = timeline.values(by, tasks=ix.tolist())
    try:
        distinct = dict.fromkeys(chosen)
    except TypeError:  # a value that is not hashable (a list): its text is the key
        distinct = None
    if distinct is None or not all(type(v) is str or v is None for v in distinct):
        # values that a dict holds as one but show as different text (1, 1.0, True): one task at a time
        keys = [k if type(k) is str else "-" if k is None else str(k) for k in chosen]
        return np.asarray([code_of.setdefault(k, len(code_of)) for k in keys], np.int64), code_of
    number = {v: code_of.setdefault(v if v is not None else "-", len(code_of)) for v in distinct}
    return np.fromiter(map(number.__getitem__, chosen), np.int64, len(chosen)), code_of


def critical_path_segments(timeline: Timeline, path: list[int]) -> list[float]:
    """Time each critical-path task holds the path: from its start to the next path task's start (its run,
    then the gap or delay until it releases the next), the last task its duration."""
    if not path:
        return []
    starts = timeline.start[path]
    # each the same float as starts[b] - starts[a], one pair at a time
    return [*np.diff(starts).tolist(), float(timeline.end[path[-1]]) - float(starts[-1])]
