"""Builder stage 1: the CPU tasks, from one sweep per CPU thread over its ranges and runtime calls.

A runtime call is a task; so is a CPU op called from Python that launches nothing (its whole time), and a data-loading
range that issues no GPU work. Each task takes the context of the ranges open around it: the op, the layer, the
phase (:mod:`daydream.graph.context` says what each range declares). Kernels take their launch call's context later
(:mod:`daydream.graph.build.gpu`): the paper's synchronization-free mapping (section 4.3).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, NamedTuple

import numpy as np

from daydream._arrays import order_by_start, unique_ints
from daydream.graph.build.table import TaskTable
from daydream.graph.context import LayerPart, op_shapes, range_role
from daydream.graph.schema import new_task_attrs
from daydream.trace.finish import sort_by_start
from daydream.trace.intra_op import runs_across_threads, threading_kind
from daydream.trace.model import ANNOTATION_CATS, CPU_OP_CATS, RANGE_CAT, RUNTIME_CATS, Trace
from daydream.trace.runtime_calls import QUEUE_WAIT_MIN_US, may_wait_for_queue
from daydream.trace.schema import Event


class Family(IntEnum):
    """Which of the trace's CPU event families an event comes from. The value breaks ties in the sweep's order:
    of two events with the same start and length, an annotation encloses an op, and an op a runtime call."""

    ANNOTATION = 0  # a range: record_function, nn.Module, ProfilerStep, Optimizer.step, a DataLoader's __next__
    OP = 1  # a CPU op (aten::..., autograd nodes)
    RUNTIME = 2  # a CUDA/HIP runtime or driver call


ANNOTATION, OP, RUNTIME = Family.ANNOTATION, Family.OP, Family.RUNTIME
# An event's family by its category (the loader files ranges recorded as ops under "user_annotation").
FAMILY_OF_CAT = {
    **dict.fromkeys(ANNOTATION_CATS, ANNOTATION),
    **dict.fromkeys(CPU_OP_CATS, OP),
    **dict.fromkeys(RUNTIME_CATS, RUNTIME),
}


class Frame:
    """A range open on the sweep's stack, with the context it gives what runs inside it. A frame starts with the
    context of the frame it opened in (its parent); what the range itself declares is set on it after."""

    __slots__ = ("end", "family", "ev", "mark", "op", "op_ev", "top_op", "top_op_id", "layer", "phase", "region",
                 "bwd_seq", "fwd_seq", "comm_ev", "dataloader", "top", "has_runtime", "inner_shapes", "inner_layer", "nested_op_us",
                 "parallel_us", "nested_parts")

    end: float  # where the range ends: events starting from here on are outside it
    family: Family
    ev: Event  # the range's own event
    mark: int  # how many CPU-only tasks were pending when it opened: a data-loading range drops the ones inside it
    # The context, inherited from the parent frame:
    op: str | None  # innermost op (this range, if an op, else the enclosing one)
    op_ev: Event | None  # its event
    top_op: str | None  # outermost op
    top_op_id: int | None  # which call of top_op: numbered per graph build
    layer: str | None  # module path
    phase: str | None
    region: str | None  # the range that set ``phase``
    bwd_seq: int | None  # autograd sequence number of the backward node being evaluated
    fwd_seq: int | None  # autograd sequence number of the forward op outside the backward pass it runs in
    comm_ev: Event | None  # the op or ``nccl:`` range that names a collective
    dataloader: bool  # inside a data-loading range
    top: Frame | None  # the outermost op's frame (a CPU-only trace's), where the ops nested in it report their time
    # What the sweep learns of what ran inside:
    has_runtime: bool  # a runtime call ran inside it: it is no task of its own
    inner_shapes: Any  # the first nested op's input dims (an autograd wrapper's are its op's)
    inner_layer: str | None  # a recorder module range inside an op (AccumulateGrad of a module's parameter)
    nested_op_us: float  # time of the ops called inside this frame (outermost ones), for an op's own time
    parallel_us: float  # own time of the ops in this frame that ran across the intra-op threads
    nested_parts: list[tuple[tuple[tuple[int, ...], ...], float]] | None  # an outermost op's: each nested op's
    # tensor inputs' dims and own time, for the share of it that is parameter-sized (cpu_tasks decides at the end)

    def __init__(self, end: float, family: Family, ev: Event, mark: int, parent: Frame | None) -> None:
        self.end, self.family, self.ev, self.mark = end, family, ev, mark
        if parent is None:
            self.op = self.op_ev = self.top_op = self.top_op_id = self.layer = self.phase = self.region = None
            self.bwd_seq = self.fwd_seq = self.comm_ev = self.top = None
            self.dataloader = False
        else:
            self.op, self.op_ev, self.top_op, self.top_op_id = parent.op, parent.op_ev, parent.top_op, parent.top_op_id
            self.layer, self.phase, self.region = parent.layer, parent.phase, parent.region
            self.bwd_seq, self.fwd_seq = parent.bwd_seq, parent.fwd_seq
            self.comm_ev, self.dataloader = parent.comm_ev, parent.dataloader
            self.top = parent.top or (parent if parent.nested_parts is not None else None)
        self.nested_parts = None
        self.has_runtime = False
        self.inner_shapes = self.inner_layer = None
        self.nested_op_us = self.parallel_us = 0.0


class LoaderRange(NamedTuple):
    """An outermost data-loading range: the stage that finds waits for DataLoader workers reads these."""

    thread: str
    ts: float
    end: float
    name: str


@dataclass(slots=True)
class CpuCalls:
    """What the sweep found besides the tasks, for the stages after it."""

    corr_task: dict[int, int] = field(default_factory=dict)  # correlation id -> task of the runtime call carrying it
    comm_ev: dict[int, Event] = field(default_factory=dict)  # runtime-call task -> the collective's op or range
    # task -> autograd sequence number of the backward node it ran in, and of the forward op (outside a backward
    # pass) it ran in: a forward op whose node a backward pass of its step evaluated is in a forward pass
    bwd_seq: dict[int, int] = field(default_factory=dict)
    fwd_seq: dict[int, int] = field(default_factory=dict)
    loader_ranges: list[LoaderRange] = field(default_factory=list)
    # calls that issue work and took long enough to have waited for room in the launch queue (may_wait_for_queue)
    long_calls: list[int] = field(default_factory=list)


class _PendingTask(NamedTuple):
    """A CPU-only task, added once its thread's sweep ends (a data-loading range around it may still drop it)."""

    ts: float
    attrs: dict[str, Any]
    dur: float
    bwd_seq: int | None
    fwd_seq: int | None
    nested_parts: list[tuple[tuple[tuple[int, ...], ...], float]] | None = None


@dataclass(slots=True)
class _Sweep:
    """What the sweeps of a trace's threads share."""

    table: TaskTable
    rank: int
    et_of: dict[int, Any]  # id of a Kineto op -> its execution-trace op: shapes and tensor ids Kineto may lack
    found: CpuCalls = field(default_factory=CpuCalls)
    seq_layer: dict[int, str | None] = field(default_factory=dict)  # forward op's sequence number -> its layer
    top_op_calls: int = 0
    # a trace without GPU work: its CPU ops do the math, and the parameter-sized part of each is kept (param_us)
    cpu_only: bool = False
    # the tensor dims of the optimizer's ops: the parameters' (and their gradients' and states') shapes
    param_shapes: set[tuple[int, ...]] = field(default_factory=set)
    # task -> its nested ops (tensor dims, own time): param_us once the parameters are known
    nested_parts: dict[int, list[tuple[tuple[tuple[int, ...], ...], float]]] = field(default_factory=dict)


def cpu_tasks(trace: Trace, table: TaskTable) -> CpuCalls:
    """Add the trace's CPU tasks to ``table``; a backward task takes the layer of the forward op with its autograd
    sequence number (what the ``fwdbwd`` flows link)."""
    sweep = _Sweep(
        table, trace.rank, {id(trace.cpu_ops[i]): op for i, op in trace.et_ops.items()}, cpu_only=not trace.family_size("gpu")
    )
    size = sum(trace.family_size(f) for f in ("annotations", "cpu_ops", "runtime"))
    swept = _compiled_sweep(sweep, trace) if size >= COMPILED_MIN_CPU_EVENTS else None
    if swept is not None:  # the sweep's own arrays dropped by now: the tasks are made in the memory they held
        _tasks_from_rows(sweep, *swept)
    else:
        per_thread: defaultdict[tuple[Any, Any], list[Event]] = defaultdict(list)
        for events in (trace.annotations, trace.cpu_ops, trace.runtime):
            for ev in events:
                per_thread[ev.pid, ev.tid].append(ev)
        for (pid, tid), items in per_thread.items():
            sort_by_start(items, _longer_first_then_family)
            _sweep_thread(sweep, f"cpu:{pid}/{tid}", items)
    for task, seq in sweep.found.bwd_seq.items():
        layer = sweep.seq_layer.get(seq)
        if layer is not None:
            table.column("layer")[task] = layer
    if sweep.param_shapes:
        shapes, param_us = sweep.param_shapes, table.column("param_us")
        for task, parts in sweep.nested_parts.items():
            param_us[task] = sum(own for dims, own in parts if all(d in shapes for d in dims))
    return sweep.found


def _longer_first_then_family(ev: Event) -> tuple[float, Family]:
    """The sweep's order of events that start together: the longest first, then annotation, op, runtime call."""
    return -ev.dur, FAMILY_OF_CAT[ev.cat]  # type: ignore[operator,index]


def _sweep_thread(sweep: _Sweep, thread: str, items: list[Event]) -> None:
    stack: list[Frame] = []
    pending: list[_PendingTask] = []  # CPU-only tasks, in the order their ranges closed
    call_end, call_task = -math.inf, -1  # the last runtime call: calls starting inside it are nested in it
    corr_task = sweep.found.corr_task
    family_of = FAMILY_OF_CAT
    for ev in items:
        family = family_of[ev.cat]  # type: ignore[index]
        ts: float = ev.ts  # type: ignore[assignment]
        end = ts + ev.dur  # type: ignore[operator]
        while stack and stack[-1].end <= ts:
            _close(sweep, stack, pending, thread)
        parent = stack[-1] if stack else None
        if parent is not None and family is ANNOTATION and end > parent.end:
            # An annotation that outlives the range it starts in is not part of it: the recorder's ProfilerStep
            # starts inside the Optimizer.step range (in its post-hook) and holds the whole next step.
            parent = None
        if family is RUNTIME:
            corr = ev.args.correlation if ev.args is not None else None
            if ts < call_end:
                # A driver call inside a runtime call (cuLaunchKernel in cudaLaunchKernel): one CPU task.
                if corr is not None:
                    corr_task[corr] = call_task
                continue
            call_task = _runtime_call(sweep, ev, corr, thread, parent, stack)
            call_end = end
            continue
        stack.append(_open(sweep, ev, family, end, parent, len(pending)))
    while stack:
        _close(sweep, stack, pending, thread)
    table = sweep.table
    for p in pending:
        task = table.add_task(p.attrs, p.ts, p.dur)
        if p.bwd_seq is not None:
            sweep.found.bwd_seq[task] = p.bwd_seq
        if p.fwd_seq is not None:
            sweep.found.fwd_seq[task] = p.fwd_seq
        if p.nested_parts:
            sweep.nested_parts[task] = p.nested_parts


def _runtime_call(sweep: _Sweep, ev: Event, corr: int | None, thread: str, parent: Frame | None, stack: list[Frame]) -> int:
    """The task of a runtime call; the ranges open around it hold CUDA work, so none of them is a task itself."""
    task = sweep.table.add_task(_cpu_attrs(sweep, "cpu", ev.name, thread, parent), ev.ts, ev.dur)  # type: ignore[arg-type]
    if corr is not None:
        sweep.found.corr_task[corr] = task
    if may_wait_for_queue(ev.name, ev.dur):  # type: ignore[arg-type]
        sweep.found.long_calls.append(task)
    if parent is not None:
        if parent.bwd_seq is not None:
            sweep.found.bwd_seq[task] = parent.bwd_seq
        if parent.fwd_seq is not None:
            sweep.found.fwd_seq[task] = parent.fwd_seq
        if parent.comm_ev is not None:
            sweep.found.comm_ev[task] = parent.comm_ev
    for frame in reversed(stack):
        if frame.has_runtime:
            break
        frame.has_runtime = True
    return task


def _open(sweep: _Sweep, ev: Event, family: Family, end: float, parent: Frame | None, mark: int) -> Frame:
    """The frame of a range (an annotation or an op) that starts inside ``parent``: the parent's context, changed by
    what the range declares."""
    frame = Frame(end, family, ev, mark, parent)
    name = ev.name
    phase, layer_part = range_role(name, ev.cat)
    frame.layer = layer_part.path(frame.layer)
    if phase is not None and not (phase == frame.phase == "backward"):
        # a range that declares a phase is its region, but an autograd node inside `evaluate_function: <node>`
        # keeps the wrapper as its region
        frame.region = name
    if phase is not None:
        frame.phase = phase
    if phase == "dataloader" and family is ANNOTATION:
        frame.dataloader = True
    if family is OP:
        # the innermost op of what runs inside it; the outermost, a new call of it, if none encloses it
        frame.op = name
        frame.op_ev = ev
        if frame.top_op is None:
            frame.top_op = name
            frame.top_op_id = sweep.top_op_calls
            sweep.top_op_calls += 1
            if sweep.cpu_only:
                frame.nested_parts = []
        if sweep.cpu_only and frame.phase == "optimizer":
            sweep.param_shapes.update(_tensor_dims(_shapes(sweep, ev)))
        args = ev.args
        if args is not None:
            seq = args.sequence_number  # ties a backward node to its forward op
            if seq is not None:
                if phase == "backward":  # `evaluate_function: <node>`, or the node itself in 2021-era traces
                    frame.bwd_seq = seq
                elif frame.phase != "backward":
                    if seq not in sweep.seq_layer:
                        sweep.seq_layer[seq] = frame.layer
                    if frame.fwd_seq is None:
                        frame.fwd_seq = seq
            if args.collective_name is not None:
                frame.comm_ev = ev
    if name.startswith("nccl:"):
        # Older PyTorch names the collective in a `nccl:<name>` range holding its tensor's dims.
        frame.comm_ev = ev
    return frame


def _close(sweep: _Sweep, stack: list[Frame], pending: list[_PendingTask], thread: str) -> None:
    """Pop the innermost frame: pass what it learned to its parent, and make it a task if it is one."""
    frame = stack.pop()
    ev = frame.ev
    parent = stack[-1] if stack else None
    is_op = frame.family is OP
    # threading_kind first (cached): most ops are never threaded, and their shapes need not be read
    if is_op and threading_kind(ev.name) and runs_across_threads(ev.name, _shapes(sweep, ev)):
        frame.parallel_us += max(0.0, ev.dur - frame.nested_op_us)  # type: ignore[operator]
    top = frame.top
    # an op inside an outermost op: its own time, by its inputs' dims (parameter-sized or not: decided at the end).
    # A library kernel (a matrix product, a convolution, attention) computes on activations in training whatever its
    # inputs' dims: a flattened activation may have a parameter's dims ([batch x tokens, hidden] = an embedding's).
    if is_op and top is not None and threading_kind(ev.name) != "library" and (dims := _tensor_dims(_shapes(sweep, ev))):
        top.nested_parts.append((dims, max(0.0, ev.dur - frame.nested_op_us)))  # type: ignore[operator,union-attr]
    if parent is not None:
        # an annotation between two ops passes its ops' time through: the outer op's own time excludes it
        parent.nested_op_us += ev.dur if is_op else frame.nested_op_us  # type: ignore[operator]
        parent.parallel_us += frame.parallel_us
        if parent.inner_shapes is None:
            # through annotations too: the recorder's range sits between evaluate_function and AccumulateGrad
            parent.inner_shapes = (_shapes(sweep, ev) if is_op else None) or frame.inner_shapes
        if parent.inner_layer is None:
            parent.inner_layer = frame.inner_layer or (
                frame.layer if frame.family is ANNOTATION and frame.layer != parent.layer else None
            )
    outermost_loader = frame.dataloader and frame.family is ANNOTATION and (parent is None or not parent.dataloader)
    if outermost_loader:
        sweep.found.loader_ranges.append(LoaderRange(thread, ev.ts, ev.ts + ev.dur, ev.name))  # type: ignore[arg-type,operator]
    if frame.has_runtime:
        return
    if outermost_loader:
        # Data loading without CUDA work is one task, whatever ops it ran inside.
        del pending[frame.mark :]
        attrs = _cpu_attrs(sweep, "dataloader", ev.name, thread, parent)
        attrs["phase"] = "dataloader"
        attrs["region"] = ev.name
        attrs["parallel_us"] = frame.parallel_us
        pending.append(_PendingTask(ev.ts, attrs, ev.dur, None, None))  # type: ignore[arg-type]
    elif is_op and (parent is None or parent.top_op is None) and not frame.dataloader:
        pending.append(_cpu_op_task(sweep, frame, parent, thread))


def _cpu_op_task(sweep: _Sweep, frame: Frame, parent: Frame | None, thread: str) -> _PendingTask:
    """A CPU op called from Python that launches nothing: its CPU time is a task of its own."""
    ev = frame.ev
    attrs = _cpu_attrs(sweep, "cpu", ev.name, thread, parent)
    attrs["op"] = ev.name
    # `evaluate_function: AccumulateGrad` records no dims; the AccumulateGrad op inside it holds the gradient's.
    own = _shapes(sweep, ev)
    attrs["shapes"] = own if _has_dims(own) or not frame.inner_shapes else frame.inner_shapes
    attrs["top_op_id"] = frame.top_op_id
    attrs["parallel_us"] = frame.parallel_us
    # The op's own phase: `evaluate_function: ...` declares the backward pass itself.
    attrs["phase"], attrs["region"] = frame.phase, frame.region
    if attrs["layer"] is None:
        attrs["layer"] = frame.inner_layer
    return _PendingTask(ev.ts, attrs, ev.dur, frame.bwd_seq, frame.fwd_seq, frame.nested_parts)  # type: ignore[arg-type]


def root_cpu_attrs(kind: str, name: str, thread: str, rank: int) -> dict[str, Any]:
    """The attributes of a CPU task no range encloses."""
    attrs = new_task_attrs(kind)  # filled a key at a time: see new_task_attrs
    attrs["name"] = name
    attrs["thread"] = thread
    attrs["rank"] = rank
    attrs["op"] = attrs["shapes"] = attrs["top_op"] = attrs["top_op_id"] = attrs["layer"] = None
    attrs["phase"] = attrs["region"] = None
    attrs["parallel_us"] = attrs["param_us"] = 0.0
    return attrs


_ROOT_KEYS = tuple(root_cpu_attrs("cpu", "", "", 0))  # a root CPU task's keys, in order
# a CPU task's keys in a range, in the order _cpu_attrs sets them (without an execution trace's tensors)
_CONTEXT_KEYS = ("kind", "name", "thread", "rank", "op", "shapes", "top_op", "layer", "phase", "region", "top_op_id",
                 "parallel_us", "param_us")


def _cpu_attrs(sweep: _Sweep, kind: str, name: str, thread: str, parent: Frame | None) -> dict[str, Any]:
    """The attributes of a CPU task inside ``parent``: its context."""
    if parent is None:
        return root_cpu_attrs(kind, name, thread, sweep.rank)
    attrs = new_task_attrs(kind)  # filled a key at a time: see new_task_attrs
    attrs["name"] = name
    attrs["thread"] = thread
    attrs["rank"] = sweep.rank
    attrs["op"] = parent.op
    attrs["shapes"] = _shapes(sweep, parent.op_ev)
    attrs["top_op"] = parent.top_op
    attrs["layer"] = parent.layer
    attrs["phase"] = parent.phase
    attrs["region"] = parent.region
    attrs["top_op_id"] = parent.top_op_id
    attrs["parallel_us"] = attrs["param_us"] = 0.0
    if sweep.et_of and parent.op_ev is not None and (et := sweep.et_of.get(id(parent.op_ev))) is not None:
        attrs["tensors_in"] = et.input_tensors
        attrs["tensors_out"] = et.output_tensors
    return attrs


def _shapes(sweep: _Sweep, ev: Event | None) -> Any:
    if ev is None:
        return None
    shapes = op_shapes(ev)
    if shapes is None and sweep.et_of and (et := sweep.et_of.get(id(ev))) is not None:
        return [list(x) if isinstance(x, tuple) else x for x in et.input_shapes]
    return shapes


def _tensor_dims(shapes: Any) -> tuple[tuple[int, ...], ...]:
    """The dims of an op's tensor inputs that hold more than one element, from its recorded input dims (a TensorList
    input gives each of its tensors); () where none or not recorded."""
    if not isinstance(shapes, list):
        return ()
    out = []
    for d in shapes:
        if isinstance(d, list) and d:
            if all(type(x) is int for x in d):
                out.append(tuple(d))
            elif all(isinstance(t, list) and t and all(type(x) is int for x in t) for t in d):
                out.extend(tuple(t) for t in d)
    return tuple(dims for dims in out if any(x != 1 for x in dims))


def _has_dims(shapes: Any) -> bool:
    """Whether recorded input dims name any tensor dimension (``[[]]``, a lone scalar, does not)."""
    return isinstance(shapes, list) and any(isinstance(d, list) and d for d in shapes)


# Traces of this many CPU events (ranges, ops, runtime calls) or more are swept by the compiled sweep
# (daydream.graph.build.cpu_sweep): importing numba costs half a second, which a sweep of this size repays.
COMPILED_MIN_CPU_EVENTS = 200_000


def _compiled_sweep(sweep: _Sweep, trace: Trace) -> tuple[Any, ...] | None:
    """The sweep of every thread by the compiled sweep (:mod:`daydream.graph.build.cpu_sweep`) over the trace's CPU columns:
    what :func:`_tasks_from_rows` makes the tasks of; None (nothing done) where the trace has no columns (the columnar
    loader did not read it, or its families changed since: its CPU ops made, its other CPU events not those the
    columns describe), or numba does not import. The CPU ops' events are not made: their columns are read."""
    cols = trace.cpu_columns
    if cols is None or any(f not in trace.pending and trace.family_size(f) for f in ("cpu_ops", "runtime")):
        return None  # the CPU ops or runtime calls made (and perhaps changed) since the loader kept them as columns
    pending = trace.pending.get("cpu_ops")
    annotations = trace.annotations
    sizes = [len(annotations), trace.family_size("cpu_ops"), trace.family_size("runtime")]
    if tuple(sizes) != cols.sizes:
        return None
    if not np.array_equal(np.fromiter(map(id, annotations), np.int64, sizes[0]), cols.ids[: sizes[0]]):
        return None
    n = sum(sizes)
    try:
        from daydream.graph.build import cpu_sweep as cs
    except Exception:  # noqa: BLE001 - numba missing or broken: not an error, only slower
        return None
    family = np.repeat(np.array([cs.ANN, cs.OP, cs.RT], np.int8), sizes)
    # (the arrays below are dropped once read: a 10M-event trace's take 50 MB each)
    order = order_by_start(cols.ts, cols.dur, cols.thread, family)  # by thread, then start, the longest first, family
    # the annotations' events by their place in the sweep (the sweep reads a data-loading range's and an nccl: range's)
    ann_places = np.flatnonzero(order < sizes[0])
    evs = dict(zip(ann_places.tolist(), (annotations[k] for k in order[ann_places].tolist())))
    ts, dur, fam = cols.ts[order], cols.dur[order], family[order]
    del family
    end = ts + dur
    thread_at = cols.thread[order]
    bounds = np.concatenate(([0], np.cumsum(np.bincount(thread_at, minlength=len(cols.threads)))))
    names = _ByPlace(cols.strings, cols.name[order])  # each event's name, looked up where read
    # what each range declares, by (name, category): names repeat
    cat_ids, cat_of = unique_ints(cols.cat[order], return_inverse=True)
    cats = [RANGE_CAT if c < 0 else cols.strings[c] for c in cat_ids.tolist()]
    roles, first, role_of = unique_ints(cols.name[order].astype(np.int64) * len(cats) + cat_of.reshape(-1),
                                      return_index=True, return_inverse=True)
    del cat_of
    part_number: dict[LayerPart, int] = {}
    declared = []
    for role, at in zip(roles.tolist(), first.tolist()):
        name, cat = names[at], cats[role % len(cats)]
        phase, part = range_role(name, cat)
        declared.append((cs.PHASES.index(phase), part_number.setdefault(part, len(part_number)),
                         name.startswith("nccl:"), _THREADED[threading_kind(name)]))
    role_of = role_of.reshape(-1)
    phase_of, part_of, nccl, threaded = (np.array(column, dtype)[role_of] for column, dtype in
                                         zip(zip(*declared), (np.int8, np.int32, np.bool_, np.int8)))
    del role_of
    # the ops' input dims (an execution trace's are not read here: matching it made the ops' events), each distinct
    # value looked at once
    ops = np.flatnonzero(fam == cs.OP)
    shapes = [None, *cols.values]
    shape_at = cols.shapes[order] + np.int32(1)  # 0: None
    shape_of = shape_at[ops]

    def per_op(test: Any) -> np.ndarray:
        out = np.zeros(n, np.bool_)
        if len(ops):
            out[ops] = np.array([bool(test(v)) for v in shapes], np.bool_)[shape_of]
        return out

    shapes_truthy = per_op(bool)
    dims_any = per_op(_tensor_dims) if sweep.cpu_only else np.zeros(n, np.bool_)
    # whether an intra-op threaded op's own time ran across threads: once per distinct (name, input dims)
    across = np.zeros(n, np.bool_)
    if len(pick := np.flatnonzero(threaded[ops])):
        key = names.of[ops[pick]].astype(np.int64) * len(shapes) + shape_of[pick]
        _, first_of, which = unique_ints(key, return_index=True, return_inverse=True)
        runs = [runs_across_threads(names[ops[pick[k]]], shapes[shape_of[pick[k]]]) for k in first_of.tolist()]
        across[ops[pick]] = np.array(runs, np.bool_)[which.reshape(-1)]
    # each range's layer, a level of nesting at a time from its parent's, numbered by its path
    parent, depth, deepest = cs._nesting(bounds, ts, end, fam)
    layer, layers = _layer_numbers(parent, depth, fam != cs.RT, part_of, list(part_number))
    del parent, depth, part_of
    found = cs._sweep(bounds, ts, end, dur, fam, phase_of, layer, np.array([bool(s) for s in layers], np.bool_), nccl,
                      cols.has_seq[order], cols.seq[order], cols.has_collective[order], cols.has_corr[order],
                      cols.corr[order], threaded, across, shapes_truthy, dims_any, sweep.cpu_only, deepest)
    thread_names = [f"cpu:{pid}/{tid}" for pid, tid in cols.threads]
    source = cols.source[order]

    def op_events(places: list[int]) -> list[Event]:
        """The events of the ops at ``places``, made from their columns (collectives' ops: the GPU tasks' stage reads
        them)."""
        from daydream.trace.filing import events_at

        return events_at(pending.batches, source[places]) if places else []  # type: ignore[union-attr]

    def shapes_of(i: int) -> Any:
        return shapes[int(shape_at[i])]

    return found, evs, names, (thread_names, thread_at), layers, ts, dur, shapes_of, op_events


_THREADED = {None: 0, "library": 1, "elementwise": 2}  # threading_kind, as cpu_sweep numbers it


def _rows(rows: np.ndarray) -> Iterator[tuple[int, ...]]:
    """Each task row, its number first (then kind, event, parent's context, own context, inner layer, inner shapes:
    cpu_sweep's R_ columns), read a chunk at a time."""
    for start in range(0, len(rows), 1 << 16):
        yield from enumerate(rows[start : start + (1 << 16)].tolist(), start)


class _ByPlace:
    """A value (a thread's name, an event's name) of the event at each place in the sweep's order, looked up by its
    number where read: no list of one per event."""

    __slots__ = ("names", "of")

    def __init__(self, names: list[str], of: np.ndarray) -> None:
        self.names, self.of = names, of

    def __getitem__(self, i: int) -> str:
        return self.names[self.of[i]]


def _layer_numbers(parent: np.ndarray, depth: np.ndarray, ranges: np.ndarray, part_of: np.ndarray,
                   parts: list[LayerPart]) -> tuple[np.ndarray, list[str | None]]:
    """Each range's layer path as a number (0: None), composed from its parent's a level of nesting at a time, once
    per distinct (parent's layer, part); and the paths by number. Two ranges of one path get one number."""
    layer = np.zeros(len(parent), np.int32)
    paths: list[str | None] = [None]
    number: dict[str | None, int] = {None: 0}
    at = np.flatnonzero(ranges)
    at = at[np.argsort(depth[at], kind="stable")]
    cuts = np.flatnonzero(np.diff(depth[at])) + 1
    for level in np.split(at, cuts) if len(at) else []:
        above = parent[level]
        key = np.where(above >= 0, layer[np.maximum(above, 0)], 0).astype(np.int64) * len(parts) + part_of[level]
        distinct, inverse = unique_ints(key, return_inverse=True)
        made = []
        for k in distinct.tolist():
            base, part = divmod(k, len(parts))
            path = parts[part].path(paths[base])
            if path not in number:
                number[path] = len(paths)
                paths.append(path)
            made.append(number[path])
        layer[level] = np.array(made, np.int32)[inverse.reshape(-1)]
    return layer, paths


def _tasks_from_rows(sweep: _Sweep, found: tuple[np.ndarray, ...], evs: dict[int, Event], names: _ByPlace,
                     threads: tuple[list[str], np.ndarray], layers: list[str | None], ts: np.ndarray, dur: np.ndarray,
                     shapes_of: Callable[[int], Any], op_events: Callable[[list[int]], list[Event]]) -> None:
    """The compiled sweep's task rows made tasks, in order, with what the Python sweep finds beside them (the CPU
    ops read from columns: ``evs`` holds the annotations' events; ``shapes_of`` and ``op_events`` give what the Python sweep
    reads of their events)."""
    from daydream.graph.build import cpu_sweep as cs

    rows, parallel, contexts, corr_ids, seq_layer, loaders, parts, parts_own, optimizer_ops = found
    thread_names, thread_of = threads
    thread_at = _ByPlace(thread_names, thread_of)
    table, calls, rank, phases = sweep.table, sweep.found, sweep.rank, cs.PHASES

    assert not sweep.et_of  # an execution trace's ops are matched to the CPU ops' events: the Python sweep's
    # each task's attributes as columns, a row per task (_cpu_attrs's values, by numpy and C-level passes): first
    # what its context (the range around it, as the sweep left it) says, then a CPU-only op's and a loader's own
    kind_r, at, pc_r, own_r, inner_layer_r, inner_r = rows.T
    n = len(rows)
    row_names = list(map(names.names.__getitem__, names.of[at].tolist()))  # each task's own name
    thread_l = list(map(thread_names.__getitem__, thread_of[at].tolist()))
    in_context: dict[int, tuple[Any, ...]] = {-1: (None,) * 7}  # (op, shapes, top_op, layer, phase, region, top_op_id)
    for c in unique_ints(pc_r[pc_r >= 0]).tolist():
        op_ev, top_op_ev, top_op_id, layer, phase, region = contexts[c, : cs.C_REGION + 1].tolist()
        in_context[c] = (
            names[op_ev] if op_ev >= 0 else None, shapes_of(op_ev) if op_ev >= 0 else None,
            names[top_op_ev] if top_op_ev >= 0 else None, layers[layer], phases[phase],
            names[region] if region >= 0 else None, top_op_id if top_op_id >= 0 else None,
        )
    op_l, shapes_l, top_op_l, layer_l, phase_l, region_l, top_op_id_l = map(
        list, zip(*map(in_context.__getitem__, pc_r.tolist()), strict=True) if n else ([],) * 7
    )
    kind_l = ["cpu"] * n
    parallel_l = [0.0] * n
    for r, i in zip(np.flatnonzero(kind_r == cs.LOADER_TASK).tolist(), at[kind_r == cs.LOADER_TASK].tolist()):
        kind_l[r], phase_l[r], region_l[r], parallel_l[r] = "dataloader", "dataloader", names[i], float(parallel[r])
    # what an op's own context says of it, by context
    own_top_op_id, own_phase, own_region = (contexts[:, c].tolist() for c in (cs.C_TOP_OP_ID, cs.C_PHASE, cs.C_REGION))
    op_rows = np.flatnonzero(kind_r == cs.OP_TASK)
    for r, i, own_ctx, inner_layer, inner in zip(
        op_rows.tolist(), *(x[op_rows].tolist() for x in (at, own_r, inner_layer_r, inner_r))
    ):
        op_l[r] = row_names[r]
        own = shapes_of(i)
        shapes_l[r] = own if _has_dims(own) or inner < 0 else shapes_of(inner)
        top_op_id_l[r] = own_top_op_id[own_ctx]
        parallel_l[r] = float(parallel[r])
        phase_l[r] = phases[own_phase[own_ctx]]
        region_l[r] = names[own_region[own_ctx]] if own_region[own_ctx] >= 0 else None
        if layer_l[r] is None:
            layer_l[r] = layers[inner_layer]
    # the tasks added at once, as TaskTable.add_task adds each (a CPU op's event is not made: its floats from columns)
    base = len(table)
    table.add_tasks(
        [_CONTEXT_KEYS, _ROOT_KEYS], pc_r < 0,
        {"kind": kind_l, "name": row_names, "thread": thread_l, "rank": [rank] * n, "op": op_l, "shapes": shapes_l,
         "top_op": top_op_l, "layer": layer_l, "phase": phase_l, "region": region_l, "top_op_id": top_op_id_l,
         "parallel_us": parallel_l, "param_us": [0.0] * n},
        ts[at].tolist(), (ts[at] + dur[at]).tolist(),
    )
    # what each task's range says of it: a call's range is the one around it, a CPU-only op's its own
    kind = rows[:, cs.R_KIND]
    held = np.where(kind == cs.CALL, rows[:, cs.R_PARENT_CTX], np.where(kind == cs.OP_TASK, rows[:, cs.R_OWN_CTX], -1))
    rows_held = np.flatnonzero(held >= 0)
    flags = contexts[held[rows_held], cs.C_FLAGS]
    for bit, column, into in ((cs.F_HAS_BWD, cs.C_BWD, calls.bwd_seq), (cs.F_HAS_FWD, cs.C_FWD, calls.fwd_seq)):
        pick = rows_held[(flags & bit) != 0]
        into.update(zip((base + pick).tolist(), contexts[held[pick], column].tolist()))
    calls_held = rows_held[kind[rows_held] == cs.CALL]
    comm = contexts[held[calls_held], cs.C_COMM]
    # one event per op or range, as the Python sweep hands it over; the ops' made from their columns at once
    places = comm[comm >= 0].tolist()
    ops = sorted({i for i in places if i not in evs})
    comm_events = {**dict(zip(ops, op_events(ops))), **evs}
    calls.comm_ev.update(zip((base + calls_held[comm >= 0]).tolist(), map(comm_events.__getitem__, places)))
    for r in np.flatnonzero((kind == cs.CALL) & (dur[at] >= QUEUE_WAIT_MIN_US)).tolist():
        if may_wait_for_queue(row_names[r], float(dur[at[r]])):
            calls.long_calls.append(base + r)
    if len(parts):
        nested: dict[int, list[tuple[tuple[tuple[int, ...], ...], float]]] = {}
        for top, j, own_us in zip(*parts.T.tolist(), parts_own.tolist()):
            nested.setdefault(top, []).append((_tensor_dims(shapes_of(j)), own_us))
        for r in np.flatnonzero(kind == cs.OP_TASK).tolist():
            if parts_of := nested.get(int(at[r])):
                sweep.nested_parts[base + r] = parts_of
    calls.corr_task.update(zip(corr_ids[:, 0].tolist(), (corr_ids[:, 1] + base).tolist()))
    for s, layer in seq_layer.tolist():
        if s not in sweep.seq_layer:
            sweep.seq_layer[s] = layers[layer]
    for i in loaders.tolist():
        ev = evs[i]  # an annotation: its event is made
        calls.loader_ranges.append(LoaderRange(thread_at[i], ev.ts, ev.ts + ev.dur, ev.name))  # type: ignore[arg-type,operator,union-attr]
    for i in optimizer_ops.tolist():
        sweep.param_shapes.update(_tensor_dims(shapes_of(i)))
