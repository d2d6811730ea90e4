"""What a trace holds per top-level op: the ops, calls made outside any op and data-loading ranges of every thread
that runs ops, in issue order, each with its launches and their GPU work (see :mod:`daydream.perf.cpu.overheads`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from daydream.graph.context import range_phase
from daydream.graph.kernel_class import classify_kernel
from daydream.trace.model import MEMCPY_CATS, MEMSET_CATS, Trace
from daydream.trace.runtime_calls import LaunchQueue, copy_waits, host_waits, may_wait_for_queue
from daydream.trace.schema import Event

# CPU ranges that label a step, phase or module rather than run an op (some exporters file them as cpu_op).
_LABEL_RE = re.compile(
    r"^ProfilerStep#|^Optimizer\.|^##.*##$|^enumerate\(DataLoader\)|^DistributedDataParallel\.|^nn\.Module:"
    r" |^daydream\."
    r"|^\[pytorch\|profiler|^PyTorch Profiler"
)


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
    queued = _queue_waits(trace)
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
        _sweep(evs, gpu_of, queued, items, outside)
    items.sort(key=lambda it: it.ts)
    outside.sort()
    return extend_data_loading(items), outside


def extend_data_loading(items: list[Item]) -> list[Item]:
    """A data-loading range runs on to the next top-level unit: the Python that hands the batch over (a 15-30 ms
    gap in the shared ResNet trace) is data loading too, as in the paper, which skips from the loader to the
    forward pass."""
    out = list(items)
    for i, it in enumerate(out[:-1]):
        nxt = out[i + 1].ts
        if it.kind == "dataloader" and nxt > it.end:
            out[i] = Item(it.kind, it.name, it.ts, nxt, it.launches, it.inner)
    return out


def _queue_waits(trace: Trace) -> set[int]:
    """The ids of the runtime calls that waited for room in the launch queue (as the graph builder finds them:
    trace.runtime_calls.LaunchQueue, each GPU task issued when the call with its correlation id began)."""
    calls = [ev for ev in trace.runtime if may_wait_for_queue(ev.name, ev.dur)]  # type: ignore[arg-type]
    if not calls:
        return set()
    issued_at = {
        ev.args.correlation: ev.ts for ev in trace.runtime if ev.args is not None and ev.args.correlation is not None
    }
    devices: dict[Any, tuple[list[float], list[float]]] = {}
    for g in trace.gpu:
        args = g.args
        device = args.device if args is not None and args.device is not None else g.pid
        corr = args.correlation if args is not None else None
        issued, ends = devices.setdefault(device, ([], []))
        issued.append(issued_at.get(corr, g.ts) if corr is not None else g.ts)  # type: ignore[arg-type]
        ends.append(g.ts + g.dur)  # type: ignore[operator]
    queues = [LaunchQueue(issued, ends) for issued, ends in devices.values()]
    return {id(ev) for ev in calls if any(q.freed_by(ev.ts, ev.ts + ev.dur) is not None for q in queues)}  # type: ignore[arg-type, operator]


def _sweep(
    evs: list[tuple[Event, int]],
    gpu_of: dict[int, list[Event]],
    queued: set[int],
    items: list[Item],
    outside: list[float],
) -> None:
    stack: list[tuple[float, _Open | None, Event | None]] = []  # (end, the top-level unit it opens, innermost op)
    call: _OpenCall | None = None

    def close_call() -> None:
        nonlocal call
        if call is not None:
            launch = _launch(call, gpu_of, queued)
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


def _launch(call: _OpenCall, gpu_of: dict[int, list[Event]], queued: set[int]) -> Launch | None:
    ev = call.ev
    gpu = [g for c in call.corrs for g in gpu_of.get(c, ())]
    end = ev.ts + ev.dur  # type: ignore[operator]
    waits = host_waits(ev.name) or id(ev) in queued  # a launch that waited for room in the queue, as in the graph
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
