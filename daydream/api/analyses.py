"""The across-stack analyses of XSP (Li et al.) over a simulated timeline: what ``daydream report`` shows.

- **Layers** are the framework's operators, XSP's layer level: each instance of a top-level op (``aten::conv2d``
  with every op and kernel under it, ``top_op_id``). A layer's time in the step is its time on the step's critical
  path: each moment of the step is held by one task of the path, and that task's layer owns it, so the rows (with
  ``(outside any layer)`` for the tasks of none) add up to the step. Beside it, its kernels' time summed over
  streams, its CPU tasks' time summed over threads, and an instance's mean span (its first task's start to its last
  task's end; under asynchronous execution the spans of successive layers overlap, so they are not summed: XSP's
  layer latency adds up only where the GPU runs each layer before the CPU issues the next). The table aggregates
  instances by op and phase. Where the trace records modules (``layer``), the same table by module.
- **Kernels** aggregated by name and by layer: count, time, share of GPU time, kernel class, and the roofline class
  where the op's shapes give its cost (FLOPs and bytes, summed over the kernels before the ratio, as XSP does): memory-
  bound when bytes / bandwidth exceeds FLOPs / peak on the trace's GPU.
- **Streams**: each GPU stream's busy and idle time over the step.
- **Verdict**: one line, from the critical path and the breakdown (``CPU-bound: the GPU is busy 23% of the step``).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import msgspec
import numpy as np

from daydream.api.replay import CriticalPath, critical_path_summary, release_time, step_critical_path
from daydream.graph.schema import CPU_KINDS, GPU_KINDS
from daydream.perf.kernels.devices import device_of_graph
from daydream.perf.kernels.roofline import compute_peak, observations
from daydream.simulation import Timeline, breakdown
from daydream.simulation.timeline import union_intervals
from daydream.units import brief_repr


class LayerRow(msgspec.Struct):
    """Instances of one layer (op or module) in one phase, over the step (one step's share where the window holds
    several measured steps: :meth:`~daydream.simulation.Timeline.step_scale`)."""

    name: str
    phase: str
    instances: int  # in the measured steps
    critical_us: float  # its time on the step's critical path: the rows of a table add up to the step
    critical_gpu_us: float  # of which its kernels hold the path (the rest: its CPU tasks)
    gpu_us: float  # its kernels' time, summed over streams
    cpu_us: float  # its CPU tasks' time, summed over threads
    span_us: float  # an instance's mean span: first task's start to last task's end (spans of layers overlap)
    kernels: int


OUTSIDE = "(outside any layer)"  # the layer row of the critical path's tasks that belong to none
RELEASE = (  # the row of the step's time before its path's first task began
    "(before the path's first task: a late start)"
)


class KernelRow(msgspec.Struct):
    """Kernels of one name (or of one layer), summed."""

    name: str
    kernel_class: str
    count: int  # in the measured steps
    total_us: float  # over the step, summed over streams
    mean_us: float  # one kernel's
    share_pct: float  # of the timeline's GPU time
    flops: float | None  # where shapes give a cost (else None)
    bytes: float | None
    bound: str | None  # "memory" or "compute" on the trace's GPU, where the cost is known


# What a GPU stream's idle time waited for, by what fixed the start of the task after it (the timeline's cause):
IDLE_CAUSES = {
    "cpu_us": "the CPU (its launch)",  # a CPU task: the launch call, or a CPU-side sync, came late
    "stream_us": "between kernels",  # the stream's own previous task and the gap measured after it (launch latency)
    "other_stream_us": "another stream",  # a kernel or copy on another stream (an event or sync)
    "comm_us": "a collective",  # a communication task (another rank's member of a collective)
    "release_us": "a release time",  # nothing in the graph: the task's traced release (pinned)
    "after_us": "the step's end",  # after the stream's last task of the step: the rest holds the step
}


class StreamRow(msgspec.Struct):
    """One GPU stream over the step: busy (the union of its tasks), idle, and the idle time by what the task after it
    waited for (:data:`IDLE_CAUSES`; its parts add up to ``idle_us``)."""

    stream: str
    busy_us: float
    idle_us: float
    idle_pct: float
    tasks: int
    idle_by_cause: dict[str, float] = {}


class Analysis(msgspec.Struct):
    """One timeline, analysed."""

    __repr__ = brief_repr  # one screen, whatever it holds

    label: str
    step_us: float
    breakdown: dict[str, float]
    gpu_busy_pct: float
    verdict: str
    layers: list[LayerRow]
    modules: list[LayerRow]
    kernels: list[KernelRow]
    kernels_by_layer: list[KernelRow]
    streams: list[StreamRow]
    critical_path: CriticalPath
    roofline_device: str | None  # the catalog GPU the roofline classes are for (None: none known)


def analyse(timeline: Timeline, label: str, path: CriticalPath | None = None) -> Analysis:
    """Every analysis of ``timeline`` (the graph's current attributes name its tasks); ``path``: its critical path's
    summary where a replay's report has it already."""
    bd = breakdown(timeline)
    total = bd["total_us"] or 1.0
    gpu_busy = 100 * (bd["gpu_only_us"] + bd["cpu_gpu_overlap_us"]) / total
    path = path or critical_path_summary(timeline, top=8)
    on_path = step_critical_path(timeline)
    costs, device = _kernel_costs(timeline)
    return Analysis(
        label=label,
        step_us=bd["total_us"],
        breakdown=bd,
        gpu_busy_pct=gpu_busy,
        verdict=verdict(bd, path, timeline),
        layers=layer_rows(timeline, "top_op", "top_op_id", on_path),
        modules=layer_rows(timeline, "layer", None, on_path),
        kernels=kernel_rows(timeline, "name", costs, device),
        kernels_by_layer=kernel_rows(timeline, "top_op", costs, device),
        streams=stream_rows(timeline),
        critical_path=path,
        roofline_device=device.key if device is not None else None,
    )


def layer_rows(
    timeline: Timeline, by: str, instance: str | None, path: tuple[list[int], list[float]] | None = None
) -> list[LayerRow]:
    """Layers by ``by`` (``top_op``, ``layer``) and phase, largest time on the critical path first; an instance is
    one value of ``instance`` (``top_op_id``), or, without one (modules), all of the name's tasks in the phase on one
    rank. ``path``: the step's critical path (its tasks and the time each holds it, :func:`step_critical_path`).
    Where any layer is found, the path's time in tasks of no layer is a row of its own (:data:`OUTSIDE`), so that the
    rows add up to the step."""
    attrs = timeline.task_attrs
    start, end = timeline.start.tolist(), timeline.end.tolist()
    scale = timeline.step_scale()
    groups: dict[Any, list[int]] = defaultdict(list)
    for i in _measured(timeline):
        a = attrs[i]
        name = a.get(by)
        if name is None or (a["kind"] not in GPU_KINDS and a["kind"] not in CPU_KINDS):
            continue
        phase = a.get("phase") or "-"
        if instance is not None:
            ident = a.get(instance)
            if ident is None:
                continue
            key = (name, phase, a.get("rank"), ident)
        else:
            key = (name, phase, a.get("rank"))
        groups[key].append(i)
    if not groups:
        return []
    rows: dict[tuple[str, str], LayerRow] = {}
    spans: dict[tuple[str, str], float] = defaultdict(float)
    for key, ix in groups.items():
        name, phase = str(key[0]), str(key[1])
        row = rows.get((name, phase))
        if row is None:
            row = rows[(name, phase)] = LayerRow(name, phase, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0)
        row.instances += 1
        spans[(name, phase)] += max(end[i] for i in ix) - min(start[i] for i in ix)
        row.gpu_us += sum(end[i] - start[i] for i in ix if attrs[i]["kind"] in GPU_KINDS) * scale
        row.cpu_us += sum(end[i] - start[i] for i in ix if attrs[i]["kind"] in CPU_KINDS) * scale
        row.kernels += sum(1 for i in ix if attrs[i]["kind"] in GPU_KINDS)
    for key, row in rows.items():
        row.span_us = spans[key] / row.instances
    tasks, held = path if path is not None else step_critical_path(timeline)
    for i, t in zip(tasks, held):
        a = attrs[i]
        name = a.get(by)
        if name is None or (instance is not None and a.get(instance) is None):
            key = (OUTSIDE, "-")
        else:
            key = (str(name), a.get("phase") or "-")
        row = rows.get(key)
        if row is None:  # a layer on the path whose tasks are all outside the measured steps, or the rest
            row = rows[key] = LayerRow(key[0], key[1], 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0)
        row.critical_us += t * scale
        if a["kind"] in GPU_KINDS:
            row.critical_gpu_us += t * scale
    release = release_time(timeline, held)
    if release:  # the path begins after the step does: its first task waited for its release (a late rank)
        rows[(RELEASE, "-")] = LayerRow(RELEASE, "-", 0, release * scale, 0.0, 0.0, 0.0, 0.0, 0)
    return sorted(rows.values(), key=lambda r: (-r.critical_us, -r.gpu_us, r.name, r.phase))


def _kernel_costs(timeline: Timeline) -> tuple[dict[int, tuple[float, float]], Any]:
    """FLOPs and bytes of each kernel task (index) whose op's shapes give a cost: the op instance's cost split over
    its kernels by their time. Empty where the graph's GPU is not in the catalog."""
    graph = timeline.graph
    device = device_of_graph(graph)
    if device is None:
        return {}, None
    index = {n: i for i, n in enumerate(timeline.nodes)}
    out: dict[int, tuple[float, float]] = {}
    for ob in observations(graph, device):
        ix = [index[n] for n in ob.tasks if n in index]
        times = [float(timeline.end[i] - timeline.start[i]) for i in ix]
        total = sum(times) or 1.0
        for i, t in zip(ix, times):
            share = t / total
            out[i] = (ob.cost.flops * share, ob.cost.bytes * share)
    return out, device


def kernel_rows(timeline: Timeline, by: str, costs: dict[int, tuple[float, float]], device: Any) -> list[KernelRow]:
    """GPU tasks aggregated by ``by`` (``name``, ``top_op``), largest time first; each row's total over the step
    (one step's share of several: :meth:`~daydream.simulation.Timeline.step_scale`), summed over streams."""
    attrs = timeline.task_attrs
    scale = timeline.step_scale()
    dur = (timeline.end - timeline.start).tolist()
    acc: dict[str, dict[str, Any]] = {}
    gpu_total = 0.0
    for i in _measured(timeline):
        a = attrs[i]
        if a["kind"] not in GPU_KINDS:
            continue
        gpu_total += dur[i]
        key = str(a.get(by) if a.get(by) is not None else "-")
        e = acc.get(key)
        if e is None:
            e = acc[key] = {
                "classes": defaultdict(float),
                "count": 0,
                "total": 0.0,
                "flops": 0.0,
                "bytes": 0.0,
                "costed": 0.0,
            }
        e["classes"][str(a.get("class") or a["kind"])] += dur[i]
        e["count"] += 1
        e["total"] += dur[i]
        if i in costs:
            e["flops"] += costs[i][0]
            e["bytes"] += costs[i][1]
            e["costed"] += dur[i]
    rows = []
    for key, e in acc.items():
        cls = max(e["classes"].items(), key=lambda kv: kv[1])[0]
        # a roofline class only where most of the row's time has a known cost
        known = device is not None and e["total"] > 0 and e["costed"] >= 0.5 * e["total"] and e["bytes"] > 0
        bound = None
        if known:
            compute_s = e["flops"] / compute_peak(device, "fp32", cls)
            memory_s = e["bytes"] / device.hbm_bytes_per_s
            bound = "memory" if memory_s >= compute_s else "compute"
        rows.append(
            KernelRow(
                key,
                cls,
                e["count"],
                e["total"] * scale,
                e["total"] / e["count"],
                100 * e["total"] / gpu_total if gpu_total else 0.0,
                e["flops"] if known else None,
                e["bytes"] if known else None,
                bound,
            )
        )
    return sorted(rows, key=lambda r: (-r.total_us, r.name))


def _measured(timeline: Timeline) -> list[int] | range:
    """The tasks the tables of one step count: the measured steps' (not the context step's)."""
    ix = timeline.measured_indices()
    return range(len(timeline.task_attrs)) if ix is None else ix


def stream_rows(timeline: Timeline) -> list[StreamRow]:
    """Each GPU stream (thread of GPU tasks): busy (union of its tasks) and idle over the step's window (after the
    context step), in the step's time where it holds several steps; each idle stretch is put down to what fixed the
    start of the task that ended it (HolisticTraceAnalysis splits idle time alike: host, kernel and other waits)."""
    t0, t1, measured = timeline.step_window(timeline.step_tasks())  # a job: its step, its slowest rank's window
    scale = timeline.step_us() / (t1 - t0) if measured > 1 and t1 > t0 else 1.0
    total = (t1 - t0) * scale
    lanes: dict[str, list[int]] = defaultdict(list)
    for i, a in enumerate(timeline.task_attrs):
        if a["kind"] in GPU_KINDS:
            lanes[a["thread"]].append(i)
    rows = []
    for lane, ix in lanes.items():
        arr = np.clip(np.stack([timeline.start[ix], timeline.end[ix]], axis=1), t0, t1)
        s, e = union_intervals(arr)
        busy = float((e - s).sum()) * scale
        idle = max(0.0, total - busy)
        rows.append(
            StreamRow(
                lane,
                busy,
                idle,
                100 * idle / total if total else 0.0,
                len(ix),
                _idle_by_cause(timeline, lane, ix, (t0, t1), scale),
            )
        )
    return sorted(rows, key=lambda r: (-r.busy_us, r.stream))


def _idle_by_cause(
    timeline: Timeline, lane: str, ix: list[int], window: tuple[float, float], scale: float
) -> dict[str, float]:
    """The stream's idle stretches in the step's ``window``, each put down to the cause of the task after it."""
    t0, t1 = window
    out = dict.fromkeys(IDLE_CAUSES, 0.0)
    attrs, start, end, cause = timeline.task_attrs, timeline.start, timeline.end, timeline.cause
    cursor = t0
    for i in sorted(ix, key=lambda k: (start[k], end[k])):
        begin = min(float(start[i]), t1)
        if begin > cursor:
            out[_idle_cause(attrs, lane, int(cause[i]))] += begin - cursor
        cursor = max(cursor, min(float(end[i]), t1))
    if t1 > cursor:
        out["after_us"] += t1 - cursor
    return {k: v * scale for k, v in out.items()}


def _idle_cause(attrs: list[dict[str, Any]], lane: str, c: int) -> str:
    if c < 0:
        return "release_us"
    other = attrs[c]
    if other["kind"] in CPU_KINDS:
        return "cpu_us"
    if other["kind"] == "comm":
        return "comm_us"
    return "stream_us" if other.get("thread") == lane else "other_stream_us"


def verdict(bd: dict[str, float], path: CriticalPath, timeline: Timeline) -> str:
    """One line: what bounds the step, by its critical path, and how busy the GPU is."""
    total = bd["total_us"] or 1.0
    gpu_busy = 100 * (bd["gpu_only_us"] + bd["cpu_gpu_overlap_us"]) / total
    held = path.gpu_us + path.cpu_us or 1.0
    has_gpu = any(a["kind"] in GPU_KINDS for a in timeline.task_attrs)
    if not has_gpu:
        top = next(iter(path.by_phase), None)
        return f"CPU only: no GPU work; the step's critical path is {'mostly ' + top if top else 'on the CPU'}"
    comm = path.by_kernel_class.get("comm", 0.0)
    if comm > 0.5 * held:
        return (
            f"communication-bound: collectives hold {100 * comm / held:.0f}% of the critical path; the GPU is busy"
            f" {gpu_busy:.0f}% of the step"
        )
    loader = path.by_phase.get("dataloader", 0.0)
    if loader > 0.5 * held:
        return (
            f"input-bound: data loading holds {100 * loader / held:.0f}% of the critical path; the GPU is busy"
            f" {gpu_busy:.0f}% of the step"
        )
    if path.gpu_us >= path.cpu_us:
        top = next(iter(path.by_kernel_class), "-")
        return (
            f"GPU-bound: kernels hold {100 * path.gpu_us / held:.0f}% of the critical path ({top} the most); the GPU is"
            f" busy {gpu_busy:.0f}% of the step"
        )
    return (
        f"CPU-bound: the GPU is busy {gpu_busy:.0f}% of the step; the CPU holds {100 * path.cpu_us / held:.0f}% of the"
        " critical path"
    )
