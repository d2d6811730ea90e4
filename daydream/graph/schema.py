"""The task graph's vocabulary, in one place: task kinds, what a task and an edge carry, edge kinds, phases, and
what the graph as a whole carries (``graph.graph``).

A graph is a ``networkx.DiGraph`` whose nodes are tasks (integer ids in order of traced start; an inserted task gets
the next free id) with a :class:`Task` attribute dict, and whose edges are dependencies with an :class:`Edge` dict.
The builder (:mod:`daydream.graph.build`) writes these attributes, the edit functions (:mod:`daydream.graph.edit`)
keep them, the simulator reads them; docs/graph.md explains each one at length (tests/test_graph_schema.py keeps
its tables and this module in step). Scripts and notebooks may add attributes of their own (``with prio = 2``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal, TypedDict, get_args

import msgspec
import numpy as np

TaskKind = Literal["cpu", "dataloader", "gpu", "memcpy", "memset", "comm"]
EdgeKind = Literal["thread", "stream", "launch", "sync", "comm"]
Phase = Literal["forward", "backward", "optimizer", "dataloader", "other"]

# Work on a CPU thread (``cpu:<pid>/<tid>``) and work on a GPU stream (``gpu:<device>/<stream>``).
CPU_KINDS: frozenset[str] = frozenset({"cpu", "dataloader"})
GPU_KINDS: frozenset[str] = frozenset({"gpu", "memcpy", "memset", "comm"})
TASK_KINDS: tuple[str, ...] = get_args(TaskKind)
EDGE_KINDS: tuple[str, ...] = get_args(EdgeKind)
# An edge kind as the arrays of edges hold it (graph.adjacency.EdgeArrays, graph.build.table.Dependencies): its
# number in EDGE_KINDS.
EDGE_KIND_NUMBER: dict[str, int] = {kind: i for i, kind in enumerate(EDGE_KINDS)}
# The edges that chain a thread's (a stream's) tasks in order: their delay is the parent's ``gap``, not a ``lag``.
ORDER_KINDS: frozenset[str] = frozenset({"thread", "stream"})
PHASES: tuple[str, ...] = get_args(Phase)


class _TaskBase(TypedDict):
    """What every task carries (the builder writes all of it; :func:`daydream.graph.edit.add_task` too)."""

    kind: TaskKind  # the kind of work: CPU_KINDS run on a CPU thread, GPU_KINDS on a stream
    name: str  # the runtime call, CPU op or kernel name (``NAME [wait]``: the waiting half of a blocking copy call)
    thread: str  # where it runs: ``cpu:<pid>/<tid>``, ``gpu:<device>/<stream>``, ``cpu:<pid>/DataLoader workers``
    rank: int  # the trace's distributed rank
    duration: float  # microseconds the task occupies its thread
    gap: float  # microseconds its thread stays busy after it: CPU framework time, a stream's kernel-to-kernel gap
    release: float | None  # earliest start (microseconds from the origin); none from a trace, scripts may set one
    op: str | None  # innermost CPU op around the launching call (``aten::addmm``)
    shapes: Any  # that op's input dims (a list per input, from Kineto or the linked execution trace), or None
    top_op_id: int | None  # which call of the outermost op the task belongs to: the tasks of one call share it
    layer: str | None  # module path (``model.fc1``) of the enclosing module ranges
    phase: Phase | None  # forward, backward, optimizer, dataloader or other
    region: str | None  # the range that set the phase (``Optimizer.step#SGD.step``, a backward op, a loader range)
    step: str | None  # the ProfilerStep (or ``iteration#k``) the task belongs to; None for one inserted by hand


# Attributes only some tasks carry (the functional form: ``class`` is a Python keyword).
_TaskOptional = TypedDict(
    "_TaskOptional",
    {
        "start": (
            float
        ),  # traced start, microseconds from the graph's origin (read-only reference; inserts: the anchor's)
        "top_op": str | None,  # outermost CPU op around the task (built tasks)
        "parallel_us": float,  # own time of the ATen kernels inside a CPU task that ran across the intra-op threads
        "param_us": (
            float
        ),  # a CPU-only trace's: own time of the ops nested in a CPU op whose tensors are parameter-sized
        "class": str,  # a GPU task's kernel class (gemm, conv, elementwise, ..., memcpy, memset, other: kernel_class)
        "device": Any,  # a GPU task's device (the trace's device id)
        "stream": Any,  # a GPU task's stream (an int where the trace numbers it)
        "bytes": int,  # bytes a memcpy/memset moves, or a collective's message size
        "collective": str | None,  # a comm task's collective, from its kernel or range name (allreduce, sendrecv, ...)
        "group": str,  # a comm task's process group (its name in the trace, or ``world``)
        "group_size": int,  # ranks in that process group
        "group_ranks": list[int],  # its members' ranks, where the trace names them (a group other than the world)
        "collective_id": str,  # one collective of a multi-rank job: its members (one task per rank) share it
        "traced_us": float,  # a comm task's traced duration (its wait for the other ranks included), kept when priced
        "blocks": int,  # a fused optimizer kernel's (multi_tensor_apply) thread blocks: one a chunk of a tensor
        "tensors_in": Any,  # input tensor ids of the launching op (from a linked execution trace)
        "tensors_out": Any,  # output tensor ids of the launching op (from a linked execution trace)
        "queued": (
            bool
        ),  # inserted with no place in its thread's order: the schedule policy picks it when the thread is free
    },
    total=False,
)


class Task(_TaskBase, _TaskOptional):
    """A task's attributes: the node attribute dict of the graph."""


class _EdgeBase(TypedDict):
    kind: EdgeKind  # the mechanism: thread/stream order, a launch, a sync or a communication dependency


class Edge(_EdgeBase, total=False):
    """A dependency's attributes: the child may start once the parent has ended, plus the parent's ``gap`` for the
    order kinds (which carry no ``lag``) or plus ``lag`` for the others."""

    lag: float  # microseconds after the parent's end (negative: a kernel may start before its launch call returns)


class StepInfo(msgspec.Struct, frozen=True):  # shared by a graph's copies
    """One step of the graph: its name, its measured period (from the end of the step before to its own end, us), its
    span (from its first task's start to its last task's end) and whether it is context (simulated before the
    measured steps so that they start with what it left pending; not measured)."""

    name: str
    measured_us: float
    span_us: float = 0.0
    context: bool = False


class Delays(msgspec.Struct, frozen=True):
    """The typical delays the builder measured, which inserted tasks take: a launch's latency (a kernel's start after
    its launch call's) and the gap between kernels of a stream; whether waits on other streams were inferred."""

    launch_latency_us: float = 0.0
    stream_gap_us: float = 0.0
    inferred_stream_waits: bool = False


# The warning every API result of a CPU recording carries (``TRACE: CPU_ONLY``); the terminal says it on the device
# line instead, as the fact about the trace it is
CPU_ONLY = "no GPU activity in the trace; the graph holds CPU tasks only"


class Causality(msgspec.Struct, frozen=True):
    """What the graph does not explain of its window of the trace: tasks whose start was pinned, tasks nothing in the
    graph anchors (and how far after the window's start they began), dependencies cut at the window's edge, how long
    the work before the window held it back, and thread orders bridged over tasks outside it."""

    pinned_tasks: int = 0
    unanchored_tasks: int = 0
    unanchored_lead_us: float = 0.0
    cut_edges: dict[str, int] = {}  # by kind
    held_back_us: float = 0.0
    bridged_orders: int = 0


class ExecutionTraceUse(msgspec.Struct, frozen=True):
    """The execution trace read with the trace: its path and how many of its ops matched the trace's."""

    path: str
    ops: int


class RankInfo(msgspec.Struct):
    """One rank of a job: where its trace is, what it measured, and which rank's tasks stand for it."""

    rank: int
    trace: str | None
    measured_us: float
    origin_us: float  # trace time its step started at
    fingerprint: str = ""
    same_as: int | None = None  # the rank whose graph is the same (None: its own tasks are in the job graph)
    offset_us: float = 0.0  # its step's start after the first rank's


class ProcessGroup(msgspec.Struct, frozen=True):
    """A process group of a job, as matched across its ranks: the ranks it spans and the collectives each issues."""

    ranks: int
    collectives: int


class CollectivePricing(msgspec.Struct):
    """How a job's collectives were priced (daydream.perf.collectives.job)."""

    model: str  # "fitted to the job's transfers" or the link's name
    collectives: int  # collectives of the job (each counted once, not once per rank)
    modelled: int  # priced by the model
    as_traced: int  # kept at their last member's traced duration (no size, or no model for their kind)
    models: dict[str, Any]  # the fitted models, by collective


class JobCollectives(msgspec.Struct):
    """A multi-rank job's collectives: its process groups by name, and how the collectives were priced (None until
    they are)."""

    groups: dict[str, ProcessGroup]
    pricing: CollectivePricing | None = None

    def to_builtins(self) -> dict[str, Any]:
        """As a job's JSON has them since jobs were simulated: each group under its name, then ``pricing``."""
        out: dict[str, Any] = msgspec.to_builtins(self.groups)
        if self.pricing is not None:
            out["pricing"] = msgspec.to_builtins(self.pricing)
        return out


def delays_of(graph: Any) -> Delays:
    """The graph's measured delays (none on a graph built by hand without them)."""
    return graph.graph.get("delays") or Delays()


class GraphInfo(TypedDict, total=False):
    """What the graph as a whole carries (``graph.graph``), written by the builder: plain values and the structs
    above."""

    trace: str | None  # the trace file (a job: its folder; a job joined in memory: None)
    rank: int | None  # its distributed rank (a job: None)
    world_size: int  # ranks in the job
    device: str | None  # the trace's GPU name
    device_properties: dict[str, Any]  # numSms, totalGlobalMem of its first GPU, where the trace has them
    origin_us: float  # the trace time every task's ``start`` counts from
    steps: list[StepInfo]  # the selected steps, the context ones first
    delays: Delays  # typical delays measured
    warnings: list[str]  # what the loader noticed; runtime calls of 1 ms or more (build.slow_runtime_calls)
    measured_us: float  # the step time measured: the period of the step, the median of the steps' ("all")
    steady_periods_us: list[float]  # the measured periods of every step of the trace but its first: its own noise
    recording: Any  # the ``daydream record`` sidecar, or None
    execution_trace: ExecutionTraceUse | None  # the execution trace read with the trace
    causality: Causality  # what the graph does not explain
    next_task_id: int  # the id the next added task gets (ids of removed tasks are not reused)
    ranks: list[RankInfo]  # a multi-rank job: its ranks
    collectives: JobCollectives  # a multi-rank job: how its collectives were matched and priced


class _CpuTaskKeys:
    """Instances lend their ``__dict__``: see :func:`new_task_attrs`."""


class _GpuTaskKeys:
    """Instances lend their ``__dict__``: see :func:`new_task_attrs`."""


class _EdgeKeys:
    """Instances lend their ``__dict__``: see :func:`new_edge_attrs`."""


_SHARED_KEYS_MAX = 30  # CPython's limit on the keys a class's instance dicts share


def _template(cls: type, keys: tuple[str, ...]) -> dict[str, Any]:
    """A dict of ``cls``'s instances holding ``kind`` (None), made once ``keys`` are in the table they share: CPython
    sizes a new dict's values for the keys the table holds plus its spare room, so a key first seen later would turn
    a dict into an ordinary one, and spare room left would cost every dict. Its copies are the new dicts:
    ``dict.copy`` copies a key-sharing dict as one, 2.5x faster than making an instance (an empty one would copy as
    an ordinary dict, hence ``kind``)."""
    seed = cls()
    for key in keys:
        setattr(seed, key, None)
    for _ in range(_SHARED_KEYS_MAX):  # each instance made takes one of the table's spare slots, down to one: the
        cls()  # values of a dict made after have room for the keys the table holds and one more, no more
    template: dict[str, Any] = cls().__dict__
    template["kind"] = None
    return template


_CPU_TASK = _template(
    _CpuTaskKeys,
    (*_TaskBase.__annotations__, "start", "top_op", "parallel_us", "param_us", "tensors_in", "tensors_out"),
)
_GPU_TASK = _template(
    _GpuTaskKeys,
    (
        *_TaskBase.__annotations__,
        "start",
        "top_op",
        "class",
        "device",
        "stream",
        "bytes",
        "collective",
        "group",
        "group_size",
        "group_ranks",
        "collective_id",
        "traced_us",
        "blocks",
        "tensors_in",
        "tensors_out",
    ),
)
_EDGE = _template(_EdgeKeys, tuple(Edge.__annotations__))


def new_task_attrs(kind: str) -> dict[str, Any]:
    """The attribute dict of a new task of ``kind``, holding its kind, made as CPython makes an instance's
    ``__dict__``: a key-sharing dictionary (PEP 412) whose keys live once, in a table that every such dict of the
    same class shares, and whose values alone are its own. A plain ``dict`` in every way but its size: a built task's
    18-20 attributes take ~270 bytes instead of ~460, 0.6 GB of a 10M-event trace's graph (3.2M tasks).

    It stays so while keys are added one at a time (or by ``dict.copy``) and its values have room for them: CPython
    sizes them for the keys the class's table holds when the dict is made (at most 30), so each table is given from
    the start every key such a task may get (:func:`_template`): one for CPU tasks, one for GPU tasks. ``dict()`` or
    ``dict.update`` into an empty dict makes an ordinary one, and so may a key of a script's own: correct but larger.
    tests/test_graph_memory.py checks that a built graph's tasks keep it."""
    attrs = (_CPU_TASK if kind in CPU_KINDS else _GPU_TASK).copy()
    attrs["kind"] = kind
    return attrs


def task_dicts(
    columns: dict[str, list[Any]], orders: Sequence[tuple[str, ...]], codes: np.ndarray, tasks: Iterable[int]
) -> list[dict[str, Any]]:
    """The attribute dicts of ``tasks``, from attributes held as columns (``columns[key][task]``; the keys a task has,
    in order, ``orders[codes[task]]``): each made as the task's own was made, by :func:`new_task_attrs` and its keys
    set one at a time in order (so it is as compact, and iterates in the same order)."""
    tasks = np.fromiter(tasks, np.int64)
    kind = columns["kind"]
    of = codes[tasks].tolist()
    # each order's columns looked up once (an order no task has may name a key no column holds)
    ordered = {c: tuple(zip(orders[c], map(columns.__getitem__, orders[c]))) for c in set(of)}
    out = []
    for t, order in zip(tasks.tolist(), of):
        attrs = new_task_attrs(kind[t])
        for key, column in ordered[order]:
            attrs[key] = column[t]
        out.append(attrs)
    return out


def new_edge_attrs(kind: str, lag: float | None = None) -> Edge:
    """A dependency's attribute dict (``lag`` left out where None), key-sharing like :func:`new_task_attrs`: ~90
    bytes instead of ~185, 0.4 GB of a 10M-event trace's graph (4.2M edges)."""
    attrs = _EDGE.copy()
    attrs["kind"] = kind
    if lag is not None:
        attrs["lag"] = lag
    return attrs  # type: ignore[return-value]


# Task attributes that are derived, not stored: ``end`` is the traced start plus the current duration.
DERIVED_TASK_ATTRIBUTES: dict[str, str] = {"end": "start + duration"}
# The task attributes .whatif scripts know by name (daydream.dsl: where-clauses, scale factors, ``SEL.attr``): the
# stored ones a trace gives, and ``end``. ``device`` and ``queued`` are left out: a script's own names may use them.
TASK_ATTRIBUTES: tuple[str, ...] = (
    "kind",
    "name",
    "thread",
    "rank",
    "duration",
    "gap",
    "release",
    "start",
    "end",
    "step",
    "phase",
    "region",
    "layer",
    "op",
    "top_op",
    "top_op_id",
    "shapes",
    "class",
    "stream",
    "bytes",
    "collective",
    "tensors_in",
    "tensors_out",
    "parallel_us",
    "param_us",
    "group",
    "group_size",
    "group_ranks",
    "collective_id",
    "traced_us",
    "blocks",
)


def task_attribute_names() -> frozenset[str]:
    """Every attribute a :class:`Task` may carry, stored or derived."""
    return frozenset(Task.__annotations__) | frozenset(DERIVED_TASK_ATTRIBUTES)
