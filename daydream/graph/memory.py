"""A step's memory, tied to the tasks that allocate and free it: the graph's tensors, read from the trace's own
allocator events, or estimated from shapes where the trace holds none.

**From the trace** (``source = "trace"``): a trace recorded with ``profile_memory=True`` holds an instant event
``[memory]`` for every block the allocator hands out (``Bytes`` > 0) or takes back (< 0), on the thread that asked,
at ``Addr`` on a device, with the allocator's ``Total Allocated`` after it. Each event is tied to the CPU task running
on its thread at that moment (between two tasks: the one before, past its end), at its offset from the task's start,
so that a simulated timeline puts it where that task runs. An allocation and the free of the same address on the same
device make a **tensor** (an allocation never freed in the graph's window lives to its end; a free of a block
allocated before the window, from its start). What the device held when the window began - the parameters, the
optimizer's state, anything allocated earlier - is its **floor**: the allocator's total before the window's first
event (on the CPU the profiler counts from when profiling began, so what was allocated before is not in it: an
unknown floor, said so; on a GPU the caching allocator's total holds it). The level at any moment is the floor plus
the tensors live then; the measured peak of a step is the largest total its own events report.

**Categories** (what holds memory at the peak), from the phases of the tasks that allocate and free a tensor:
``activations`` (allocated in the forward pass, freed in the backward: saved for it), ``gradients`` (allocated in the
backward pass by AccumulateGrad, or kept past it: freed by the optimizer's zero_grad or not in the step),
``optimizer state`` (allocated by the optimizer and kept), ``inputs`` (allocated outside the passes: the batch),
``temporaries`` (freed in the phase that allocated them), and the floor's parts: ``parameters`` and ``optimizer
state`` where the step's gradients size them (a GPU's floor holds them), the rest ``before the step``.

**From shapes** (``source = "shapes"``, a trace without allocator events): the tensors the plan's model
(:mod:`daydream.graph.model_memory`) counts - each forward op call's activations, allocated by its first task and
freed at the end of its step's backward pass; each gradient, allocated by its AccumulateGrad call; the parameters and
the optimizer's state as the floor.

A script changes the tensors (:func:`scaled`: their bytes times a factor, over a stretch between two tasks where
given; :func:`allocated`: a new tensor); a removed task's tensors go with it when it both allocated and freed them, or
move to the task before it on its thread (:func:`tasks_removed`). :mod:`daydream.simulation.memory` turns the tensors
and a simulated timeline into the step's memory timeline and its peak.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import networkx as nx
import numpy as np

from daydream.errors import DaydreamError
from daydream.graph.adjacency import attrs_of, task_columns, task_ids
from daydream.graph.schema import CPU_KINDS

# what holds memory, in the order tables list it
CATEGORIES = ("activations", "gradients", "optimizer state", "parameters", "inputs", "temporaries", "before the step")
ACTIVATIONS, GRADIENTS, OPTIMIZER, PARAMETERS, INPUTS, TEMPORARIES, BEFORE = range(len(CATEGORIES))
NO_TASK = -1  # a tensor allocated before the window, or not freed in it
TRACE, SHAPES = "trace", "shapes"
_ACCUMULATE = re.compile(r"AccumulateGrad")
_ZERO_GRAD = re.compile(r"zero_grad")
# Kineto's device types (c10::DeviceType): the CPU, CUDA, ROCm's HIP; others by number
_DEVICE_TYPES = {0: "cpu", 1: "cuda", 6: "hip"}


@dataclass(frozen=True)
class Device:
    """One device's memory in the trace: its name (``cpu``, ``cuda:0``), whether it is a GPU, its capacity where the
    trace says it, its floor (bytes held when the graph's window begins) and how the trace counts it, and what the
    trace measured over the measured step: its peak, and its level event by event (for a plot: times from the
    graph's origin, bytes)."""

    key: str
    gpu: bool
    capacity_bytes: float | None
    floor_bytes: float
    counted: str  # what the level counts from: said beside every figure
    measured_peak_bytes: float | None
    measured_times_us: tuple[float, ...] = ()
    measured_levels: tuple[float, ...] = ()
    step_peaks: dict[str, float] = field(default_factory=dict)  # each step's largest total, as the trace reports it


@dataclass(frozen=True)
class Window:
    """``factor`` times the bytes of ``tensors`` (indices) from the end of task ``after`` (None: from each one's
    allocation) to the start of task ``until`` (None: to each one's free): a stretch of a tensor's life a script
    changed (released: 0, compressed: a fraction)."""

    tensors: np.ndarray
    after: Any
    until: Any
    factor: float


@dataclass(frozen=True)
class GraphMemory:
    """The graph's tensors, as columns (one row a tensor), and its devices. Never changed in place: a script's change
    makes a new one (:func:`scaled`, :func:`allocated`, :func:`tasks_removed`), so copies of a graph share it."""

    source: str  # TRACE or SHAPES
    devices: tuple[Device, ...]
    device: np.ndarray  # int16: a tensor's device (its index in devices)
    nbytes: np.ndarray  # float64: as the trace (or the shapes) give it
    scale: np.ndarray  # float64: what scripts multiplied its bytes by
    category: np.ndarray  # int8: CATEGORIES
    alloc_task: np.ndarray  # int64: the task that allocated it (NO_TASK: before the window)
    alloc_offset: np.ndarray  # float64: us from that task's traced start
    alloc_seq: np.ndarray  # int64: the event's place in the trace (ties at one moment in the trace's order)
    free_task: np.ndarray  # int64 (NO_TASK: not freed in the window)
    free_offset: np.ndarray  # float64
    free_seq: np.ndarray  # int64
    in_floor: np.ndarray  # bool: held in the device's floor (from before the window, or split from it), not added to it
    traced_us: dict[Any, tuple[float, float]] = field(
        default_factory=dict
    )  # a referenced task's traced (start, duration)
    windows: tuple[Window, ...] = ()
    notes: tuple[str, ...] = ()
    generation: int = 0  # one more each time tensors leave (their rows renumbered): a TensorSet of another is stale

    def __len__(self) -> int:
        return len(self.nbytes)

    def __repr__(self) -> str:
        return (
            f"GraphMemory({self.source}, {len(self):,} tensors, devices {[d.key for d in self.devices]}, "
            f"{len(self.windows)} windows)"
        )

    def main_device(self) -> int:
        """The device a step's memory is reported for: the first GPU, else the CPU."""
        return next((i for i, d in enumerate(self.devices) if d.gpu), 0)

    def of_tasks(self, tasks: Iterable[Any], categories: Sequence[int] | None = None, by: str = "alloc") -> np.ndarray:
        """Indices of the tensors allocated (``by="alloc"``) or freed (``"free"``) by ``tasks``, of ``categories``
        where given."""
        ids = np.fromiter((t for t in tasks if isinstance(t, (int, np.integer))), np.int64)
        column = self.alloc_task if by == "alloc" else self.free_task
        keep = np.isin(column, ids) if len(ids) else np.zeros(len(self), np.bool_)
        if categories is not None:
            keep &= np.isin(self.category, np.asarray(list(categories), np.int64))
        return np.flatnonzero(keep)

    def of_categories(self, categories: Sequence[int]) -> np.ndarray:
        return np.flatnonzero(np.isin(self.category, np.asarray(list(categories), np.int64)))


@dataclass(frozen=True)
class TensorSet:
    """Some of a graph's tensors (rows of its GraphMemory of one generation): what a script's ``tensors(...)`` gives
    and ``scale`` changes."""

    rows: np.ndarray
    generation: int
    nbytes: float  # their bytes when the set was taken (times the scripts' scales so far)

    def __len__(self) -> int:
        return len(self.rows)


def memory_of(graph: nx.DiGraph) -> GraphMemory | None:
    """The graph's memory, or None where it has none (a graph built by hand, a job)."""
    found = graph.graph.get("memory")
    return found if isinstance(found, GraphMemory) else None


def category_codes(names: str | Sequence[str]) -> list[int]:
    """Category names as codes (``"activations"`` or a list of them); a DaydreamError names the valid ones."""
    listed = [names] if isinstance(names, str) else list(names)
    out = []
    for n in listed:
        if n not in CATEGORIES:
            raise DaydreamError(f"unknown memory category {n!r}: one of {', '.join(repr(c) for c in CATEGORIES)}")
        out.append(CATEGORIES.index(n))
    return out


# --- from the trace ---------------------------------------------------------------------------------------------------


def _column(graph: nx.DiGraph, key: str) -> list[Any]:
    tasks = task_columns(graph)
    if tasks is not None:
        return tasks.values(key)
    nodes = attrs_of(graph)
    return [nodes[n].get(key) for n in task_ids(graph)]


def _device_key(dtype: int, did: int) -> str:
    kind = _DEVICE_TYPES.get(dtype, f"device{dtype}")
    return "cpu" if dtype == 0 else f"{kind}:{max(did, 0)}"


def attach_memory(graph: nx.DiGraph, events: Any, device_capacity: float | None = None) -> None:
    """Tie the trace's allocator events (``daydream.trace.model.MemoryEvents``) to the graph's CPU tasks and keep
    the tensors they make as ``graph.graph["memory"]`` (module docstring); nothing where the graph's window holds no
    event. ``device_capacity``: the GPU's memory as the trace's device properties say."""
    if events is None or not len(events):
        return
    ids = task_ids(graph)
    if not ids or not all(isinstance(n, int) for n in ids[:1]):
        return
    kind = _column(graph, "kind")
    cpu = [i for i, k in enumerate(kind) if k in CPU_KINDS]
    if not cpu:
        return
    start = np.asarray(_column(graph, "start"), np.float64)
    duration = np.asarray(_column(graph, "duration"), np.float64)
    thread = _column(graph, "thread")
    origin = float(graph.graph.get("origin_us") or 0.0)
    ts = events.ts - origin
    lo, hi = float(start[cpu].min()), float((start + duration)[cpu].max())
    inside = (ts >= lo) & (ts <= hi)
    if not inside.any():
        return
    # the CPU tasks of each thread, by start: an event belongs to the one running on its thread then (or the one
    # before it); on a thread the graph holds no task of, to the task of any thread running then
    by_thread: dict[str, np.ndarray] = {}
    for i in cpu:
        by_thread.setdefault(thread[i], []).append(i)  # type: ignore[arg-type]
    by_thread = {t: np.asarray(sorted(ix, key=lambda i: (start[i], i)), np.int64) for t, ix in by_thread.items()}
    every = np.asarray(sorted(cpu, key=lambda i: (start[i], i)), np.int64)
    task = np.full(len(ts), NO_TASK, np.int64)
    names = [f"cpu:{pid}/{tid}" for pid, tid in events.thread]
    rows_of: dict[str, list[int]] = defaultdict(list)
    for r in np.flatnonzero(inside).tolist():
        rows_of[names[r] if names[r] in by_thread else ""].append(r)
    for name, rows in rows_of.items():
        tasks = by_thread.get(name, every)
        r = np.asarray(rows, np.int64)
        at = np.searchsorted(start[tasks], ts[r], side="right") - 1
        task[r] = tasks[np.maximum(at, 0)]
    devices = sorted({(int(t), int(d)) for t, d in zip(events.device_type.tolist(), events.device_id.tolist())})
    device_of = {dev: k for k, dev in enumerate(devices)}
    dev = np.fromiter(
        (device_of[(int(t), int(d))] for t, d in zip(events.device_type, events.device_id)), np.int16, len(ts)
    )
    tensors = _pair(events, dev, inside, task, ts, start)
    floors, counted = _floors(events, dev, inside, len(devices))
    step = _column(graph, "step")
    phase = _column(graph, "phase")
    region = _column(graph, "region")
    name_of = _column(graph, "name")
    category = _categories(tensors, step, phase, region, name_of, graph)
    # the floor's parts where the step's gradients size them: a GPU's floor holds the parameters and optimizer state
    measured = _measured(graph, events, dev, ts, start, duration, step, len(devices))
    peaks = _step_peaks(graph, events, dev, ts, start, duration, step, len(devices))
    out_devices = []
    for k, (t, d) in enumerate(devices):
        peak, times, levels = measured[k]
        gpu = t != 0
        out_devices.append(
            Device(
                _device_key(t, d),
                gpu,
                device_capacity if gpu else None,
                floors[k],
                counted[k],
                peak,
                times,
                levels,
                peaks[k],
            )
        )
    referenced = {
        int(i) for i in np.concatenate([tensors["alloc_task"], tensors["free_task"]]).tolist() if i != NO_TASK
    }
    memory = GraphMemory(
        source=TRACE,
        devices=tuple(out_devices),
        device=tensors["device"],
        nbytes=tensors["nbytes"],
        scale=np.ones(len(tensors["nbytes"])),
        category=category,
        alloc_task=tensors["alloc_task"],
        alloc_offset=tensors["alloc_offset"],
        alloc_seq=tensors["alloc_seq"],
        free_task=tensors["free_task"],
        free_offset=tensors["free_offset"],
        free_seq=tensors["free_seq"],
        in_floor=tensors["alloc_task"] == NO_TASK,
        traced_us={i: (float(start[i]), float(duration[i])) for i in referenced},
        notes=tuple(n for n in counted_notes(out_devices)),
    )
    graph.graph["memory"] = _with_floor_parts(graph, memory)


def counted_notes(devices: Sequence[Device]) -> list[str]:
    """What each device's figures count from, once."""
    return [f"{d.key}: {d.counted}" for d in devices]


def _pair(
    events: Any, dev: np.ndarray, inside: np.ndarray, task: np.ndarray, ts: np.ndarray, start: np.ndarray
) -> dict[str, np.ndarray]:
    """The window's events paired into tensors: an allocation and the next free of its address on its device."""
    rows = np.flatnonzero(inside)
    rows = rows[np.lexsort((rows, ts[rows]))]  # in time, ties in the file's order
    open_at: dict[tuple[int, int], int] = {}
    out: dict[str, list[Any]] = {
        k: []
        for k in ("device", "nbytes", "alloc_task", "alloc_offset", "alloc_seq", "free_task", "free_offset", "free_seq")
    }
    nbytes, addr = events.nbytes, events.addr
    for r in rows.tolist():
        key = (int(dev[r]), int(addr[r]))
        b = float(nbytes[r])
        t = int(task[r])
        offset = float(ts[r] - start[t])
        if b > 0:
            if key in open_at:  # its free never came: freed when the address is handed out again
                _close(out, open_at.pop(key), t, offset, r)
            open_at[key] = len(out["nbytes"])
            for k, v in (
                ("device", key[0]),
                ("nbytes", b),
                ("alloc_task", t),
                ("alloc_offset", offset),
                ("alloc_seq", r),
                ("free_task", NO_TASK),
                ("free_offset", 0.0),
                ("free_seq", -1),
            ):
                out[k].append(v)
        elif b < 0:
            k_open = open_at.pop(key, None)
            if k_open is not None:
                _close(out, k_open, t, offset, r)
            else:  # allocated before the window: live from its start
                for k, v in (
                    ("device", key[0]),
                    ("nbytes", -b),
                    ("alloc_task", NO_TASK),
                    ("alloc_offset", 0.0),
                    ("alloc_seq", -1),
                    ("free_task", t),
                    ("free_offset", offset),
                    ("free_seq", r),
                ):
                    out[k].append(v)
    types = {
        "device": np.int16,
        "nbytes": np.float64,
        "alloc_task": np.int64,
        "alloc_offset": np.float64,
        "alloc_seq": np.int64,
        "free_task": np.int64,
        "free_offset": np.float64,
        "free_seq": np.int64,
    }
    return {k: np.asarray(v, types[k]) for k, v in out.items()}


def _close(out: dict[str, list[Any]], k: int, task: int, offset: float, seq: int) -> None:
    out["free_task"][k], out["free_offset"][k], out["free_seq"][k] = task, offset, seq


def _floors(events: Any, dev: np.ndarray, inside: np.ndarray, n: int) -> tuple[list[float], list[str]]:
    """Each device's bytes held when the window begins, and what that counts from: the allocator's total before the
    window's first event (its total after it, less its bytes)."""
    floors, counted = [0.0] * n, [""] * n
    for k in range(n):
        rows = np.flatnonzero(inside & (dev == k))
        rows = rows[np.lexsort((rows, events.ts[rows]))]  # in time (a file need not be), ties in its order
        first = int(rows[0]) if len(rows) else -1
        cpu = int(events.device_type[first]) == 0 if first >= 0 else True
        total = float(events.total_allocated[first]) if first >= 0 else math.nan
        if first >= 0 and math.isfinite(total):
            floors[k] = max(0.0, total - float(events.nbytes[first]))
            counted[k] = (
                "the profiler's count, from when profiling began: what was allocated before (the parameters, "
                "most often) is not in it"
                if cpu
                else "the allocator's total, everything allocated on the device before too"
            )
        else:
            counted[k] = (
                "the trace's own events from the window's start (it gives no totals): what was held before is not in it"
            )
    return floors, counted


def _categories(
    tensors: dict[str, np.ndarray],
    step: list[Any],
    phase: list[Any],
    region: list[Any],
    name: list[Any],
    graph: nx.DiGraph,
) -> np.ndarray:
    """Each tensor's category (module docstring), from the phases of the tasks that allocate and free it."""
    out = np.full(len(tensors["nbytes"]), TEMPORARIES, np.int8)
    order = {s.name: k for k, s in enumerate(graph.graph.get("steps") or [])}
    for k, (a, f) in enumerate(zip(tensors["alloc_task"].tolist(), tensors["free_task"].tolist())):
        if a == NO_TASK:
            out[k] = BEFORE
            continue
        pa = phase[a]
        accumulate = bool(_ACCUMULATE.search(str(region[a] or ""))) or bool(_ACCUMULATE.search(str(name[a] or "")))
        if f == NO_TASK:
            later = True
            pf = None
        else:
            pf = phase[f]
            later = order.get(step[f], 0) > order.get(step[a], 0)
        zero_grad = f != NO_TASK and (_ZERO_GRAD.search(str(region[f] or "")) is not None)
        if pa == "forward":
            out[k] = ACTIVATIONS if pf == "backward" else TEMPORARIES
        elif pa == "backward":
            out[k] = GRADIENTS if accumulate or later or zero_grad or pf == "optimizer" else TEMPORARIES
        elif pa == "optimizer":
            out[k] = OPTIMIZER if later else TEMPORARIES
        elif pa in (None, "dataloader"):
            out[k] = INPUTS if later or pf in ("forward", "backward") else TEMPORARIES
    return out


def _measured(
    graph: nx.DiGraph,
    events: Any,
    dev: np.ndarray,
    ts: np.ndarray,
    start: np.ndarray,
    duration: np.ndarray,
    step: list[Any],
    n: int,
) -> list[tuple[float | None, tuple[float, ...], tuple[float, ...]]]:
    """Each device's largest total over the measured step(s), as the trace's own totals report it, and its level
    event by event there: the measured steps' window is from the end of the last context step to the end of the
    last measured one, in the graph's (traced) times."""
    steps = graph.graph.get("steps") or []
    context = {s.name for s in steps if s.context}
    measured = {s.name for s in steps if not s.context}
    end = start + duration
    # on the CPU's clock, as simulation.memory.memory_window: every allocation is a CPU task's
    cpu = set(i for i, k in enumerate(_column(graph, "kind")) if k in CPU_KINDS)
    w0 = max((float(end[i]) for i, s in enumerate(step) if s in context and i in cpu), default=float(start.min()))
    w0 = min(w0, max((float(end[i]) for i, s in enumerate(step) if s in context), default=float(start.min())))
    w1 = max((float(end[i]) for i, s in enumerate(step) if s in measured), default=float(end.max()))
    out = []
    for k in range(n):
        on = dev == k
        rows = np.flatnonzero(on & (ts >= w0) & (ts <= w1))
        rows = rows[np.lexsort((rows, ts[rows]))]
        earlier = np.flatnonzero(on & (ts < w0))
        if len(earlier):  # the level carried into the window: the total after the last event before it
            rows = np.concatenate([[earlier[np.lexsort((earlier, ts[earlier]))][-1]], rows])
        totals = events.total_allocated[rows]
        finite = np.isfinite(totals)
        peak = float(totals[finite].max()) if finite.any() else None
        out.append((peak, tuple(ts[rows][finite].tolist()), tuple(totals[finite].tolist())))
    return out


def _step_peaks(
    graph: nx.DiGraph,
    events: Any,
    dev: np.ndarray,
    ts: np.ndarray,
    start: np.ndarray,
    duration: np.ndarray,
    step: list[Any],
    n: int,
) -> list[dict[str, float]]:
    """Each device's largest total in each step of the graph (its tasks' span), as the trace reports it: how much the
    peak varies from step to step (the noise of a predicted peak)."""
    spans: dict[str, tuple[float, float]] = {}
    end = start + duration
    for i, s in enumerate(step):
        if s is not None:
            lo, hi = spans.get(s, (math.inf, -math.inf))
            spans[s] = (min(lo, float(start[i])), max(hi, float(end[i])))
    out: list[dict[str, float]] = [{} for _ in range(n)]
    for name, (lo, hi) in spans.items():
        for k in range(n):
            totals = events.total_allocated[(dev == k) & (ts >= lo) & (ts <= hi)]
            totals = totals[np.isfinite(totals)]
            if len(totals):
                out[k][str(name)] = float(totals.max())
    return out


def _with_floor_parts(graph: nx.DiGraph, memory: GraphMemory) -> GraphMemory:
    """The GPU's floor split where the step's gradients size the parameters: the parameters and the optimizer's state
    (its states per parameter, fp32) as tensors of the whole window, the rest as the floor. On the CPU the profiler's
    count leaves them out (they were allocated before profiling): nothing to split."""
    k = memory.main_device()
    device = memory.devices[k]
    if not device.gpu or device.floor_bytes <= 0:
        return memory
    try:
        from daydream.graph.model_memory import model_memory

        model = model_memory(graph)
    except DaydreamError:
        return memory
    params = 4.0 * model.parameters
    state = 4.0 * model.parameters * model.optimizer_states
    held = max(0.0, device.floor_bytes - float(memory.nbytes[memory.in_floor & (memory.device == k)].sum()))
    parts = []
    for category, nbytes in ((PARAMETERS, params), (OPTIMIZER, state)):
        take = min(nbytes, held)
        if take > 0:
            parts.append((category, take))
            held -= take
    return _with_tensors(memory, [(k, b, c, NO_TASK, 0.0, NO_TASK, 0.0) for c, b in parts], in_floor=True)


def _with_tensors(
    memory: GraphMemory,
    rows: list[tuple[int, float, int, Any, float, Any, float]],
    scale: float = 1.0,
    in_floor: bool = False,
) -> GraphMemory:
    """``memory`` with more tensors: (device, bytes, category, alloc task, offset, free task, offset) each;
    ``in_floor``: held in the floor already (split from it), not added to it."""
    if not rows:
        return memory
    dev, nb, cat, at, ao, ft, fo = (list(c) for c in zip(*rows))
    seq = np.full(len(rows), -1, np.int64)
    return replace(
        memory,
        device=np.concatenate([memory.device, np.asarray(dev, np.int16)]),
        nbytes=np.concatenate([memory.nbytes, np.asarray(nb, np.float64)]),
        scale=np.concatenate([memory.scale, np.full(len(rows), scale)]),
        category=np.concatenate([memory.category, np.asarray(cat, np.int8)]),
        alloc_task=np.concatenate([memory.alloc_task, np.asarray(at, np.int64)]),
        alloc_offset=np.concatenate([memory.alloc_offset, np.asarray(ao, np.float64)]),
        alloc_seq=np.concatenate([memory.alloc_seq, seq]),
        free_task=np.concatenate([memory.free_task, np.asarray(ft, np.int64)]),
        free_offset=np.concatenate([memory.free_offset, np.asarray(fo, np.float64)]),
        free_seq=np.concatenate([memory.free_seq, seq]),
        in_floor=np.concatenate([memory.in_floor, np.full(len(rows), in_floor)]),
    )


# --- from shapes ------------------------------------------------------------------------------------------------------


def estimate_memory(graph: nx.DiGraph, element_bytes: float = 4.0) -> GraphMemory | None:
    """The tensors the plan's memory model counts, for a trace without allocator events (module docstring); None
    where it cannot count them (no gradient sizes, no forward pass). The device is the trace's GPU, or the CPU."""
    from daydream.graph.model_memory import activation_calls, model_memory

    try:
        model = model_memory(graph)
    except DaydreamError:
        return None
    ids = task_ids(graph)
    if not ids or not isinstance(ids[0], int):
        return None
    kind = _column(graph, "kind")
    step = _column(graph, "step")
    phase = _column(graph, "phase")
    start = np.asarray(_column(graph, "start"), np.float64)
    duration = np.asarray(_column(graph, "duration"), np.float64)
    gpu = any(k not in CPU_KINDS for k in kind)
    props = graph.graph.get("device_properties") or {}
    capacity = props.get("totalGlobalMem") if gpu else None
    rows: list[tuple[int, float, int, Any, float, Any, float]] = []
    # each forward call's activations, from its first task to the end of its step's backward pass
    last_backward: dict[Any, int] = {}
    for i, (k, s, p) in enumerate(zip(kind, step, phase)):
        if (
            k in CPU_KINDS
            and p == "backward"
            and (
                s not in last_backward or start[i] + duration[i] >= start[last_backward[s]] + duration[last_backward[s]]
            )
        ):
            last_backward[s] = i
    for first, s, elements in activation_calls(graph):
        end = last_backward.get(s, NO_TASK)
        rows.append(
            (0, elements * element_bytes, ACTIVATIONS, first, 0.0, end, float(duration[end]) if end != NO_TASK else 0.0)
        )
    params = model.parameters * element_bytes
    rows.append((0, params, PARAMETERS, NO_TASK, 0.0, NO_TASK, 0.0))
    if model.optimizer_states:
        rows.append((0, params * model.optimizer_states, OPTIMIZER, NO_TASK, 0.0, NO_TASK, 0.0))
    rows.append(
        (0, params, GRADIENTS, NO_TASK, 0.0, NO_TASK, 0.0)
    )  # kept from one step to the next (zero_grad to zeros)
    floor = sum(r[1] for r in rows if r[3] == NO_TASK)  # the model's state, held when the window begins
    device = Device(
        "gpu" if gpu else "cpu",
        gpu,
        float(capacity) if capacity else None,
        floor,
        "estimated from the trace's shapes (daydream.graph.model_memory): the model's state and the forward "
        "pass's activations, no temporaries, workspaces or allocator cache",
        None,
    )
    referenced = {int(r[3]) for r in rows if r[3] != NO_TASK} | {int(r[5]) for r in rows if r[5] != NO_TASK}
    empty = GraphMemory(
        SHAPES,
        (device,),
        np.zeros(0, np.int16),
        np.zeros(0),
        np.zeros(0),
        np.zeros(0, np.int8),
        np.zeros(0, np.int64),
        np.zeros(0),
        np.zeros(0, np.int64),
        np.zeros(0, np.int64),
        np.zeros(0),
        np.zeros(0, np.int64),
        np.zeros(0, np.bool_),
        {i: (float(start[i]), float(duration[i])) for i in referenced},
        notes=(f"{device.key}: {device.counted}",),
    )
    held = [r for r in rows if r[3] == NO_TASK]
    return _with_tensors(_with_tensors(empty, [r for r in rows if r[3] != NO_TASK]), held, in_floor=True)


# --- what scripts do --------------------------------------------------------------------------------------------------


def scaled(
    memory: GraphMemory,
    tensors: np.ndarray,
    factor: float,
    after: Any = None,
    until: Any = None,
    traced: dict[Any, tuple[float, float]] | None = None,
) -> GraphMemory:
    """``memory`` with the bytes of ``tensors`` times ``factor``: for their whole lives, or from the end of task
    ``after`` (None: each one's allocation) to the start of task ``until`` (None: each one's free). ``traced``: the
    traced (start, duration) of ``after`` and ``until`` (they may be tasks a script inserted)."""
    if not math.isfinite(factor) or factor < 0:
        raise DaydreamError(f"a memory scale factor must be a finite number >= 0; got {factor}")
    if after is None and until is None:
        scale = memory.scale.copy()
        scale[tensors] *= factor
        return replace(memory, scale=scale)
    known = dict(memory.traced_us)
    known.update(traced or {})
    return replace(
        memory,
        windows=(*memory.windows, Window(np.asarray(tensors, np.int64), after, until, float(factor))),
        traced_us=known,
    )


def allocated(
    memory: GraphMemory,
    nbytes: float,
    category: int,
    after: Any = None,
    until: Any = None,
    traced: dict[Any, tuple[float, float]] | None = None,
) -> GraphMemory:
    """``memory`` with a new tensor of ``nbytes`` on the main device, allocated at the end of task ``after`` (None:
    before the window) and freed at the start of task ``until`` (None: not in the window)."""
    if not math.isfinite(nbytes) or nbytes < 0:
        raise DaydreamError(f"an allocation is a finite number of bytes >= 0; got {nbytes}")
    known = dict(memory.traced_us)
    known.update(traced or {})
    at = NO_TASK if after is None else after
    ft = NO_TASK if until is None else until
    a_off = known[after][1] if after is not None else 0.0
    out = _with_tensors(
        replace(memory, traced_us=known), [(memory.main_device(), nbytes, category, at, a_off, ft, 0.0)]
    )
    return out


def tasks_removed(graph: nx.DiGraph, doomed: Iterable[Any]) -> None:
    """Before ``doomed`` leave the graph: their tensors go with them where one of them both allocated and freed them
    (the work that needed them is gone), or move to the end of the task before them on their thread (a removed call's
    allocations happen in the call that replaces it); a window that begins or ends at one moves likewise."""
    memory = memory_of(graph)
    if memory is None:
        return
    gone = {d for d in doomed if isinstance(d, (int, np.integer))}
    if not gone:
        return
    ids = np.fromiter(gone, np.int64)
    a_gone, f_gone = np.isin(memory.alloc_task, ids), np.isin(memory.free_task, ids)
    if not (a_gone.any() or f_gone.any()) and not any(w.after in gone or w.until in gone for w in memory.windows):
        return
    keep = ~(a_gone & f_gone)
    nodes = attrs_of(graph)
    survivor = _survivors(graph, gone, nodes)
    known = dict(memory.traced_us)
    alloc_task, alloc_offset = memory.alloc_task.copy(), memory.alloc_offset.copy()
    free_task, free_offset = memory.free_task.copy(), memory.free_offset.copy()
    for task, offset, moved in ((alloc_task, alloc_offset, a_gone & keep), (free_task, free_offset, f_gone & keep)):
        for k in np.flatnonzero(moved).tolist():
            s = survivor.get(int(task[k]))
            if s is None:
                task[k], offset[k] = NO_TASK, 0.0
            else:
                task[k] = s
                known.setdefault(s, (float(nodes[s].get("start", 0.0)), float(nodes[s]["duration"])))
                offset[k] = known[s][1]
    windows = tuple(
        replace(
            w,
            after=survivor.get(w.after, w.after) if w.after in gone else w.after,
            until=survivor.get(w.until, w.until) if w.until in gone else w.until,
        )
        for w in memory.windows
    )
    # the tensors kept, renumbered in the windows that hold them
    number = np.full(len(memory), -1, np.int64)
    number[keep] = np.arange(int(keep.sum()))
    windows = tuple(replace(w, tensors=number[w.tensors][number[w.tensors] >= 0]) for w in windows)
    graph.graph["memory"] = replace(
        memory,
        device=memory.device[keep],
        nbytes=memory.nbytes[keep],
        scale=memory.scale[keep],
        category=memory.category[keep],
        alloc_task=alloc_task[keep],
        alloc_offset=alloc_offset[keep],
        alloc_seq=memory.alloc_seq[keep],
        free_task=free_task[keep],
        free_offset=free_offset[keep],
        free_seq=memory.free_seq[keep],
        in_floor=memory.in_floor[keep],
        traced_us=known,
        windows=windows,
        generation=memory.generation + 1,
    )


def _survivors(graph: nx.DiGraph, gone: set[Any], nodes: dict[Any, dict[str, Any]]) -> dict[int, Any]:
    """Each removed task's closest surviving task before it on its thread (None where it has none)."""
    threads: dict[str, list[Any]] = defaultdict(list)
    wanted = {nodes[g]["thread"] for g in gone if g in nodes}
    for n, a in nodes.items():
        if a["thread"] in wanted:
            threads[a["thread"]].append(n)
    out: dict[int, Any] = {}
    for ix in threads.values():
        ix.sort(key=lambda n: (float(nodes[n].get("start", 0.0)), n))
        last = None
        for n in ix:
            if n in gone:
                out[int(n)] = last
            else:
                last = n
    return out
