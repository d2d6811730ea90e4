"""Trace -> kernel-level dependency graph (a ``networkx.DiGraph``), as in the Daydream paper, section 4.

Tasks and dependencies carry the attributes of :mod:`daydream.graph.schema` (docs/graph.md explains each). The build
runs in stages over plain data, a :class:`~daydream.graph.build.table.TaskTable` of parallel columns, each a module of
its own: the CPU tasks (:mod:`~daydream.graph.build.cpu`), the GPU tasks (:mod:`~daydream.graph.build.gpu`), the
dependencies the trace gives evidence of (:mod:`~daydream.graph.build.edges`), and their delays
(:mod:`~daydream.graph.build.delays`), measured so that simulating the unmodified graph reproduces the trace. This
module runs them, assigns the tasks to steps and phases, and cuts the graph of the selected steps.
"""

from __future__ import annotations

import math
import re
import statistics
from typing import Any, NamedTuple

import msgspec
import networkx as nx
import numpy as np

from daydream import progress
from daydream._gc import paused_gc
from daydream._heap import trim_heap
from daydream.errors import TraceError
from daydream.graph.adjacency import EdgeArrays, TaskColumns, TaskGraph, fill_arrays
from daydream.graph.build.cpu import cpu_tasks
from daydream.graph.build.delays import measure_delays, split_backward_gaps, split_loader_gaps
from daydream.graph.build.edges import (
    backward_waits,
    copy_wait_edges,
    infers_stream_waits,
    loader_waits,
    order_edges,
    queue_waits,
    sync_edges,
)
from daydream.graph.build.gpu import gpu_tasks
from daydream.graph.build.table import TaskTable
from daydream.graph.memory import attach_memory
from daydream.graph.schema import (
    CPU_KINDS,
    EDGE_KIND_NUMBER,
    EDGE_KINDS,
    GPU_KINDS,
    ORDER_KINDS,
    Causality,
    Delays,
    ExecutionTraceUse,
    StepInfo,
    Task,
)
from daydream.trace.model import Trace
from daydream.trace.steps import Step, default_step, iteration_steps, select_steps

__all__ = ["build_graph"]

# The steps simulated before a measured step, so that it starts with what they left pending: where the CPU runs
# ahead of the GPU, a step after one cold step can still start with a shorter queue than the trace had (resnet_kineto's
# iteration#9: +37% after one step, exact after two)
CONTEXT_STEPS = 2
# A task with no dependency in the graph that started this long after the window did has an unexplained start.
UNANCHORED_TOLERANCE_US = 1.0
# A CUDA / HIP runtime or driver call that costs the host this long after any wait is not a steady step's: a launch
# takes microseconds. The calls that block on the device by design (syncs, copies, queries, waits) are left out.
SLOW_RUNTIME_CALL_US = 1000.0
_RUNTIME_CALL = re.compile(r"^(cuda|cu|hip)[A-Z]")
_BLOCKING_CALL = re.compile(r"Synchronize|Memcpy|Memset|Query|Wait|\[wait\]")


@paused_gc()
def build_graph(trace: Trace, step: str | int | None = None, *, context: bool = True, release_events: bool = False) -> nx.DiGraph:
    """The dependency graph of the selected step(s) of ``trace``: a task per CPU op, runtime call and GPU kernel or
    copy, a dependency per ordering the trace shows.

    Parameters
    ----------
    trace : Trace
        A loaded trace (:func:`~daydream.trace.load_trace`).
    step : str or int, optional
        ``None`` picks a steady-state step; ``"all"`` every ProfilerStep in one graph; ``N`` or ``"ProfilerStep#N"``
        that step; any other string names an annotation whose range is the window.
    context : bool, optional
        True (default): the steps before the step are in the graph, as its context (Notes); False: the step alone,
        started with nothing pending (a cold start; its time is its span).
    release_events : bool, optional
        Empty each of the trace's event lists as soon as the build has read it, for a caller that drops the trace
        after: the tasks and dependencies that follow are then made in the memory the events held.

    Returns
    -------
    networkx.DiGraph
        Tasks (their attributes: ``kind``, ``name``, ``thread``, ``duration``, ...) and dependencies (``kind``);
        ``graph.graph`` holds the steps (``steps``), the device and the measured periods.

    Raises
    ------
    TraceError
        No such step, or no tasks in it.

    Notes
    -----
    A step is simulated after the CONTEXT_STEPS steps before it, its context, so that it starts with the work the
    trace had pending (a CPU that runs ahead of its GPU leaves kernels queued): the step's time is its period, from
    the end of the step before to its own end, as a training run pays it. The graph holds them all;
    ``graph.graph["steps"]`` marks the context steps (``context: True``), and a script changes them as it changes the
    rest (the steady state). With
    ``"all"`` the first step is the context of the others, and the step time is the median of their periods.

    Examples
    --------
    >>> from daydream import build_graph, bundled_example, load_trace
    >>> graph = build_graph(load_trace(bundled_example()), step=3)
    >>> graph.number_of_nodes(), [s.name for s in graph.graph["steps"]]
    (260, ['ProfilerStep#2', 'ProfilerStep#3'])
    """
    steps = select_steps(trace, "all" if step is None else step)
    # the trace's iterations all numbered by step where the window is one of them: their measured periods are the
    # trace's own step-to-step noise (graph.graph["steady_periods_us"]), whichever step the graph holds
    iterations = iteration_steps(trace)
    numbered = iterations if iterations and all(s in iterations for s in steps) else steps
    if step is not None and len(steps) == 1 and context:
        steps = _with_context(iterations, steps[0])
    what = f"{len(steps)} steps" if step == "all" and len(steps) > 1 else "the step"
    # the stages below, counted: a graph of every step of a big trace takes a while, stage by stage
    with progress.task(f"building the graph of {what} ({trace.event_count:,} events)", total=_STAGES) as advance:
        table = TaskTable()
        calls = cpu_tasks(trace, table)
        if release_events:  # each family once its last reader is done, so that the tasks and edges that follow
            trace.release("cpu_ops", "annotations", "gpu_annotations")  # are made in the memory it held
            trim_heap()  # columns' arrays freed to the heap: its pages handed back, for the tasks to come
        advance(1)
        copy_waits = gpu_tasks(trace, table, calls)
        if release_events:
            trace.release("gpu")
        advance(1)
        if not len(table):
            raise TraceError(f"{trace.path}: the trace holds no CPU runtime calls, CPU ops or GPU activity to simulate", path=trace.path)
        table.set_all("duration", [t1 - t0 for t0, t1 in zip(table.ts, table.end)])
        threads = order_edges(table)
        copy_wait_edges(table, copy_waits, threads)
        sync_edges(trace, table, calls.corr_task, threads)
        queue_waits(table, threads, calls.long_calls)
        infer_waits = infers_stream_waits(trace)
        if release_events:  # the stages below read the table only
            trace.release("runtime", "syncs")
            trace.cpu_columns = None  # (the runtime calls' columns: read by the two stages above)
            trim_heap()
        advance(1)
        waits_in_backward = backward_waits(table, threads)
        waits_for_batches = loader_waits(table, calls.loader_ranges, threads, trace.rank)
        advance(1)
        l0, g0 = measure_delays(table, threads, infer_waits)
        split_backward_gaps(table, waits_in_backward)
        split_loader_gaps(table, waits_for_batches)
        advance(1)
        task_steps = assign_steps(table, numbered)
        finish_phases(table, task_steps.of, threads, calls.fwd_seq, calls.bwd_seq)
        busy = _busy(task_steps)  # once: a set per step made a trace of many steps quadratic (17 s of 95 at 10M events)
        if step is None:
            steps = _choose_default(steps, busy)
            steps = steps if context else steps[-1:]
        context_steps = _context_of(steps, busy, step is None or str(step).strip() not in ("all", "trace")) if context else set()
        advance(1)
        graph = _cut(trace, table, steps, task_steps, Delays(l0, g0, infer_waits), context_steps, threads)
        graph.graph["steady_periods_us"] = steady_periods(table, numbered, task_steps, busy)
        # the allocator's events tied to the window's tasks: the step's memory (daydream.graph.memory)
        attach_memory(graph, trace.memory, graph.graph["device_properties"].get("totalGlobalMem"))
        advance(1)
        return graph


_STAGES = 7  # build_graph's stages as its progress counts them


class TaskSteps(NamedTuple):
    """Each task's step: by name (``of``, None: of no step), and as a number (``code``; ``number`` numbers the names,
    None too), for the stages that count over arrays."""

    of: list[str | None]
    code: np.ndarray
    number: dict[str | None, int]


def assign_steps(table: TaskTable, steps: list[Step]) -> TaskSteps:
    """Each task's step: a CPU task's is the step window it starts in, a GPU task's its launch call's (one without a
    launch: the window it starts in); None outside every window."""
    names: list[str | None] = list(dict.fromkeys(s.name for s in steps))
    names.append(None)
    number = {name: i for i, name in enumerate(names)}
    ts = np.asarray(table.ts, np.float64)
    # the window a task starts in: the last one starting at or before it (the steps are in order of start), if the
    # task starts before that one's end
    i = np.searchsorted(np.asarray([s.start for s in steps], np.float64), ts, side="right") - 1
    inside = np.flatnonzero(i >= 0)
    inside = inside[ts[inside] < np.asarray([s.end for s in steps], np.float64)[i[inside]]]
    del ts
    code = np.full(len(table), number[None], np.int32)
    code[inside] = np.asarray([number[s.name] for s in steps], np.int32)[i[inside]]
    del i, inside
    # launch calls are CPU tasks: their steps are set above
    launcher = np.asarray(table.launcher, np.int64)
    gpu = np.fromiter(map(GPU_KINDS.__contains__, table.column("kind")), np.bool_, len(table))
    launched = np.flatnonzero(gpu & (launcher >= 0))
    code[launched] = code[launcher[launched]]
    return TaskSteps(list(map(names.__getitem__, code.tolist())), code, number)


def finish_phases(
    table: TaskTable, step_of: list[str | None], threads: dict[str, list[int]], fwd_seq: dict[int, int], bwd_seq: dict[int, int]
) -> None:
    """A task no range gave a phase is in the forward pass before its step's first backward task, or in a later
    micro-batch's forward pass (:func:`later_forward_passes`); between the end of its step's backward pass and its
    optimizer step, in the weight update (``optimizer``: gradient clipping, AMP's unscaling, which run once per
    optimizer step); in ``other`` after the backward pass began otherwise. A kernel is in the phase its launch call
    was in: when the CPU issued it, not when it ran."""
    first_bwd: dict[str | None, float] = {}
    last_bwd: dict[str | None, float] = {}
    first_opt: dict[str | None, float] = {}
    kind, phase = table.column("kind"), table.column("phase")
    for task, (k, p) in enumerate(zip(kind, phase)):
        if k not in CPU_KINDS:
            continue
        key, t0 = step_of[task], table.ts[task]
        if p == "backward":
            first_bwd[key] = min(first_bwd.get(key, t0), t0)
            last_bwd[key] = max(last_bwd.get(key, t0), table.end[task])
        elif p == "optimizer":
            first_opt[key] = min(first_opt.get(key, t0), t0)
    later = later_forward_passes(table, step_of, threads, fwd_seq, bwd_seq, first_bwd, last_bwd)
    for task, p in enumerate(phase):
        if p is None:
            key = step_of[task]
            limit = first_bwd.get(key)
            issued = table.launch_ts[task]
            if limit is None or issued < limit or task in later:
                phase[task] = "forward"
            elif last_bwd[key] <= issued < first_opt.get(key, -math.inf):
                phase[task] = "optimizer"
            elif later and kind[task] in GPU_KINDS and table.launcher[task] in later:
                phase[task] = "forward"
            else:
                phase[task] = "other"


def later_forward_passes(
    table: TaskTable,
    step_of: list[str | None],
    threads: dict[str, list[int]],
    fwd_seq: dict[int, int],
    bwd_seq: dict[int, int],
    first_bwd: dict[str | None, float],
    last_bwd: dict[str | None, float],
) -> set[int]:
    """The CPU tasks of the forward passes that run after a backward pass of their step began (gradient accumulation:
    micro-batch 2's forward pass after micro-batch 1's backward pass).

    Evidence, not timing: such a pass holds ops whose autograd nodes a later backward pass of the step evaluated
    (the same sequence number). On their thread, the pass is the run of tasks no range gave a phase around those ops
    (the batch's copy to the device, the loss), as the first micro-batch's forward pass is all that comes before
    the backward pass; a thread that only polls while the backward pass runs (NCCL's watchdog querying events
    during DDP's backward) holds no such op and stays in ``other``."""
    evaluated = {(step_of[t], seq) for t, seq in bwd_seq.items()}
    phase, ts = table.column("phase"), table.ts

    def in_backward_span(task: int) -> bool:
        key = step_of[task]
        return phase[task] is None and key in first_bwd and first_bwd[key] <= ts[task] < last_bwd[key]

    anchors = {t for t, seq in fwd_seq.items() if (step_of[t], seq) in evaluated and in_backward_span(t)}
    if not anchors:
        return set()
    later: set[int] = set()
    thread_of = table.column("thread")
    for thread in {thread_of[t] for t in anchors}:
        run: list[int] = []
        for task in [*threads[thread], None]:
            if task is not None and in_backward_span(task) and (not run or step_of[run[0]] == step_of[task]):
                run.append(task)
                continue
            if any(t in anchors for t in run):
                later.update(run)
            run = [task] if task is not None and in_backward_span(task) else []
    return later


def _choose_default(steps: list[Step], busy: set[str | None]) -> list[Step]:
    """The steady-state step among the steps that hold work (``busy``), after the CONTEXT_STEPS steps before it (its
    context) where they hold work."""
    candidates = [s for s in steps if s.name in busy]
    if not candidates:
        return steps[-1:]
    chosen = default_step(candidates)
    i = candidates.index(chosen)
    return candidates[max(i - CONTEXT_STEPS, 0) : i + 1]


def steady_periods(table: TaskTable, steps: list[Step], task_steps: TaskSteps, busy: set[str | None]) -> list[float]:
    """The measured periods of the trace's steps that hold work (``busy``), but the first (its period starts with
    nothing before it): how much the trace's own steps vary, the noise a prediction's interval starts from."""
    held = [s for s in steps if s.name in busy]
    if len(held) < 2:
        return []
    selected = np.flatnonzero(np.isin(task_steps.code, [task_steps.number[s.name] for s in held])).tolist()
    starts = np.fromiter(map(table.ts.__getitem__, selected), np.float64, len(selected))
    return [p.measured_us for p in _step_periods(table, held, task_steps, selected, starts)[1:]]


def _busy(task_steps: TaskSteps) -> set[str | None]:
    """The steps that hold tasks (None where some task is of no step)."""
    names = list(task_steps.number)
    return {names[c] for c in np.flatnonzero(np.bincount(task_steps.code, minlength=len(names))).tolist()}


def _with_context(iterations: list[Step], step: Step) -> list[Step]:
    """A step named by ``--step`` with the CONTEXT_STEPS iterations before it, its context; a step with none before
    it (the first), or a window that is no iteration (an annotation, the whole trace), alone."""
    names = [s.name for s in iterations]
    if step.name not in names:
        return [step]
    i = names.index(step.name)
    return iterations[max(i - CONTEXT_STEPS, 0) : i + 1]


def _context_of(steps: list[Step], held: set[str | None], measured_last: bool) -> set[str]:
    """The steps that are context, not measured, so that every measured step starts with what the steps before it
    left pending: all but the last of the steps that hold work (``held``; ``measured_last``: the step asked for, or
    the default, after its context), else ("all") the first of several."""
    busy = [s.name for s in steps if s.name in held]
    if len(busy) < 2:
        return set()
    return set(busy[:-1]) if measured_last else {busy[0]}


def _device_properties(trace: Trace) -> dict[str, Any]:
    """What the trace says of its first GPU beyond the name (ROCm names every GPU alike; the SM count and memory
    tell them apart)."""
    if not trace.devices:
        return {}
    d = trace.devices[0]
    return {k: v for k, v in (("numSms", d.numSms), ("totalGlobalMem", d.totalGlobalMem)) if v is not None}


def _cut(trace: Trace, table: TaskTable, steps: list[Step], task_steps: TaskSteps, delays: Delays,
         context: set[str] | frozenset[str], threads: dict[str, list[int]]) -> nx.DiGraph:
    """The graph of the selected steps' tasks, with the work outside them finished before they start.

    Dependencies on tasks outside the window are dropped rather than turned into absolute release times: a task's
    start is explained by the graph alone (its parents, its thread, the delays measured on them), so a change to the
    step moves all of it. What held the window back in the trace (the previous step's kernels still queued, a
    thread idle since the step before) is reported in ``graph.graph["causality"]``, with the tasks whose start nothing
    in the graph explains."""
    chosen = {s.name for s in steps}
    number = task_steps.number
    held = np.flatnonzero(np.isin(task_steps.code, [number[name] for name in chosen if name in number]))
    # in order of start, those that start together in task order (a stable sort, as sorted() is)
    starts = np.fromiter(map(table.ts.__getitem__, held.tolist()), np.float64, len(held))
    order = np.argsort(starts, kind="stable")
    held, starts = held[order], starts[order]
    del order
    selected = held.tolist()
    if not selected:
        names = ", ".join(sorted(chosen))
        raise TraceError(f"{trace.path}: no tasks in the selected step ({names})", path=trace.path)
    origin = table.ts[selected[0]]  # the first start: selected is in order of start
    window = np.full(len(table), -1, np.int64)  # a task's number in the window, -1 outside it
    window[held] = np.arange(len(selected))
    edges, causality = _window_edges(table, held, window, origin, threads)
    del window
    tasks, pinned = _window_tasks(table, held, selected, starts - origin, table.gap[held].tolist(), task_steps.of, origin)  # type: ignore[index]
    g = TaskGraph()
    # numbered in order of start; the tasks' and the dependencies' dicts made only when read
    fill_arrays(g, tasks, edges)
    step_info = [
        msgspec.structs.replace(s, context=s.name in context) for s in _step_periods(table, steps, task_steps, selected, starts)
    ]
    measured = [s.measured_us for s in step_info if not s.context]
    g.graph.update(
        trace=trace.path, rank=trace.rank, world_size=trace.world_size, device=trace.device_name,
        device_properties=_device_properties(trace),
        origin_us=origin, steps=step_info, delays=delays, warnings=list(trace.warnings) + slow_runtime_calls(_long_calls(tasks, context)),
        measured_us=statistics.median(measured) if measured else math.nan, recording=trace.recording,
        execution_trace=ExecutionTraceUse(trace.et_path, len(trace.et_ops)) if trace.et_path else None,
        causality=msgspec.structs.replace(causality, pinned_tasks=pinned),
    )
    return g


def slow_runtime_calls(tasks: list[Task]) -> list[str]:
    """A warning where the window holds runtime calls of SLOW_RUNTIME_CALL_US or more of their own time: a first
    iteration's one-time setup (CUDA context creation, lazy module loading in a first launch, the caching allocator
    growing) or a stalled host. They are kept as traced; a what-if that removes CPU work removes them with it."""
    slow = [a for a in tasks if a["kind"] == "cpu" and a["duration"] >= SLOW_RUNTIME_CALL_US
            and _RUNTIME_CALL.match(a["name"]) and not _BLOCKING_CALL.search(a["name"])]
    if not slow:
        return []
    slow.sort(key=lambda a: -a["duration"])
    total = sum(a["duration"] for a in slow)
    top = ", ".join(f"{a['name']} {_duration(a['duration'])}" for a in slow[:3])
    return [
        f"{len(slow)} runtime call{'s' if len(slow) > 1 else ''} of the step took {_duration(total)} of host time "
        f"({top}{', ...' if len(slow) > 3 else ''}), where a launch takes microseconds: one-time setup or a stalled "
        f"host, not a steady-state step; kept as traced. Record a later step (torch.profiler's schedule with warmup)"
    ]


def _duration(us: float) -> str:
    return f"{us / 1e6:.2f} s" if us >= 1e6 else f"{us / 1e3:.1f} ms"


def _window_tasks(table: TaskTable, held: np.ndarray, selected: list[int], starts: np.ndarray, gaps: list[float],
                  step_of: list[str | None], origin: float) -> tuple[TaskColumns, int]:
    """The selected tasks' attributes (``held``: ``selected`` as an array), with their step, their ``gaps`` and their
    times from the window's origin (``starts``: their starts so); and how many have a release time. The table's
    columns are the graph's, each gathered in the window's order when first read (a graph of most of the table:
    gathering those a replay does not read costs more than keeping them), or, for a window of a small part of the
    table, gathered now (the rest of the table freed)."""
    own = {"start": starts.tolist(), "gap": gaps, "step": list(map(step_of.__getitem__, selected))}
    release = own["release"] = list(map(table.column("release").__getitem__, selected))
    pinned = [w for w, r in enumerate(release) if r is not None]
    for w in pinned:
        release[w] = release[w] - origin
    # each task's keys: "start" and "step" after those it has, as setting them on its dict would order them
    orders = [(*k, *(x for x in ("start", "step") if x not in k)) for k in table.orders]
    codes = table.order_codes[held]
    columns = {key: column for key, column in table.columns.items() if key not in own}
    tasks = TaskColumns(own, columns, selected, codes, orders)
    if 2 * len(selected) < len(table):
        tasks = TaskColumns({key: tasks.column(key) for key in {*own, *columns}}, {}, [], codes, orders)  # type: ignore[misc]
    return tasks, len(pinned)


def _long_calls(tasks: TaskColumns, context: set[str] | frozenset[str]) -> list[Task]:
    """The attributes slow_runtime_calls reads of the tasks outside the context steps that may be slow runtime calls
    (CPU tasks of SLOW_RUNTIME_CALL_US or more), in task order."""
    kind, duration, name, step = (tasks.values(k) for k in ("kind", "duration", "name", "step"))
    return [
        {"kind": kind[i], "duration": duration[i], "name": name[i]}  # type: ignore[typeddict-item]
        for i in range(len(tasks))
        if kind[i] == "cpu" and duration[i] >= SLOW_RUNTIME_CALL_US and step[i] not in context
    ]


def _window_edges(table: TaskTable, selected: np.ndarray, window: np.ndarray, origin: float,
                  threads: dict[str, list[int]]) -> tuple[EdgeArrays, Causality]:
    """Each selected task's parents among the selected tasks (a task whose every dependency the cut dropped keeps its
    fallback, if it has one inside), and what the cut leaves unexplained: how long work outside the window held
    tasks back in the trace, and the tasks with no dependency left that started after the window did.

    A thread (or stream) that ran work outside the window between two of its tasks inside it (the tasks between the
    steps of ``--step all``) keeps its order across that work: the task after it follows the thread's last task
    before it, whose gap becomes the whole stretch, as the trace shows it. Without that order the task after the
    stretch would start with the window, alongside the thread's first tasks.

    Over arrays, as a loop over the selected tasks (in order of start) and their dependencies (in order) would go:
    a task's parents in the order first met, a parent met twice keeping the dependency met last (an order kept
    across the window's gaps only where the parent was not met yet)."""
    deps, gap = table.dependencies, table.gap
    assert deps is not None and gap is not None  # (measure_delays ran)
    ts, end = np.asarray(table.ts), np.asarray(table.end)
    n = len(selected)
    # each selected task's thread (a number), and the selected task before it on that thread (-1: none)
    thread_of = np.full(len(table), -1, np.int64)
    for i, tasks in enumerate(threads.values()):
        thread_of[tasks] = i
    on = thread_of[selected]
    assert on.min() >= 0  # (order_edges put every task on its thread, as have the stages that add tasks since)
    by_thread = np.argsort(on, kind="stable")
    same = on[by_thread[1:]] == on[by_thread[:-1]]
    before = np.full(n, -1, np.int64)
    before[by_thread[1:][same]] = by_thread[:-1][same]
    # a thread that runs no op only polls (NCCL's watchdog querying events): when it starts holds nothing back
    op, kind = table.column("op"), table.column("kind")
    busy = np.fromiter((op[t] is not None or kind[t] not in CPU_KINDS for t in selected.tolist()), np.bool_, n)
    working = np.zeros(len(threads), np.bool_)
    working[on[busy]] = True
    working_task = working[on]
    # the selected tasks' dependencies that hold, task by task (w: the task's number in the window)
    first, count = deps.ptr[selected], deps.ptr[selected + 1] - deps.ptr[selected]
    e = np.repeat(first - (np.cumsum(count) - count), count) + np.arange(int(count.sum()))
    w = np.repeat(np.arange(n), count)
    e, w = e[deps.holds[e]], w[deps.holds[e]]
    kind, parent = deps.kind[e], deps.parent[e]
    order = np.isin(kind, [EDGE_KIND_NUMBER[k] for k in ORDER_KINDS])
    inside = window[parent] >= 0
    cut = ~inside
    bridged = cut & order & (before[w] >= 0)
    # the thread's last task before the work outside: its gap is the whole stretch
    gap[selected[before[w[bridged]]]] = ts[selected[w[bridged]]] - end[selected[before[w[bridged]]]]
    ready = np.flatnonzero(cut & ~bridged & working_task[w])
    held_back = end[parent[ready]] + np.where(order[ready], gap[parent[ready]], deps.lag[e[ready]]) - origin
    kinds, first_cut, cut_count = np.unique(kind[cut], return_index=True, return_counts=True)
    cut_edges = {EDGE_KINDS[k]: c for _, k, c in sorted(zip(first_cut.tolist(), kinds.tolist(), cut_count.tolist()))}
    # the window's edges: the dependencies inside, the orders kept across the work outside, then the fallbacks
    kept = inside | bridged
    child, parents = w[kept], np.where(inside, window[parent], before[w])[kept]
    kinds_kept, lag, has_lag = kind[kept], deps.lag[e[kept]], (inside & ~order)[kept]
    weak = bridged[kept]  # (an order kept across the work outside gives way to a dependency on the same task)
    anchored = np.bincount(child, minlength=n) > 0
    fallback = [(int(window[t]), int(window[f.parent]), f) for t, f in table.fallback_edges.items()
                if window[t] >= 0 and window[f.parent] >= 0 and not anchored[window[t]]]
    if fallback:
        at = np.array([x for x, _, _ in fallback], np.int64)
        anchored[at] = True
        child = np.concatenate([child, at])
        parents = np.concatenate([parents, [p for _, p, _ in fallback]])
        kinds_kept = np.concatenate([kinds_kept, [EDGE_KIND_NUMBER[f.kind] for _, _, f in fallback]])
        lag = np.concatenate([lag, [f.lag for _, _, f in fallback]])
        has_lag = np.concatenate([has_lag, np.ones(len(fallback), np.bool_)])
        weak = np.concatenate([weak, np.zeros(len(fallback), np.bool_)])
    lead = ts[selected] - origin
    unanchored = np.flatnonzero(~anchored & (lead > UNANCHORED_TOLERANCE_US) & working_task)
    lead_us = 0.0
    for x in lead[unanchored].tolist():  # summed in order, as the tasks are met
        lead_us += x
    causality = Causality(
        unanchored_tasks=len(unanchored),
        unanchored_lead_us=lead_us,
        cut_edges=cut_edges,
        held_back_us=max(0.0, held_back.max().item()) if len(held_back) else 0.0,
        bridged_orders=int(bridged.sum()),
    )
    return _first_met(n, child, parents, kinds_kept, lag, has_lag, weak), causality


def _first_met(tasks: int, child: np.ndarray, parent: np.ndarray, kind: np.ndarray, lag: np.ndarray, has_lag: np.ndarray,
               weak: np.ndarray) -> EdgeArrays:
    """The edges given (in order of their children, then met), as a dict per child would hold them: a parent met
    twice keeps its first place and the edge met last, unless that edge is ``weak`` (an edge only added where its
    parent was not met yet)."""
    order = np.argsort(child, kind="stable")
    child, parent, kind, lag, has_lag, weak = child[order], parent[order], kind[order], lag[order], has_lag[order], weak[order]
    key = child * tasks + parent  # (parents are tasks too: below ``tasks``)
    by_key = np.argsort(key, kind="stable")  # each pair's edges in the order met
    starts = np.flatnonzero(np.r_[True, key[by_key][1:] != key[by_key][:-1]])
    if len(starts) < len(key):  # a parent met twice: its first place, and the last edge met that is not weak
        place = by_key[starts]
        last_strong = np.maximum.reduceat(np.where(weak[by_key], -1, by_key), starts)
        source = np.where(last_strong >= 0, last_strong, place)
        in_order = np.argsort(place)
        place, source = place[in_order], source[in_order]
        child, parent, kind, lag, has_lag = child[place], parent[place], kind[source], lag[source], has_lag[source]
    ptr = np.zeros(tasks + 1, np.int64)
    np.cumsum(np.bincount(child, minlength=tasks), out=ptr[1:])
    lag = np.where(has_lag, lag, 0.0)  # (EdgeArrays.lag holds 0 where an edge has no lag)
    return EdgeArrays(ptr, parent.astype(np.int64), kind.astype(np.int8), lag.astype(np.float64), has_lag.astype(np.bool_))


def _step_periods(table: TaskTable, steps: list[Step], task_steps: TaskSteps, selected: list[int],
                  starts: np.ndarray) -> list[StepInfo]:
    """Each selected step's measured time as a period: from the end of the work issued before it (the step before)
    to its own end, or from its first start where that work had ended by then. Where the CPU runs ahead of the GPU a
    step's span (its first CPU task to its last kernel) holds several periods; the period is what a training run
    pays per step. ``starts``: the selected tasks' traced starts."""
    # over arrays, a step a number: the traced times are finite (the loader drops an event without), so each
    # minimum and maximum is the one a loop over the tasks finds. Only the selected tasks' times are made arrays (the
    # graph is at its largest here: at 10M events a float array of every task is 26 MB)
    code = task_steps.code
    names = list(task_steps.number)
    sel_code = code[selected]
    n = len(selected)
    lowest = np.full(len(names), math.inf)
    highest = np.full(len(names), -math.inf)
    np.minimum.at(lowest, sel_code, starts)
    np.maximum.at(highest, sel_code, np.fromiter(map(table.end.__getitem__, selected), np.float64, n))
    held = np.zeros(len(names), np.bool_)
    held[sel_code] = True
    del sel_code
    lows, highs = lowest.tolist(), highest.tolist()
    first = {names[c]: lows[c] for c in np.flatnonzero(held).tolist()}
    last = {names[c]: highs[c] for c in np.flatnonzero(held).tolist()}
    chosen = [s for s in steps if s.name in first]
    chosen.sort(key=lambda s: last[s.name])
    window = min(s.start for s in chosen)
    # the work issued before the window, of no step selected: where it ended last
    end, launch_ts = table.end, table.launch_ts
    others = np.flatnonzero(~held[code]).tolist()
    del code
    before = max((end[t] for t in others if launch_ts[t] < window), default=-math.inf)
    out = []
    begin = max(before, first[chosen[0].name])
    for s in chosen:
        out.append(StepInfo(s.name, last[s.name] - begin, last[s.name] - first[s.name]))
        begin = last[s.name]  # the next step's period counts the idle time between the two: the graph holds it
    return out
