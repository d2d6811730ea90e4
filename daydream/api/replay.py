"""One call from a trace file to a simulated, summarised timeline: what ``daydream simulate`` does."""

from __future__ import annotations

import contextlib
import math
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain, compress, repeat
from typing import Any

import msgspec
import networkx as nx
import numpy as np

from daydream.api.memory import MemoryReplay, replay_memory
from daydream.errors import TraceError
from daydream.files import InputFolder
from daydream.graph.adjacency import edge_arrays, successors_of
from daydream.graph.build import build_graph
from daydream.graph.chakra import chakra_inputs, is_chakra
from daydream.graph.schema import CPU_KINDS, CPU_ONLY, EDGE_KINDS, GPU_KINDS, Causality, Delays
from daydream.perf.trust.uncertainty import Interval, interval, noise_of
from daydream.simulation import (
    EARLIEST,
    Policy,
    Timeline,
    breakdown,
    critical_path_indices,
    critical_path_segments,
    simulate,
    totals_by,
)
from daydream.trace import load_trace
from daydream.trace.job import rank_trace_files
from daydream.trace.load import find_execution_trace
from daydream.trace.recording import recording_path
from daydream.units import brief_repr, ms


class CriticalPath(msgspec.Struct):
    """Where the critical path's time goes: its tasks, GPU and CPU time on it, and the largest shares of it (one
    step's: with several measured steps, their window's times x :meth:`Timeline.step_scale`). ``gpu_us + cpu_us +
    release_us`` is the step."""

    __repr__ = brief_repr  # one screen, whatever it holds

    tasks: int
    gpu_us: float
    cpu_us: float
    by_kernel_class: dict[str, float]
    by_phase: dict[str, float]
    by_layer: dict[str, float]
    by_name: dict[str, float]
    # the step's time before the path's first task, which waited for its release: a job's rank that starts late
    release_us: float = 0.0


class StepTime(msgspec.Struct, frozen=True):
    """One simulated step of a replay: its name, the period the trace measured and the one simulated
    (``predicted_us`` repeats ``baseline_us`` under the name the README gave it first), and whether it is context
    (simulated before the measured steps so that they start with what it left pending; not measured)."""

    name: str
    measured_us: float
    baseline_us: float
    predicted_us: float
    context: bool


class ReplayReport(msgspec.Struct):
    """A replay as data: what ``daydream simulate --json`` prints, in this order, and what renderers read.
    ``baseline_us`` is the
    unchanged trace's step as replayed (the baseline of ``daydream run``); ``predicted_us`` repeats it, under the
    name the README gave it before the vocabulary was one (each step's ``predicted_us`` too)."""

    __repr__ = brief_repr  # one screen, whatever it holds

    trace: str | None
    device: str | None
    rank: int | None
    world_size: int | None
    measured_us: float
    baseline_us: float
    predicted_us: float
    error_pct: float
    baseline_interval: Interval  # 90%: the trace's own step-to-step noise
    steps: list[StepTime]
    breakdown: dict[str, float]
    tasks: int
    edges: int
    tasks_by_kind: dict[str, int]
    gpu_time_by_phase: dict[str, float]
    gpu_time_by_class: dict[str, float]
    gpu_time_by_layer: dict[str, float]
    critical_path: CriticalPath
    delays: Delays | None
    edges_by_kind: dict[str, int]
    causality: Causality | None
    warnings: list[str]
    memory: MemoryReplay | None = None  # the step's peak memory, from the trace's allocator events where it holds them


@dataclass(repr=False)
class Replay:
    """A simulated graph of one trace: :attr:`report`, the data (the measured iteration and the baseline - the
    unchanged graph replayed, what ``daydream run`` calls the baseline -, where its time goes; what ``daydream simulate
    --json`` prints), with the graph and its timeline. The report's fields are read through it; ``repr`` is one line;
    :meth:`rows` gives one row per step (``pandas.DataFrame(replay.rows())``)."""

    report: ReplayReport
    graph: nx.DiGraph
    timeline: Timeline

    def rows(self) -> list[dict[str, Any]]:
        """One row per simulated step: the step, its measured and baseline time (us), and whether it is the context of
        the measured step (simulated before it, not measured); the columns of :meth:`WhatIf.rows` of the same name."""
        return [
            {"step": s.name, "measured_us": s.measured_us, "baseline_us": s.baseline_us, "context": s.context}
            for s in self.steps
        ]

    def __repr__(self) -> str:
        return (
            f"Replay(trace={self.report.trace!r}, measured {ms(self.measured_us)}, baseline "
            f"{ms(self.baseline_us)}, error {100 * self.error:+.2f}%, {self.graph.number_of_nodes():,} tasks)"
        )

    # the report's fields, read through it: the data has one copy, the report's
    @property
    def measured_us(self) -> float:
        return self.report.measured_us

    @property
    def baseline_us(self) -> float:
        return self.report.baseline_us

    @property
    def steps(self) -> list[StepTime]:
        return self.report.steps

    @property
    def breakdown(self) -> dict[str, float]:
        return self.report.breakdown

    @property
    def warnings(self) -> list[str]:
        return self.report.warnings

    @property
    def error(self) -> float:
        """Relative error of the baseline against the measurement (signed)."""
        return relative_error(self.baseline_us, self.measured_us)

    @property
    def interval(self) -> Interval:
        """The baseline's 90% interval: the trace's own step-to-step noise (daydream.perf.trust.uncertainty)."""
        return self.report.baseline_interval

    def critical_path_summary(self, top: int = 8) -> CriticalPath:
        return critical_path_summary(self.timeline, top)

    def to_dict(self) -> dict[str, Any]:
        """:attr:`report` as JSON values."""
        return msgspec.to_builtins(self.report)


def step_critical_path(timeline: Timeline) -> tuple[list[int], list[float]]:
    """The critical path's tasks within the step's window (after the context step) and the time each holds it
    there: the path of the step the step time measures, its times adding up to that window (a job's: its slowest
    rank's window, the path to that rank's last task, through the other ranks' tasks it waited for)."""
    ranks = timeline.step_tasks()  # a job: the path of its step, its slowest rank's window, to that rank's last task
    last = int(ranks[np.argmax(timeline.end[ranks])]) if ranks is not None and len(ranks) else None
    path = critical_path_indices(timeline, last)
    seg = critical_path_segments(timeline, path)
    t0, t1, measured = timeline.step_window(ranks)
    if not measured:
        return path, seg
    # each task's time within the window, elementwise: the same floats as min(a + s, t1) - max(a, t0) one at a time
    a = timeline.start[path]
    h = np.minimum(a + np.asarray(seg, np.float64), t1) - np.maximum(a, t0)
    keep = np.flatnonzero(h > 0)
    return np.asarray(path, np.int64)[keep].tolist(), h[keep].tolist()


def release_time(timeline: Timeline, held: list[float]) -> float:
    """The step's window less the time its critical path's tasks hold it (:func:`step_critical_path`): where the path
    begins after the window does, the wait for its first task's release (a job's rank that starts late)."""
    t0, t1, _ = timeline.step_window(timeline.step_tasks())
    rest = (t1 - t0) - sum(held)
    return rest if rest > 1e-9 * max(1.0, t1 - t0) else 0.0


def critical_path_summary(timeline: Timeline, top: int = 8) -> CriticalPath:
    """The critical path of ``timeline``: its tasks, the GPU and CPU time on it, and the ``top`` largest shares of it
    by kernel class, phase, layer and task name (each task counted for the time it holds the path)."""
    path, seg = step_critical_path(timeline)
    scale = timeline.step_scale()  # several measured steps: one step's share, as the breakdown's
    every = totals_by(timeline, ("phase", "layer", "name"), path, GPU_KINDS | CPU_KINDS, seg, scale)
    on_path = np.asarray(path, np.int64)

    def time_on_path(kinds: frozenset[str]) -> float:
        """The path's time in tasks of ``kinds``, summed in path order (the same float as one task at a time)."""
        of_kinds = np.zeros(len(timeline.nodes), np.bool_)
        of_kinds[timeline.tasks_of(kinds)] = True
        return sum(compress(seg, of_kinds[on_path].tolist())) * scale

    return CriticalPath(
        tasks=len(path),
        gpu_us=time_on_path(GPU_KINDS),
        cpu_us=time_on_path(CPU_KINDS),
        release_us=release_time(timeline, seg) * scale,
        by_kernel_class=_top(totals_by(timeline, ("class",), path, GPU_KINDS, seg, scale)["class"], top),
        by_phase=_top(every["phase"], top),
        by_layer=_top(every["layer"], top),
        by_name=_top(every["name"], top),
    )


def edges_by_kind(graph: nx.DiGraph) -> dict[str, int]:
    """How many dependencies of each kind (thread, stream, launch, sync, comm) the graph holds."""
    counts = dict.fromkeys(EDGE_KINDS, 0)
    built = edge_arrays(graph)
    if built is not None:  # a built graph's dependencies, still arrays
        return dict(zip(EDGE_KINDS, np.bincount(built.kind, minlength=len(EDGE_KINDS)).tolist()))
    # the adjacency itself (networkx's edge view costs 3x more), counted by Counter in C
    edges = chain.from_iterable(map(dict.values, successors_of(graph).values()))
    for kind, n in Counter(map(dict.get, edges, repeat("kind"))).items():
        counts[kind] = counts.get(kind, 0) + n
    return counts


def relative_error(baseline_us: float, measured_us: float) -> float:
    """A replay's signed error against the measurement (0 where nothing was measured)."""
    return (baseline_us - measured_us) / measured_us if measured_us else 0.0


def _top(d: dict[str, float], n: int) -> dict[str, float]:
    return dict(list(d.items())[:n])


def replay_graph(graph: nx.DiGraph, policy: Policy = EARLIEST) -> Replay:
    """Simulate ``graph`` and compare with what its trace measured."""
    timeline = simulate(graph, policy)
    periods = timeline.step_periods()
    # each step's "predicted_us" repeats its baseline under the name the README gave it first
    steps = [
        StepTime(s.name, s.measured_us, (b := periods.get(s.name, math.nan)), b, s.context)
        for s in graph.graph.get("steps", [])
    ]
    measured, baseline = float(graph.graph.get("measured_us", math.nan)), timeline.step_us()
    kind, kind_values = timeline.codes("kind")  # counted by numpy, in order of first appearance
    kinds: dict[str, int] = dict(zip(kind_values, np.bincount(kind, minlength=len(kind_values)).tolist()))
    edge_counts = edges_by_kind(graph)
    gpu_time = totals_by(
        timeline, ("phase", "class", "layer"), timeline.measured_indices(), scale=timeline.step_scale()
    )
    report = ReplayReport(
        trace=graph.graph.get("trace"),
        device=graph.graph.get("device"),
        rank=graph.graph.get("rank"),
        world_size=graph.graph.get("world_size"),
        measured_us=measured,
        baseline_us=baseline,
        predicted_us=baseline,
        error_pct=100.0 * relative_error(baseline, measured),
        baseline_interval=interval(baseline, [noise_of(graph)]),
        steps=steps,
        breakdown=breakdown(timeline),
        tasks=graph.number_of_nodes(),
        edges=sum(edge_counts.values()),
        tasks_by_kind=kinds,
        gpu_time_by_phase=gpu_time["phase"],
        gpu_time_by_class=gpu_time["class"],
        gpu_time_by_layer=_top(gpu_time["layer"], 20),
        critical_path=critical_path_summary(timeline),
        delays=graph.graph.get("delays"),
        edges_by_kind=edge_counts,
        causality=graph.graph.get("causality"),
        warnings=list(graph.graph.get("warnings", [])),
        memory=replay_memory(timeline),
    )
    return Replay(report=report, graph=graph, timeline=timeline)


def recording_device(graph: Any) -> tuple[str | None, str | None]:
    """The device a graph's trace was recorded on, as (name, type): the trace's GPU (``cuda``), else the recording's
    own (a CPU recording's sidecar: ``x86_64``, ``cpu``); (None, None) where neither says. Every screen names the
    device so."""
    meta = getattr(graph, "graph", {}) or {}
    device = (meta.get("recording") or {}).get("device") or {}
    name = meta.get("device") or device.get("name")
    return name, device.get("type") or ("gpu" if meta.get("device") else None)


def replay(
    path: str | os.PathLike[str], step: str | int | None = None, et: str | None = None, policy: Policy = EARLIEST
) -> Replay:
    """Simulate a trace's step unmodified and set it beside the measurement (what ``daydream simulate`` does).

    Parameters
    ----------
    path : str or os.PathLike
        A Kineto trace (``.json``, ``.json.gz`` or ``.json.xz``).
    step : str or int, optional
        The step: a ProfilerStep number or name, ``"all"``, ``"trace"`` (the whole window) or an annotation's name;
        None picks a steady-state step.
    et : str, optional
        The PyTorch execution trace of the same run (default: the one found next to ``path``, if any).
    policy : Policy, optional
        How ready tasks are scheduled (:func:`~daydream.simulation.parse_policy`: ``earliest``, ``fifo``,
        ``priority:ATTR``); default ``earliest``.

    Returns
    -------
    Replay
        The simulated ``baseline_us`` and the trace's ``measured_us`` of the step, its breakdown, critical path and
        ``timeline``; ``report`` is its plain data (``to_dict()``: the JSON of ``daydream simulate --json``).

    Raises
    ------
    TraceError
        The trace cannot be read, or holds no such step.

    Examples
    --------
    >>> from daydream import bundled_example, replay
    >>> result = replay(bundled_example())
    >>> round(result.baseline_us), round(result.measured_us)
    (19163, 19163)
    """
    trace = load_trace(path, et=et)
    gpu_activity = trace.has_gpu_activity
    graph = build_graph(trace, step, release_events=True)
    del trace  # the events take more memory than the graph: gone before the simulation allocates
    result = replay_graph(graph, policy)
    if not gpu_activity:
        result.warnings.insert(0, f"{path}: {CPU_ONLY}")
    return result


def run_inputs(
    trace: str | os.PathLike[str],
    et: str | os.PathLike[str] | None = None,
    scripts: Sequence[str | os.PathLike[str]] = (),
    include_dirs: Sequence[str | os.PathLike[str]] | None = None,
) -> list[str]:
    """Every file a run reads: the trace (or each rank trace of a job folder) with the execution trace and recording
    sidecar beside it, the scripts and all they include. Every command checks its outputs against these, with
    daydream.files.check_output_path, before the work."""
    if is_chakra(trace):
        files = chakra_inputs(trace)
    elif os.path.isdir(trace):
        try:
            ranks = rank_trace_files(trace)
        except TraceError:
            ranks = []
        files = [f for rank in ranks for f in trace_inputs(rank)]
    else:
        files = trace_inputs(trace, et)
    # the folders read: a file written into one would change what it means (a phantom rank, a script)
    folders = [InputFolder(trace)] if os.path.isdir(trace) else []
    folders += [InputFolder(d, (".whatif",)) for d in include_dirs or () if os.path.isdir(d)]
    if not scripts:
        return files + folders
    from daydream.dsl.library import script_inputs  # the parser: only for commands that run scripts

    return files + folders + script_inputs(scripts, include_dirs)


def trace_inputs(trace: str | os.PathLike[str], et: str | os.PathLike[str] | None = None) -> list[str]:
    """The files reading ``trace`` reads: the trace, its execution trace (given, or found next to it) and the
    recording sidecar beside it, where they exist."""
    found: list[str] = [os.fspath(trace)]
    if et is not None:
        found.append(os.fspath(et))
    else:
        with contextlib.suppress(Exception):  # a name that is not a trace path: nothing more to protect
            if (x := find_execution_trace(os.fspath(trace))) is not None:
                found.append(x)
    with contextlib.suppress(Exception):
        found.append(str(recording_path(os.fspath(trace))))
    return [p for p in found if os.path.exists(p)]
