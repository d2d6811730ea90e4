"""The loaded trace: events sorted into the families the graph builder needs."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from daydream.trace.recording import Recording
from daydream.trace.schema import DeviceProperties, Event

if TYPE_CHECKING:  # made by the columnar filer, which imports this module
    from daydream.trace.filing import PendingFamily

# The recorder's module ranges (daydream.record.modules): its fast ranges come out as `cpu_op` events, but they are
# annotations of a layer, not ops.
RECORDER_RANGE_PREFIX = "daydream.module: "

# Event categories of both Kineto schemas, by family.
CPU_OP_CATS = frozenset({"cpu_op", "Operator", "operator"})
ANNOTATION_CATS = frozenset({"user_annotation", "python_function", "Python", "python", "Trace_annotation"})
RUNTIME_CATS = frozenset({"cuda_runtime", "cuda_driver", "Runtime", "runtime", "Driver", "driver"})
KERNEL_CATS = frozenset({"kernel", "Kernel"})
MEMCPY_CATS = frozenset({"gpu_memcpy", "Memcpy"})
MEMSET_CATS = frozenset({"gpu_memset", "Memset"})
GPU_CATS = KERNEL_CATS | MEMCPY_CATS | MEMSET_CATS
GPU_ANNOTATION_CATS = frozenset({"gpu_user_annotation"})
SYNC_CATS = frozenset({"cuda_sync"})
LAUNCH_FLOW_CATS = frozenset({"ac2g", "async"})
# The trace's event families: each a field of Trace, and the categories filed in it.
FAMILIES = (
    ("cpu_ops", CPU_OP_CATS),
    ("annotations", ANNOTATION_CATS),
    ("runtime", RUNTIME_CATS),
    ("gpu", GPU_CATS),
    ("gpu_annotations", GPU_ANNOTATION_CATS),
    ("syncs", SYNC_CATS),
)
RANGE_CAT = "user_annotation"  # the category of a range recorded as an op, once filed as an annotation

# Ranges that some traces record as ops: the 2021-era profiler (PyTorch 1.8-1.10) files ProfilerStep#N, the DataLoader
# and optimizer ranges and record_function markers under `Operator` (no `user_annotation` yet), and the recorder's
# module ranges come out as `cpu_op`. Whatever their category, they are annotations: steps, phases and layers.
_RANGE_NAME_RE = re.compile(
    r"^(?:ProfilerStep#|enumerate\(DataLoader\)#|Optimizer\.(?:step|zero_grad)#|nn\.Module: |"
    + re.escape(RECORDER_RANGE_PREFIX)
    + r")|^##.*##$"
)


@lru_cache(maxsize=1 << 16)
def is_annotation(name: str, cat: str | None) -> bool:
    """Whether an event is a range (step, phase, layer marker) rather than an op: by its category, or, for an event
    filed as an op, by its name (see ``_RANGE_NAME_RE``). The loader files these as annotations."""
    if cat in ANNOTATION_CATS:
        return True
    return cat in CPU_OP_CATS and _RANGE_NAME_RE.match(name) is not None


class _MadeWhenRead:
    """A family as an attribute: a plain list, made from its pending columns (Trace.pending) the first time it is
    read. Set like a list attribute; setting it drops what was pending."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name, self.slot = name, f"_{name}"

    def __get__(self, trace: Any, owner: type | None = None) -> Any:
        if trace is None:
            return self
        pending = trace.pending.pop(self.name, None)
        if pending is not None:
            trace.__dict__[self.slot] = pending.make()
        return trace.__dict__.setdefault(self.slot, [])

    def __set__(self, trace: Any, events: list[Event]) -> None:
        trace.pending.pop(self.name, None)
        trace.__dict__[self.slot] = events


@dataclass(slots=True)
class CpuColumns:
    """A trace's CPU events - its annotations, then its CPU ops, then its runtime calls, each family in its order - as
    the columns the compiled CPU sweep reads (:mod:`daydream.graph.build.cpu_sweep`), made by the columnar loader beside
    the events. ``ids`` are the events' own ``id()``: the columns describe exactly those event objects, and the
    builder reads them only while the trace's families still hold them in that order (events are not changed in
    place after loading: nothing in daydream does, and a change is made by replacing the event)."""

    ids: np.ndarray  # int64: id() of each annotation's event (0 for the CPU ops and runtime calls, kept as columns)
    source: np.ndarray  # int64: a CPU op's or call's number in its pending family, in the order filed (-1 others)
    ts: np.ndarray  # float64
    dur: np.ndarray  # float64
    thread: np.ndarray  # int32: the event's (pid, tid), numbered in order of first appearance
    threads: list[tuple[Any, Any]]  # (pid, tid) by number
    name: np.ndarray  # int32: ids into strings
    cat: np.ndarray  # int32: ids into strings; -1: RANGE_CAT (a range filed as an op)
    seq: np.ndarray  # int64: args' sequence number (0 where none)
    has_seq: np.ndarray  # bool
    corr: np.ndarray  # int64: args' correlation id (0 where none)
    has_corr: np.ndarray  # bool
    has_collective: np.ndarray  # bool: args name a collective
    shapes: np.ndarray  # int32: the op's input dims (args' Input Dims, else Input dims), an index into values; -1 none
    strings: list[str]
    values: list[Any]
    sizes: tuple[int, int, int]  # the rows of the annotations, the CPU ops and the runtime calls, in that order


MEMORY_EVENT = "[memory]"  # the name of an allocator event (profile_memory=True), an instant event on its thread


@dataclass
class MemoryEvents:
    """A trace's allocator events (``[memory]``, profile_memory=True), in the file's order, as columns: when (``ts``,
    us), on which thread, the bytes (negative: a free) of the block at ``addr`` on the device (``device_type``:
    Kineto's DeviceType, 0 the CPU, 1 CUDA; ``device_id``, -1 for the CPU), and the allocator's totals after it
    (``total_allocated``; NaN where the event gives none)."""

    ts: np.ndarray  # float64
    thread: list[tuple[Any, Any]]  # (pid, tid)
    nbytes: np.ndarray  # float64
    addr: np.ndarray  # int64
    total_allocated: np.ndarray  # float64
    total_reserved: np.ndarray  # float64
    device_type: np.ndarray  # int64
    device_id: np.ndarray  # int64

    def __len__(self) -> int:
        return len(self.ts)

    @classmethod
    def of(cls, rows: list[tuple[Any, ...]]) -> MemoryEvents:
        """From ``(ts, pid, tid, bytes, addr, total allocated, total reserved, device type, device id)`` rows whose
        time, bytes and address are numbers (the loaders keep only those), in the file's order."""
        cols = list(zip(*rows)) if rows else [()] * 9
        ts, pid, tid, nbytes, addr, total, reserved, dtype, did = cols
        return cls(
            ts=np.asarray(ts, np.float64),
            thread=list(zip(pid, tid)),
            nbytes=np.asarray(nbytes, np.float64),
            addr=np.asarray(addr, np.int64),
            total_allocated=np.asarray(total, np.float64),
            total_reserved=np.asarray(reserved, np.float64),
            device_type=np.asarray(dtype, np.int64),
            device_id=np.asarray(did, np.int64),
        )


def memory_row(ts: Any, pid: Any, tid: Any, args: Any) -> tuple[Any, ...] | None:
    """One ``[memory]`` event as a :class:`MemoryEvents` row: its time and thread, then its args' ``Bytes``, ``Addr``,
    ``Total Allocated``, ``Total Reserved``, ``Device Type``, ``Device Id`` (``args``: an EventArgs, or anything with
    those attributes); None where its time, bytes or address is not a finite number of the right kind (skipped: the
    trace stands without it)."""
    if args is None or not _number(ts) or not _number(args.alloc_bytes) or not _whole_number(args.addr):
        return None
    if not (-MAX_MEMORY_TIME_US <= ts <= MAX_MEMORY_TIME_US and abs(args.alloc_bytes) <= MAX_BLOCK_BYTES):
        return None
    total = (
        args.total_allocated
        if _number(args.total_allocated) and 0 <= args.total_allocated <= MAX_BLOCK_BYTES
        else math.nan
    )
    reserved = (
        args.total_reserved
        if _number(args.total_reserved) and 0 <= args.total_reserved <= MAX_BLOCK_BYTES
        else math.nan
    )
    dtype = args.device_type if _whole_number(args.device_type) else 0
    did = args.device_id if _whole_number(args.device_id) else -1
    return (
        float(ts),
        pid,
        tid,
        float(args.alloc_bytes),
        int(args.addr),
        float(total),
        float(reserved),
        int(dtype),
        int(did),
    )


MAX_MEMORY_TIME_US = 1e18  # as a complete event's (load.MAX_TIME_US)
MAX_BLOCK_BYTES = float(1 << 60)  # an allocation, a total: an exabyte is no real device's


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _whole_number(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and -(1 << 63) <= v < (1 << 63)


@dataclass
class Trace:
    """One rank's trace, its events sorted by family (each list ordered by start time)."""

    path: str
    annotations: list[Event] = field(default_factory=list)
    gpu_annotations: list[Event] = field(default_factory=list)
    syncs: list[Event] = field(default_factory=list)
    thread_names: dict[tuple[Any, Any], str] = field(default_factory=dict)
    devices: list[DeviceProperties] = field(default_factory=list)
    distributed: dict[str, Any] = field(default_factory=dict)
    schema_version: Any = None
    event_count: int = 0
    skipped: int = 0
    et_ops: dict[int, Any] = field(default_factory=dict)
    et_path: str | None = None  # the execution trace read with it (its ops in et_ops where they matched), if any
    warnings: list[str] = field(default_factory=list)
    recording: Recording | None = None  # the recorder's sidecar (modules, optimizers, buckets...), when present
    # the CPU events as columns, where the columnar loader read the trace (the compiled CPU sweep reads them)
    cpu_columns: CpuColumns | None = field(default=None, repr=False, compare=False)
    # families the columnar loader keeps as columns until one is read (the CPU ops, runtime calls and GPU tasks: the
    # builder reads their columns, and a plain replay never makes their events), each made then
    pending: dict[str, PendingFamily] = field(default_factory=dict, repr=False, compare=False)
    # the allocator's `[memory]` events (a trace recorded with profile_memory=True); None where it holds none
    memory: MemoryEvents | None = field(default=None, repr=False, compare=False)
    # lists like the other families, made from pending columns the first time they are read
    cpu_ops = _MadeWhenRead()
    runtime = _MadeWhenRead()
    gpu = _MadeWhenRead()

    def family_size(self, name: str) -> int:
        """How many events the family ``name`` holds, without making a pending family's events."""
        pending = self.pending.get(name)
        return pending.count if pending is not None else len(getattr(self, name))

    def kept_rows(self, name: str) -> slice | None:
        """The rows of ``cpu_columns`` (annotations, CPU ops, runtime calls) that hold the family ``name``, where the
        loader kept it as columns and it is unread since (so the columns are its events); None otherwise."""
        if self.cpu_columns is None or name not in self.pending or name not in ("cpu_ops", "runtime"):
            return None
        annotations, ops, runtime = self.cpu_columns.sizes  # as loaded: a family released since holds none
        return (
            slice(annotations, annotations + ops)
            if name == "cpu_ops"
            else slice(annotations + ops, annotations + ops + runtime)
        )

    def release(self, *names: str) -> None:
        """Empty the families ``names`` (a pending one without making its events): for a caller done with them."""
        for name in names:
            self.pending.pop(name, None)
            getattr(self, name).clear()

    def __repr__(self) -> str:
        """One line (the dataclass's own repr lists every event: millions of characters in a notebook)."""
        return (
            f"Trace({self.path!r}, {self.event_count:,} events: {self.family_size('cpu_ops'):,} CPU ops,"
            f" {self.family_size('runtime'):,} runtime calls, {self.family_size('gpu'):,} GPU tasks,"
            f" {len(self.annotations):,} annotations; device {self.device_name!r}, rank {self.rank} of"
            f" {self.world_size})"
        )

    @property
    def rank(self) -> int:
        rank = self.distributed.get("rank", 0)
        return rank if isinstance(rank, int) else 0

    @property
    def world_size(self) -> int:
        size = self.distributed.get("world_size", 1)
        return size if isinstance(size, int) else 1

    @property
    def device_name(self) -> str | None:
        return self.devices[0].name if self.devices else None

    @property
    def has_gpu_activity(self) -> bool:
        return self.family_size("gpu") > 0

    def step_annotations(self) -> list[Event]:
        """The ``ProfilerStep#N`` ranges on the CPU, in order."""
        return [e for e in self.annotations if e.name.startswith("ProfilerStep#")]
