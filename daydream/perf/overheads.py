"""CPU overheads T1..T5 of Lin et al. (seed 000) and their single-GPU end-to-end iteration estimate.

The host side of an iteration is cut into five kinds of time (notes, section 3):

====  =================================================================  ==========================
T1    gap between two consecutive top-level ops                          one value for the trace
T2    op start -> start of its first launch                              per op name
T3    end of its last launch -> op end                                   per op name
T4    the runtime call itself (cudaLaunchKernel, cudaMemcpyAsync, ...)   per runtime function
T5    between consecutive launches of one op                             per op name
====  =================================================================  ==========================

The paper also calls T5 the whole CPU time of an op that launches nothing; that is kept apart here
(:attr:`Overheads.cpu_only`) because one op name is often seen both ways (``aten::to`` copies or does nothing)
and the two times differ by an order of magnitude.

Ops are the trace's CPU ops with no enclosing CPU op on their thread; annotations (``ProfilerStep#N``,
``Optimizer.step#...``, ``## forward ##``, module ranges) are not ops, and data-loading ranges and everything in
them are data loading, not op overhead. A *launch* is an outermost runtime call that issued GPU work (kernel, copy,
fill) or waited for the device (stream/device/event synchronize, a synchronous copy, a copy to or from pageable
memory, a copy that returned only after it finished: what waits is :mod:`daydream.trace.runtime_calls`'s to say, the
table the graph builder reads too); calls that do neither (``cudaStreamIsCapturing``, ``cudaOccupancy...``) are
simply CPU time inside T2/T3/T5. A call that waited is a boundary between T2/T3/T5 intervals but gives no T4 sample:
its duration is mostly the wait.

The ops are swept from the trace, not from a dependency graph (:func:`graph_items`), although the graph builder
sweeps the same nesting: the graph keeps no op's start and end, so T2 and T3 cannot be measured on it (they would
fall into T1, one value for every op), nor can the profiler correction count the CPU events inside an interval.

Profiler-overhead correction (paper, section III-C): the profiler's own cost is inside every measured interval, so
``cpu_event_us`` (2 us) is subtracted per CPU event (op or runtime call) that starts inside the interval and
``gpu_event_us`` (4 us) per GPU event a runtime call issued; a sample never goes below 0. Both constants are
platform dependent (the paper's 2 us is empirical for its hosts, 4 us comes from the PyTorch source of its day):
pass the values measured on your machine. Each sample set loses its outliers outside
[Q1 - 1.5 IQR, Q3 + 1.5 IQR]; the mean of the rest is the value used, stored with its count and the raw median.

:func:`predict_e2e` is the paper's Algorithm 1 over one iteration's ops (from a trace window or a dependency graph),
with the traced kernel times or a kernel model's. Traced iterations are periods (iteration start to the next
start) during which the GPU may still run the previous iteration, so besides the paper's single pass from an idle
machine it reports the period of the iteration repeated back to back; :func:`check_iterations` / :func:`accuracy`
compare that with the trace, each iteration predicted from overheads of the other half of the iterations.
"""

from __future__ import annotations

import bisect
import math
import re
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from daydream.errors import DaydreamError
from daydream.graph.build import GPU_KINDS
from daydream.graph.context import range_phase
from daydream.graph.kernel_class import classify_kernel
from daydream.perf.accuracy import Accuracy, gmae
from daydream.trace.load import load_trace
from daydream.trace.model import MEMCPY_CATS, MEMSET_CATS, Trace
from daydream.trace.runtime_calls import copy_waits, host_waits
from daydream.trace.schema import Event
from daydream.trace.steps import Step, iteration_steps, profiler_steps

DEFAULT_CPU_EVENT_US = 2.0
DEFAULT_GPU_EVENT_US = 4.0
# The paper's fixed T4 (section IV-B): used only when a trace measured no runtime call at all.
DEFAULT_LAUNCH_US = 10.0
# Algorithm 1: a kernel starts at least this long after the previous one on its stream ends.
KERNEL_GAP_US = 1.0

# CPU ranges that label a step, phase or module rather than run an op (some exporters file them as cpu_op).
_LABEL_RE = re.compile(
    r"^ProfilerStep#|^Optimizer\.|^##.*##$|^enumerate\(DataLoader\)|^DistributedDataParallel\.|^nn\.Module: |^daydream\."
    r"|^\[pytorch\|profiler|^PyTorch Profiler"
)


# ---- statistics ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stat:
    """One overhead: ``mean_us`` of the samples left after outlier removal (``count`` of them), and the median
    of all ``raw_count`` samples before removal."""

    mean_us: float
    count: int
    raw_median_us: float
    raw_count: int

    def to_dict(self) -> dict[str, float | int]:
        return {"mean_us": self.mean_us, "count": self.count, "raw_median_us": self.raw_median_us, "raw_count": self.raw_count}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Stat:
        return cls(float(d["mean_us"]), int(d["count"]), float(d["raw_median_us"]), int(d["raw_count"]))


NO_SAMPLES = Stat(0.0, 0, 0.0, 0)


def without_outliers(samples: Sequence[float]) -> list[float]:
    """The samples inside [Q1 - 1.5 IQR, Q3 + 1.5 IQR] (quartiles by linear interpolation, as numpy's default)."""
    if len(samples) < 4:  # quartiles of fewer points say nothing about what is unusual
        return list(samples)
    q1, q3 = np.percentile(samples, [25, 75])
    lo, hi = q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1)
    return [x for x in samples if lo <= x <= hi]


def summarize(samples: Sequence[float]) -> Stat:
    if not samples:
        return NO_SAMPLES
    kept = without_outliers(samples)
    return Stat(float(statistics.fmean(kept)), len(kept), float(statistics.median(samples)), len(samples))


# ---- what the trace holds, per top-level op ------------------------------------------------------------------


@dataclass(frozen=True)
class Kernel:
    """One piece of GPU work a launch issued, with what a kernel model needs to re-price it."""

    name: str
    kind: str  # gpu, memcpy, memset
    kernel_class: str
    stream: str
    start_us: float  # traced start
    duration_us: float
    op: str | None  # innermost CPU op around the launch, and its input dims
    shapes: Any = None


@dataclass(frozen=True)
class Launch:
    """An outermost runtime call that issued GPU work or waited for the device."""

    name: str
    ts: float
    end: float
    kernels: tuple[Kernel, ...]
    waits: bool
    gpu_events: int  # GPU events the call issued (the profiler records each)


@dataclass(frozen=True)
class Item:
    """A top-level unit of CPU work in issue order: an ``op``, a ``call`` made outside any op, or a
    ``dataloader`` range. ``inner``: sorted start times of the CPU events nested in it (ops, runtime calls)."""

    kind: str
    name: str
    ts: float
    end: float
    launches: tuple[Launch, ...] = ()
    inner: tuple[float, ...] = ()


@dataclass
class _Open:
    """A top-level op or data-loading range being swept."""

    kind: str
    ev: Event
    launches: list[Launch] = field(default_factory=list)
    inner: list[float] = field(default_factory=list)


@dataclass
class _OpenCall:
    ev: Event
    corrs: list[int]
    op: Event | None
    owner: _Open | None


def top_level_items(trace: Trace) -> tuple[list[Item], list[float]]:
    """Every thread's top-level ops, outside calls and data-loading ranges, merged in start order; and the sorted
    start times of the CPU events outside them (annotations, calls that neither launch nor wait), which sit inside
    T1 gaps."""
    gpu_of: dict[int, list[Event]] = {}
    for g in trace.gpu:
        if g.args is not None and g.args.correlation is not None:
            gpu_of.setdefault(g.args.correlation, []).append(g)
    per_thread: dict[tuple[Any, Any], list[tuple[Event, int]]] = {}
    for family, events in ((0, trace.annotations), (1, trace.cpu_ops), (2, trace.runtime)):
        for ev in events:
            per_thread.setdefault((ev.pid, ev.tid), []).append((ev, family))
    items: list[Item] = []
    outside: list[float] = []
    for evs in per_thread.values():
        if not any(f == 1 for _, f in evs):
            continue  # a thread that runs no op only polls (NCCL watchdog, profiler): not the training loop
        evs.sort(key=lambda it: (it[0].ts, -it[0].dur, it[1]))  # type: ignore[operator]
        _sweep(evs, gpu_of, items, outside)
    items.sort(key=lambda it: it.ts)
    outside.sort()
    return _extend_data_loading(items), outside


def _extend_data_loading(items: list[Item]) -> list[Item]:
    """A data-loading range runs on to the next top-level unit: the Python that hands the batch over (a 15-30 ms
    gap in the shared ResNet trace) is data loading too, as in the paper, which skips from the loader to the
    forward pass."""
    out = list(items)
    for i, it in enumerate(out[:-1]):
        nxt = out[i + 1].ts
        if it.kind == "dataloader" and nxt > it.end:
            out[i] = Item(it.kind, it.name, it.ts, nxt, it.launches, it.inner)
    return out


def _sweep(evs: list[tuple[Event, int]], gpu_of: dict[int, list[Event]], items: list[Item], outside: list[float]) -> None:
    stack: list[tuple[float, _Open | None, Event | None]] = []  # (end, the top-level unit it opens, innermost op)
    call: _OpenCall | None = None

    def close_call() -> None:
        nonlocal call
        if call is not None:
            launch = _launch(call, gpu_of)
            if launch is not None:
                if call.owner is not None:
                    call.owner.launches.append(launch)
                else:
                    items.append(Item("call", launch.name, launch.ts, launch.end, (launch,)))
            elif call.owner is None:
                outside.append(call.ev.ts)  # type: ignore[arg-type]
            call = None

    def pop() -> None:
        _, unit, _ = stack.pop()
        if unit is not None:
            ev = unit.ev
            items.append(Item(unit.kind, ev.name, ev.ts, ev.ts + ev.dur, tuple(unit.launches), tuple(unit.inner)))  # type: ignore[arg-type, operator]

    for ev, family in evs:
        ts: float = ev.ts  # type: ignore[assignment]
        end = ts + ev.dur  # type: ignore[operator]
        if call is not None and ts >= call.ev.ts + call.ev.dur:  # type: ignore[operator]
            close_call()
        while stack and stack[-1][0] <= ts:
            pop()
        unit = next((u for _, u, _ in reversed(stack) if u is not None), None)
        if unit is not None:
            unit.inner.append(ts)
        if family == 2:
            corr = ev.args.correlation if ev.args is not None else None
            if call is not None:  # a driver call inside a runtime call: its GPU work is the outer call's
                if corr is not None:
                    call.corrs.append(corr)
                continue
            if unit is not None and unit.kind == "dataloader":
                continue
            call = _OpenCall(ev, [corr] if corr is not None else [], stack[-1][2] if stack else None, unit)
            continue
        op = stack[-1][2] if stack else None
        if unit is not None:  # nested in an op or in data loading: part of it
            stack.append((end, None, ev if family == 1 and not _LABEL_RE.search(ev.name) else op))
            continue
        if range_phase(ev.name, "user_annotation") == "dataloader" and (family == 0 or _LABEL_RE.search(ev.name)):
            stack.append((end, _Open("dataloader", ev), op))
        elif family == 0 or _LABEL_RE.search(ev.name):
            outside.append(ts)
            stack.append((end, None, op))
        else:
            stack.append((end, _Open("op", ev), ev))
    close_call()
    while stack:
        pop()


def _launch(call: _OpenCall, gpu_of: dict[int, list[Event]]) -> Launch | None:
    ev = call.ev
    gpu = [g for c in call.corrs for g in gpu_of.get(c, ())]
    end = ev.ts + ev.dur  # type: ignore[operator]
    waits = host_waits(ev.name)
    kernels = []
    for g in gpu:
        kind = "memcpy" if g.cat in MEMCPY_CATS else "memset" if g.cat in MEMSET_CATS else "gpu"
        if kind == "memcpy" and copy_waits(ev.name, g.name, ev.ts, end, g.ts, g.ts + g.dur):  # type: ignore[arg-type, operator]
            waits = True  # the graph builder splits this call into the issue and a `NAME [wait]` task
        args = g.args
        stream = args.stream if args is not None and args.stream is not None else g.tid
        op = call.op
        shapes = None
        if op is not None and op.args is not None:
            shapes = op.args.input_dims if op.args.input_dims is not None else op.args.input_dims_2021
        kernels.append(
            Kernel(
                g.name,
                kind,
                classify_kernel(g.name, kind),
                str(stream),
                float(g.ts),  # type: ignore[arg-type]
                float(g.dur),  # type: ignore[arg-type]
                op.name if op else None,
                shapes,
            )
        )
    if not kernels and not waits:
        return None
    return Launch(ev.name, float(ev.ts), float(end), tuple(kernels), waits, len(gpu))  # type: ignore[arg-type]


# ---- the overhead database -----------------------------------------------------------------------------------


@dataclass
class Overheads:
    """T1..T5 of one trace (or of the iterations it was extracted from): plain data, JSON via to_dict/from_dict.

    ``launches``: how many launches an op most often makes (for pricing an op by name alone)."""

    t1: Stat = NO_SAMPLES
    t2: dict[str, Stat] = field(default_factory=dict)
    t3: dict[str, Stat] = field(default_factory=dict)
    t4: dict[str, Stat] = field(default_factory=dict)
    t5: dict[str, Stat] = field(default_factory=dict)
    cpu_only: dict[str, Stat] = field(default_factory=dict)
    launches: dict[str, int] = field(default_factory=dict)
    profiler_correction: bool = True
    cpu_event_us: float = DEFAULT_CPU_EVENT_US
    gpu_event_us: float = DEFAULT_GPU_EVENT_US
    source: str = ""

    @property
    def t1_us(self) -> float:
        return self.t1.mean_us

    def to_dict(self) -> dict[str, Any]:
        def table(d: dict[str, Stat]) -> dict[str, Any]:
            return {k: v.to_dict() for k, v in sorted(d.items())}

        return {
            "t1": self.t1.to_dict(), "t2": table(self.t2), "t3": table(self.t3), "t4": table(self.t4), "t5": table(self.t5),
            "cpu_only": table(self.cpu_only), "launches": dict(sorted(self.launches.items())),
            "profiler_correction": self.profiler_correction, "cpu_event_us": self.cpu_event_us,
            "gpu_event_us": self.gpu_event_us, "source": self.source,
        }  # fmt: skip

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Overheads:
        """Raises :class:`DaydreamError` naming what is wrong with a malformed overhead table."""
        try:

            def table(key: str) -> dict[str, Stat]:
                return {str(k): Stat.from_dict(v) for k, v in (d.get(key) or {}).items()}

            return cls(
                t1=Stat.from_dict(d["t1"]), t2=table("t2"), t3=table("t3"), t4=table("t4"), t5=table("t5"),
                cpu_only=table("cpu_only"), launches={str(k): int(v) for k, v in (d.get("launches") or {}).items()},
                profiler_correction=bool(d.get("profiler_correction", True)),
                cpu_event_us=float(d.get("cpu_event_us", DEFAULT_CPU_EVENT_US)),
                gpu_event_us=float(d.get("gpu_event_us", DEFAULT_GPU_EVENT_US)), source=str(d.get("source", "")),
            )  # fmt: skip
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise DaydreamError(f"malformed overhead table: {type(exc).__name__}: {exc}") from None


def extract_overheads(
    trace: Trace,
    profiler_correction: bool = True,
    cpu_event_us: float = DEFAULT_CPU_EVENT_US,
    gpu_event_us: float = DEFAULT_GPU_EVENT_US,
    steps: Sequence[Step] | None = None,
) -> Overheads:
    """T1..T5 of ``trace`` from its raw events; ``steps``: only the ops that start inside these windows (to
    extract from some iterations and predict others). ``cpu_event_us`` / ``gpu_event_us``: the profiler's cost per
    recorded CPU / GPU event, subtracted when ``profiler_correction`` (platform dependent: see the module doc)."""
    items, outside = top_level_items(trace)
    ov = overheads_of(items, outside, profiler_correction, cpu_event_us, gpu_event_us, steps)
    ov.source = trace.path + (f" ({len(steps)} iterations: {', '.join(s.name for s in steps)})" if steps is not None else "")
    return ov


def overheads_of(
    items: Sequence[Item],
    outside: Sequence[float],
    profiler_correction: bool = True,
    cpu_event_us: float = DEFAULT_CPU_EVENT_US,
    gpu_event_us: float = DEFAULT_GPU_EVENT_US,
    steps: Sequence[Step] | None = None,
) -> Overheads:
    """:func:`extract_overheads` on units already swept by :func:`top_level_items`."""
    if steps is not None:
        items = [it for it in items if _window_of(it.ts, steps) is not None]
    c = cpu_event_us if profiler_correction else 0.0
    g = gpu_event_us if profiler_correction else 0.0
    t1: list[float] = []
    t2: dict[str, list[float]] = {}
    t3: dict[str, list[float]] = {}
    t4: dict[str, list[float]] = {}
    t5: dict[str, list[float]] = {}
    cpu_only: dict[str, list[float]] = {}
    counts: dict[str, Counter[int]] = {}

    def inside(starts: Sequence[float], lo: float, hi: float) -> int:
        return bisect.bisect_left(starts, hi) - bisect.bisect_left(starts, lo)

    for it in items:
        if it.kind == "dataloader":
            continue
        for ln in it.launches:
            if ln.kernels and not ln.waits:
                nested = max(0, inside(it.inner, ln.ts, ln.end) - 1)  # driver calls inside it (inner holds the call too)
                t4.setdefault(ln.name, []).append(max(0.0, ln.end - ln.ts - g * ln.gpu_events - c * nested))
        if it.kind != "op":
            continue
        if not it.launches:
            cpu_only.setdefault(it.name, []).append(max(0.0, it.end - it.ts - c * len(it.inner)))
            continue
        first, last = it.launches[0], it.launches[-1]
        t2.setdefault(it.name, []).append(max(0.0, first.ts - it.ts - c * inside(it.inner, it.ts, first.ts)))
        t3.setdefault(it.name, []).append(max(0.0, it.end - last.end - c * inside(it.inner, last.end, it.end)))
        for a, b in zip(it.launches, it.launches[1:]):
            t5.setdefault(it.name, []).append(max(0.0, b.ts - a.end - c * inside(it.inner, a.end, b.ts)))
        counts.setdefault(it.name, Counter())[sum(1 for ln in it.launches if ln.kernels)] += 1
    for a, b in zip(items, items[1:]):
        gap = b.ts - a.end
        if a.kind == "dataloader" or b.kind == "dataloader" or gap < 0:
            continue  # data loading's Python tail is not an op overhead; a negative gap is two threads at once
        if steps is not None and _window_of(a.ts, steps) != _window_of(b.ts, steps):
            continue
        t1.append(max(0.0, gap - c * inside(outside, a.end, b.ts)))

    def table(d: dict[str, list[float]]) -> dict[str, Stat]:
        return {k: summarize(v) for k, v in d.items()}

    return Overheads(
        t1=summarize(t1), t2=table(t2), t3=table(t3), t4=table(t4), t5=table(t5), cpu_only=table(cpu_only),
        launches={k: v.most_common(1)[0][0] for k, v in counts.items()}, profiler_correction=profiler_correction,
        cpu_event_us=cpu_event_us, gpu_event_us=gpu_event_us,
    )  # fmt: skip


def _window_of(ts: float, steps: Sequence[Step]) -> int | None:
    for i, s in enumerate(steps):
        if s.start <= ts < s.end:
            return i
    return None


# ---- lookups -------------------------------------------------------------------------------------------------


def _pooled_median(table: Mapping[str, Stat]) -> float:
    means = [s.mean_us for s in table.values() if s.count]
    return float(statistics.median(means)) if means else 0.0


def _per_op(table: Mapping[str, Stat], op: str) -> float:
    stat = table.get(op)
    return stat.mean_us if stat is not None and stat.count else _pooled_median(table)


def launch_us(overheads: Overheads, runtime_fn: str = "cudaLaunchKernel") -> float:
    """T4 of a runtime function: its own mean; else the same call on the other vendor's runtime (``hip`` for
    ``cuda``); else the median over the functions the trace measured; else the paper's fixed 10 us."""
    t4 = overheads.t4
    for name in (runtime_fn, _other_vendor(runtime_fn)):
        stat = t4.get(name) if name else None
        if stat is not None and stat.count:
            return stat.mean_us
    return _pooled_median(t4) if any(s.count for s in t4.values()) else DEFAULT_LAUNCH_US


def _other_vendor(fn: str) -> str | None:
    if fn.startswith("cuda"):
        return "hip" + fn[4:]
    if fn.startswith("hip"):
        return "cuda" + fn[3:]
    return None


def op_overhead_us(overheads: Overheads, op: str, n_launches: int | None = None, runtime_fn: str = "cudaLaunchKernel") -> float:
    """The CPU time of one ``op`` making ``n_launches`` launches of ``runtime_fn``: T2 + T3 + (n-1) T5 + n T4, or
    the op's launch-free CPU time when n is 0. ``n_launches`` defaults to what the op most often made in the trace
    (0 for an op never seen). An op (or an overhead of it) the trace never measured takes the median over the ops
    that were measured (the pooled median of the per-op means), T4 falls back as :func:`launch_us` says."""
    n = overheads.launches.get(op, 0) if n_launches is None else n_launches
    if n < 0:
        raise DaydreamError(f"op_overhead_us: n_launches must be >= 0, got {n}")
    if n == 0:
        return _per_op(overheads.cpu_only, op)
    t5 = _per_op(overheads.t5, op)
    return _per_op(overheads.t2, op) + _per_op(overheads.t3, op) + (n - 1) * t5 + n * launch_us(overheads, runtime_fn)


# ---- the end-to-end estimate (Algorithm 1) --------------------------------------------------------------------


@dataclass(frozen=True)
class E2E:
    """One iteration as Algorithm 1 predicts it.

    ``predicted_us``: the paper's estimate, max(cpu_us, gpu_us) for the iteration run once from an idle CPU and
    GPU. ``period_us``: the same iteration repeated back to back, the time each repetition adds once the repeats
    settle (max of the CPU's and the GPU's advance): what a trace's iteration-to-iteration time measures when the
    GPU still runs one iteration's kernels while the CPU starts the next. ``gpu_active_us``: the kernel time placed.
    ``measured_us``: the traced period of the iteration (its window's length), where the input was a trace."""

    predicted_us: float
    period_us: float
    cpu_us: float
    gpu_us: float
    gpu_active_us: float
    ops: int
    kernels: int
    measured_us: float | None = None
    step: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step, "predicted_us": self.predicted_us, "period_us": self.period_us, "measured_us": self.measured_us,
            "cpu_us": self.cpu_us, "gpu_us": self.gpu_us, "gpu_active_us": self.gpu_active_us, "ops": self.ops,
            "kernels": self.kernels,
        }  # fmt: skip


KernelTime = Callable[[Kernel], float]
# Repetitions of an iteration until its per-repetition advance stops changing (it settles after two or three).
MAX_REPEATS = 10


def predict_e2e(
    trace_or_graph: Trace | nx.DiGraph,
    overheads: Overheads,
    kernel_us: KernelTime | None = None,
    step: Step | None = None,
    model_waits: bool = True,
) -> E2E:
    """Algorithm 1 of the paper over one iteration's top-level ops, in order::

        cpu += T1
        op with launches: cpu += T2; per launch: per kernel k: gpu = max(gpu + 1us, cpu + T4/2) + T_k;
                          cpu += T4; between launches cpu += T5; then cpu += T3
        op without:       cpu += its CPU time (the paper's T5)
        iteration = max(cpu, gpu)

    Kernel times T_k are the traced ones, or ``kernel_us(kernel)``. Input: a trace (``step``: the window, default
    the median-period iteration, :func:`default_iteration`) or a graph from :func:`daydream.graph.build_graph`
    (after any transform; its kernel durations are the T_k). Beyond the paper, and stated here so nobody is
    surprised: ``gpu`` is kept per stream (identical on one stream); a call that waited for the device
    (synchronize, blocking copy) sets cpu = max(cpu, gpu) when ``model_waits`` (the paper's algorithm has no
    waits: ``model_waits=False``); a data-loading range adds its traced CPU time (it is not an op); a runtime call
    made outside any op is an op with one launch and no T2/T3/T5; and ``period_us`` (see :class:`E2E`).

    On a graph, ops are the runs of runtime calls under one top-level op call (:func:`graph_items`)."""
    if isinstance(trace_or_graph, nx.DiGraph):
        items = graph_items(trace_or_graph, overheads)
        measured, name = None, None
    else:
        window = step or default_iteration(trace_or_graph)
        items = [it for it in top_level_items(trace_or_graph)[0] if window.start <= it.ts < window.end]
        measured, name = window.end - window.start, window.name
    return run_algorithm(items, overheads, kernel_us, model_waits, measured, name)


@dataclass(frozen=True)
class _Planned:
    """One top-level unit with every time looked up: CPU time before its first launch, per launch (T4, whether
    it waits, its kernels as (stream, time)), CPU time between launches and after the last."""

    before_us: float
    launches: tuple[tuple[float, bool, tuple[tuple[str, float], ...]], ...]
    between_us: float
    after_us: float


def _plan(items: Sequence[Item], overheads: Overheads, kernel_us: KernelTime | None) -> list[_Planned]:
    plan = []
    t1 = overheads.t1_us
    for it in items:
        if it.kind == "dataloader":
            plan.append(_Planned(it.end - it.ts, (), 0.0, 0.0))
            continue
        if not it.launches:
            plan.append(_Planned(t1 + _per_op(overheads.cpu_only, it.name), (), 0.0, 0.0))
            continue
        is_op = it.kind == "op"
        launches = tuple(
            (
                launch_us(overheads, ln.name) if ln.kernels else 0.0,
                ln.waits,
                tuple((k.stream, kernel_us(k) if kernel_us is not None else k.duration_us) for k in ln.kernels),
            )
            for ln in it.launches
        )
        if is_op:
            plan.append(
                _Planned(
                    t1 + _per_op(overheads.t2, it.name), launches, _per_op(overheads.t5, it.name), _per_op(overheads.t3, it.name)
                )
            )
        else:
            plan.append(_Planned(t1, launches, 0.0, 0.0))
    return plan


def _run(plan: Sequence[_Planned], cpu: float, gpu: dict[str, float], model_waits: bool) -> float:
    """One pass of Algorithm 1 from CPU time ``cpu`` and per-stream GPU ends ``gpu`` (updated in place);
    returns the CPU time at the end."""
    for p in plan:
        cpu += p.before_us
        for i, (t4, waits, kernels) in enumerate(p.launches):
            if i:
                cpu += p.between_us
            for stream, t_k in kernels:
                gpu[stream] = max(gpu.get(stream, 0.0) + KERNEL_GAP_US, cpu + t4 / 2) + t_k
            cpu += t4
            if waits and model_waits and gpu:
                cpu = max(cpu, max(gpu.values()))
        if p.launches:
            cpu += p.after_us
    return cpu


def run_algorithm(
    items: Sequence[Item],
    overheads: Overheads,
    kernel_us: KernelTime | None = None,
    model_waits: bool = True,
    measured_us: float | None = None,
    step: str | None = None,
) -> E2E:
    """Algorithm 1 over ``items`` (see :func:`predict_e2e`)."""
    plan = _plan(items, overheads, kernel_us)
    gpu: dict[str, float] = {}
    cpu = _run(plan, 0.0, gpu, model_waits)
    gpu_end = max(gpu.values(), default=0.0)
    first = (cpu, gpu_end)
    advance: tuple[float, float] | None = None
    last = first
    for _ in range(MAX_REPEATS):
        cpu = _run(plan, cpu, gpu, model_waits)
        now = (cpu, max(gpu.values(), default=0.0))
        step_advance = (now[0] - last[0], now[1] - last[1])
        last = now
        if advance is not None and all(math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6) for a, b in zip(advance, step_advance)):
            break
        advance = step_advance
    period = max(advance) if advance is not None else max(first)
    active = sum(t for p in plan for _, _, ks in p.launches for _, t in ks)
    n_kernels = sum(len(ks) for p in plan for _, _, ks in p.launches)
    n_ops = sum(1 for it in items if it.kind != "dataloader")
    return E2E(max(first), period, first[0], first[1], active, n_ops, n_kernels, measured_us, step)


def graph_items(graph: nx.DiGraph, overheads: Overheads | None = None) -> list[Item]:
    """The top-level units of a dependency graph, in start order.

    The graph keeps no op boundaries, only each runtime call's ``top_op`` and, where the builder made the graph, the
    ``top_op_id`` that tells two calls of one name apart: one op is a run of consecutive runtime calls of a thread
    under the same top-level op. Without ``top_op_id`` (a graph built by hand) back-to-back ops of one name (a row of
    ``AccumulateGrad``) come as one run; given ``overheads``, such a run is cut between two launches whose traced CPU
    gap is nearer to what separates two ops of that name (T3 + T1 + T2) than to what separates two launches of one
    op (T5)."""
    per_thread: dict[str, list[int]] = {}
    for n, a in graph.nodes(data=True):
        if a["kind"] in ("cpu", "dataloader"):
            per_thread.setdefault(a["thread"], []).append(n)
    items: list[Item] = []
    for tasks in per_thread.values():
        # the wait half of a split call right after its issue, before a call that starts when it does (a wait of 0 us)
        tasks.sort(key=lambda n: (graph.nodes[n]["start"], not graph.nodes[n]["name"].endswith(" [wait]")))
        items += _graph_thread_items(graph, tasks, overheads)
    items.sort(key=lambda it: it.ts)
    return _extend_data_loading(items)


def _split_run(run: Item, overheads: Overheads) -> list[Item]:
    between_ops = _per_op(overheads.t3, run.name) + overheads.t1_us + _per_op(overheads.t2, run.name)
    within_op = _per_op(overheads.t5, run.name)
    parts: list[list[Launch]] = [[run.launches[0]]]
    for prev, ln in zip(run.launches, run.launches[1:]):
        gap = ln.ts - prev.end
        if abs(gap - between_ops) < abs(gap - within_op):
            parts.append([])
        parts[-1].append(ln)
    if len(parts) == 1:
        return [run]
    return [Item("op", run.name, p[0].ts if i else run.ts, p[-1].end, tuple(p)) for i, p in enumerate(parts)]


@dataclass
class _OpRun:
    """Consecutive runtime calls of one thread under one top-level op (``op_id``: its ``top_op_id``, None where
    the graph has none)."""

    name: str
    op_id: Any
    ts: float
    end: float
    launches: list[Launch] = field(default_factory=list)


def _graph_thread_items(graph: nx.DiGraph, tasks: list[int], overheads: Overheads | None = None) -> list[Item]:
    items: list[Item] = []
    run: _OpRun | None = None

    def close() -> None:
        nonlocal run
        if run is not None:
            it = Item("op", run.name, run.ts, run.end, tuple(run.launches))
            exact = run.op_id is not None  # the run is one op call: nothing to guess
            items.extend(_split_run(it, overheads) if overheads is not None and not exact and len(it.launches) > 1 else [it])
            run = None

    for n in tasks:
        a = graph.nodes[n]
        start, end = float(a["start"]), float(a["start"]) + float(a["duration"])
        if a["kind"] == "dataloader":
            close()
            items.append(Item("dataloader", a["name"], start, end))
            continue
        if a["name"].endswith(" [wait]"):  # the builder splits a blocking call in two: the issue, then the wait
            if run is not None and run.launches and a["name"] == run.launches[-1].name + " [wait]":
                run.launches[-1] = _waited(run.launches[-1], end)
                run.end = max(run.end, end)
            elif run is None and items and items[-1].kind == "call" and a["name"] == items[-1].name + " [wait]":
                last = items[-1]
                items[-1] = Item("call", last.name, last.ts, end, (_waited(last.launches[0], end),))
            continue
        launch = _graph_launch(graph, n)
        if a.get("top_op") is None:
            if launch is not None:
                close()
                items.append(Item("call", a["name"], start, end, (launch,)))
            elif a.get("op") == a["name"]:  # an op that launched nothing is one task
                close()
                items.append(Item("op", a["name"], start, end))
            continue
        op_id = a.get("top_op_id")
        if run is None or run.name != a["top_op"] or run.op_id != op_id:
            close()
            run = _OpRun(a["top_op"], op_id, start, end)
        run.end = end
        if launch is not None:
            run.launches.append(launch)
    close()
    return items


def _waited(ln: Launch, end: float) -> Launch:
    return Launch(ln.name, ln.ts, end, ln.kernels, True, ln.gpu_events)


def _graph_launch(graph: nx.DiGraph, n: int) -> Launch | None:
    a = graph.nodes[n]
    kernels = []
    for _, child, e in graph.out_edges(n, data=True):
        if e.get("kind") != "launch":
            continue
        k = graph.nodes[child]
        kernels.append(
            Kernel(
                k["name"],
                k["kind"] if k["kind"] in ("memcpy", "memset") else "gpu",
                k.get("class", "other"),
                str(k["thread"]),
                float(k["start"]),
                float(k["duration"]),
                k.get("op"),
                k.get("shapes"),
            )
        )
    start = float(a["start"])
    end = start + float(a["duration"])
    name = a["name"]
    # As in the trace sweep (_launch), by the one table (daydream.trace.runtime_calls); a copy call the builder split
    # waits again in its `NAME [wait]` task (_graph_thread_items). Beyond the table: a wait a transform added (a
    # `sync` edge from GPU work); a `sync` edge from another CPU thread (loss.backward() waiting for the autograd
    # engine) is no wait for the device.
    waits = (
        host_waits(name)
        or any(
            k.kind == "memcpy" and copy_waits(name, k.name, start, end, k.start_us, k.start_us + k.duration_us) for k in kernels
        )
        or any(e.get("kind") == "sync" and graph.nodes[u].get("kind") in GPU_KINDS for u, _, e in graph.in_edges(n, data=True))
    )
    if not kernels and not waits:
        return None
    kernels.sort(key=lambda k: k.start_us)
    return Launch(name, start, end, tuple(kernels), waits, len(kernels))


# ---- iterations and accuracy ------------------------------------------------------------------------------------


def whole_iterations(trace: Trace) -> list[Step]:
    """The trace's iterations (``daydream.trace.steps.iteration_steps``) that are whole periods: windows between
    optimizer steps start at the first one's end, so the window from the trace's start to it (warm-up, profiler
    start) is dropped; ProfilerStep windows are whole as they are."""
    steps = iteration_steps(trace)
    if steps and not profiler_steps(trace):
        steps = steps[1:]
    return steps


def default_iteration(trace: Trace) -> Step:
    """The median-period iteration of the trace's whole iterations (the whole trace when it has none)."""
    steps = whole_iterations(trace)
    if not steps:
        items = top_level_items(trace)[0]
        if not items:
            raise DaydreamError(f"{trace.path}: no CPU ops or runtime calls to estimate an iteration from")
        return Step("trace", items[0].ts, max(it.end for it in items))
    ordered = sorted(steps, key=lambda s: s.end - s.start)
    return ordered[(len(ordered) - 1) // 2]


@dataclass(frozen=True)
class IterationCheck:
    """One iteration predicted from overheads extracted from the *other* iterations of its trace.

    ``data_loading_us``: traced data-loading time in the iteration, an input of the estimate (not predicted)."""

    step: str
    measured_us: float
    predicted_us: float  # the paper's single pass from idle
    period_us: float  # the repeated iteration's period: what measured_us measures
    measured_active_us: float  # traced kernel time of the work the iteration launched
    predicted_active_us: float
    data_loading_us: float
    cpu_us: float
    gpu_us: float

    @property
    def error_pct(self) -> float:
        return 100.0 * (self.period_us - self.measured_us) / self.measured_us


def check_iterations(
    trace: Trace, profiler_correction: bool = False, model_waits: bool = True, kernel_us: KernelTime | None = None
) -> list[IterationCheck]:
    """Two-fold check: overheads from the even-numbered iterations predict the odd ones and vice versa, so no
    iteration is predicted from its own overheads. Needs two whole iterations.

    ``profiler_correction`` defaults to off here: the measured iterations were profiled, so overheads cleaned of
    the profiler's cost would predict a faster, unprofiled run than the one they are compared with."""
    steps = whole_iterations(trace)
    if len(steps) < 2:
        raise DaydreamError(
            f"{trace.path}: {len(steps)} whole iteration(s); checking the estimate needs two, to extract overheads from "
            "one and predict the other"
        )
    items, outside = top_level_items(trace)
    checks: list[IterationCheck] = []
    for fit, test in ((steps[0::2], steps[1::2]), (steps[1::2], steps[0::2])):
        ov = overheads_of(items, outside, profiler_correction, steps=fit)
        for s in test:
            window = [it for it in items if s.start <= it.ts < s.end]
            e = run_algorithm(window, ov, kernel_us, model_waits, s.end - s.start, s.name)
            traced = sum(k.duration_us for it in window for ln in it.launches for k in ln.kernels)
            loading = sum(it.end - it.ts for it in window if it.kind == "dataloader")
            checks.append(
                IterationCheck(
                    s.name, s.end - s.start, e.predicted_us, e.period_us, traced, e.gpu_active_us, loading, e.cpu_us, e.gpu_us
                )
            )
    order = {s.name: i for i, s in enumerate(steps)}
    checks.sort(key=lambda c: order[c.step])
    return checks


def accuracy(trace_paths: Iterable[str | Path], profiler_correction: bool = False) -> list[Accuracy]:
    """E2E error of Algorithm 1 on each trace: GMAE over its whole iterations of the predicted period against the
    traced one, each iteration predicted from the overheads of the other half (:func:`check_iterations`), with the
    traced kernel times (so the error is the overhead model's and the algorithm's, not a kernel model's)."""
    results = []
    for path in trace_paths:
        checks = check_iterations(load_trace(path), profiler_correction=profiler_correction)
        stem = Path(path).name.removesuffix(".gz").removesuffix(".json")
        results.append(
            Accuracy(
                f"e2e-overheads/{stem}",
                gmae([c.period_us for c in checks], [c.measured_us for c in checks]),
                len(checks),
                f"{path}: iteration periods, each predicted from T1..T5 of the other half (even/odd) of the iterations",
            )
        )
    return results
