"""Builder stage 2: the GPU tasks (kernels, copies, fills, collectives), each launched by the runtime call with its
correlation id and taking that call's context; a call that issued a copy and returned only when it ended becomes two
tasks, the issue and the wait.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from itertools import repeat
from operator import is_not
from typing import Any, NamedTuple

import numpy as np

from daydream._arrays import order_by_start, unique_ints
from daydream.graph.build.cpu import CpuCalls
from daydream.graph.build.table import TaskTable
from daydream.graph.kernel_class import classify_kernel, collective_of, is_comm_kernel, is_multi_tensor_apply
from daydream.graph.schema import EDGE_KIND_NUMBER
from daydream.trace.model import MEMCPY_CATS, MEMSET_CATS, Trace
from daydream.trace.runtime_calls import call_role, copy_waits
from daydream.trace.schema import Event
from daydream.trace.sizes import message_bytes, process_group

# What a runtime call costs the CPU to issue work, where the trace has no call that only issued work.
DEFAULT_ISSUE_US = 5.0


class CopyWait(NamedTuple):
    """The wait half of a blocking copy call, and the copy it waits for (the dependency comes with the edges)."""

    wait: int
    copy: int


class GpuColumns(NamedTuple):
    """The GPU events as the stage reads them, in the family's order, a list per field: what each task is (its
    name, kind, kernel class), where it ran (thread, device, stream), its correlation id (None: none), the bytes a
    copy or fill moves (None: none said), its start and end, and its source - the event, or its number in the family
    as filed - from which ``event_of`` makes the event (a collective's args are read)."""

    name: list[str]
    kind: list[str]
    kernel_class: list[str]
    thread: list[str]
    device: list[Any]
    stream: list[Any]
    correlation: list[int | None]
    bytes: list[int | None]
    source: list[Any]
    start: list[float]
    end: list[float]
    event_of: Callable[[Any], Event]


def gpu_tasks(trace: Trace, table: TaskTable, calls: CpuCalls) -> list[CopyWait]:
    """Add the trace's GPU tasks to ``table``, each with its ``launch`` edge; returns the blocking copy calls' waits."""
    rank = trace.rank
    n_cpu = len(table)
    blocking: list[tuple[int, int]] = []  # (call, copy) pairs where the call returned only when the copy ended
    corr_task, comm_ev = calls.corr_task, calls.comm_ev
    gpu = _gpu_columns(trace)
    m = len(gpu.name)
    # each task's launch call (-1: none): the call its correlation id names, not another GPU task
    launchers: list[int] = []
    for task, corr in enumerate(gpu.correlation, n_cpu):
        launcher = corr_task.get(corr, -1) if corr is not None else -1
        launchers.append(launcher if launcher < n_cpu else -1)
        if corr is not None:
            corr_task.setdefault(corr, task)
    # the context of the call that launched it (its attributes' values), or none; a task's keys in the order
    # new_task_attrs's dict gets them, "bytes" where it has some
    values: dict[str, list[Any]] = {"kind": gpu.kind, "name": gpu.name, "thread": gpu.thread, "rank": [rank] * m}
    launched_by = [x if x >= 0 else n_cpu for x in launchers]  # (n_cpu: past the CPU tasks, a None of each column)
    for key in _CONTEXT:
        values[key] = list(map([*table.column(key)[:n_cpu], None].__getitem__, launched_by))
    values["class"], values["device"], values["stream"] = gpu.kernel_class, gpu.device, gpu.stream
    values["bytes"] = gpu.bytes
    orders = [_GPU_KEYS, _GPU_KEYS_BYTES]
    codes = np.fromiter(map(is_not, gpu.bytes, repeat(None)), np.int64, m)  # 1: the keys with "bytes"
    # a collective's name, size and process group, a fused optimizer kernel's thread blocks: a task's own keys, in
    # the order it gets them
    for j in [j for j, (kind, name) in enumerate(zip(gpu.kind, gpu.name)) if kind == "comm" or is_multi_tensor_apply(name)]:
        keys = orders[codes[j]]
        attrs = dict(zip(keys, (values[k][j] for k in keys), strict=True))
        args = gpu.event_of(gpu.source[j]).args
        if gpu.kind[j] == "comm":
            launcher = launchers[j]
            _collective(attrs, args, comm_ev.get(launcher) if launcher >= 0 else None)
        elif (blocks := _blocks(args)) is not None:
            attrs["blocks"] = blocks
        else:
            continue  # a fused kernel whose grid the trace does not record: the keys of any kernel
        codes[j] = len(orders)
        orders.append(tuple(attrs))
        for key, value in attrs.items():
            if key not in values:
                values[key] = [None] * m
            values[key][j] = value
    table.add_tasks(orders, codes, values, gpu.start, gpu.end)
    table.launcher[n_cpu:] = launchers
    call_ts = table.ts
    table.launch_ts[n_cpu:] = [call_ts[call] if call >= 0 else t0 for call, t0 in zip(launchers, gpu.start)]
    launched = [(call, task) for task, call in enumerate(launchers, n_cpu) if call >= 0]
    table.edge_parent += [call for call, _ in launched]
    table.edge_child += [task for _, task in launched]
    table.edge_kind += [EDGE_KIND_NUMBER["launch"]] * len(launched)
    kinds = table.column("kind")
    for call, task in launched:
        if kinds[task] == "memcpy" and _blocking_copy(table, call, task):
            blocking.append((call, task))
    if not blocking:
        return []
    issue_us = _typical_issue_us(table, {call for call, _ in blocking})
    return [_split_blocking_call(table, call, copy, issue_us) for call, copy in blocking]


# what a GPU task takes from its launch call, and its keys in order (without and with "bytes")
_CONTEXT = ("op", "shapes", "top_op", "layer", "phase", "region", "top_op_id")
_GPU_KEYS = ("kind", "name", "thread", "rank", *_CONTEXT, "class", "device", "stream")
_GPU_KEYS_BYTES = (*_GPU_KEYS, "bytes")


def _collective(attrs: dict[str, Any], args: Any, around: Event | None) -> None:
    """A collective's name and size, from its kernel or the op or range its call was made in (``around``), and its
    process group."""
    named = collective_of(re.sub(r"[^0-9A-Za-z]", "", around.name[5:])) if around and around.name.startswith("nccl:") else None
    # all-to-all runs as SendRecv kernels: the range that launched them says what it was
    attrs["collective"] = named or collective_of(attrs["name"])
    nbytes = message_bytes(args) or (message_bytes(around.args) if around is not None else None)
    if nbytes is not None:
        attrs["bytes"] = nbytes
    attrs.update(process_group(args) or (process_group(around.args) if around is not None else None) or {})


def _blocks(args: Any) -> int | None:
    """A kernel's thread blocks (its grid's product), where its args record the grid."""
    grid = args.grid if args is not None else None
    if not isinstance(grid, list) or not grid or not all(type(d) is int and d > 0 for d in grid):
        return None
    return math.prod(grid)


def _gpu_columns(trace: Trace) -> GpuColumns:
    """The trace's GPU events as the stage reads them: from the columns the loader keeps them as (Trace.pending:
    their events are not made, but the collectives'), else from the events."""
    pending = trace.pending.get("gpu")
    if pending is not None:
        found = _from_columns(pending.batches)
        if found is not None:
            return found
    return _from_events(trace.gpu)


def _kind(cat: str | None, name: str) -> str:
    """A GPU task's kind, from its category and (a collective's kernel) its name."""
    kind = "memcpy" if cat in MEMCPY_CATS else "memset" if cat in MEMSET_CATS else "gpu"
    return "comm" if kind == "gpu" and is_comm_kernel(name) else kind


def _from_events(events: list[Event]) -> GpuColumns:
    """The GPU events read one at a time."""
    streams: dict[tuple[Any, Any], str] = {}  # each stream's thread name, one string for all its tasks
    rows = []
    for ev in events:
        args = ev.args
        stream = args.stream if args is not None and isinstance(args.stream, int) else ev.tid
        device = args.device if args is not None and args.device is not None else ev.pid
        kind = _kind(ev.cat, ev.name)
        key = (device, stream) if type(device) is int and type(stream) is int else None  # ints only: 1 == True == 1.0
        thread = streams.get(key)
        if thread is None:
            thread = f"gpu:{device}/{stream}"
            if key is not None:
                streams[key] = thread
        nbytes = (
            int(args.bytes)
            if args is not None and kind in ("memcpy", "memset") and isinstance(args.bytes, (int, float))
            else None
        )
        corr = args.correlation if args is not None else None
        end = ev.ts + ev.dur  # type: ignore[operator]
        rows.append((ev.name, kind, classify_kernel(ev.name, kind), thread, device, stream, corr, nbytes, ev, ev.ts, end))
    columns = list(map(list, zip(*rows))) if rows else [[] for _ in range(11)]
    return GpuColumns(*columns, _same)


def _from_columns(batches: list[Any]) -> GpuColumns | None:
    """The GPU events kept as columns, read a field at a time; None where a value is one this does not read as the
    events hold it (a pid, tid or device that is not an integer, a correlation id beyond int64)."""
    from daydream.trace.columns import K_FLOAT, K_INT, K_NONE, K_OBJECT
    from daydream.trace.filing import events_at, family_column

    ts, _ = family_column(batches, "ts")
    dur, _ = family_column(batches, "dur")
    # the family's order, as the loader orders the events it makes (load.sort_by_start: by start, the longest
    # first, then in the order filed)
    order = order_by_start(ts, dur)

    def column(field: str) -> tuple[np.ndarray, np.ndarray]:
        data, kind = family_column(batches, field)
        return data[order], kind[order]

    (pid, pid_kind), (tid, tid_kind) = column("pid"), column("tid")
    (device, device_kind), (stream, stream_kind) = column("args.device"), column("args.stream")
    corr, corr_kind = column("args.correlation")
    if not ((pid_kind == K_INT).all() and (tid_kind == K_INT).all() and np.isin(device_kind, (K_INT, K_NONE)).all()
            and np.isin(corr_kind, (K_INT, K_NONE)).all()):
        return None
    strings = batches[0].strings  # the scanner's table: its batches share it
    device = np.where(device_kind == K_INT, device, pid)
    stream = np.where(stream_kind == K_INT, stream, tid)  # a stream that is no integer: the event's tid
    name, _ = column("name")
    cat, _ = column("cat")
    # the kind of each (category, name), the class of each (name, kind), the thread of each (device, stream): once
    cats, cat_of = unique_ints(cat, return_inverse=True)
    cat_names = [strings[c] if c >= 0 else None for c in cats.tolist()]
    pairs, pair_of = unique_ints(name.astype(np.int64) * len(cats) + cat_of.reshape(-1), return_inverse=True)
    kinds, classes, read_args = [], [], []
    for n, c in zip(*(part.tolist() for part in divmod(pairs, len(cats)))):
        kind = _kind(cat_names[c], strings[n])
        kinds.append(kind)
        classes.append(classify_kernel(strings[n], kind))
        read_args.append(kind == "comm" or is_multi_tensor_apply(strings[n]))  # the events whose args the stage reads
    pair_of = pair_of.reshape(-1)
    devices, device_of = unique_ints(device, return_inverse=True)
    streams, stream_of = unique_ints(stream, return_inverse=True)
    places, thread_of = unique_ints(device_of.reshape(-1) * len(streams) + stream_of.reshape(-1), return_inverse=True)
    devices, streams = devices.tolist(), streams.tolist()
    threads = [f"gpu:{devices[d]}/{streams[s]}" for d, s in (divmod(p, len(streams)) for p in places.tolist())]
    kind_list = list(map(kinds.__getitem__, pair_of.tolist()))
    # the bytes a copy or fill moves, where its args say (an integer, or a number made one)
    nbytes: list[int | None] = [None] * len(order)
    copies = np.flatnonzero(np.array([k in ("memcpy", "memset") for k in kinds], np.bool_)[pair_of])
    if len(copies):
        data, kind = column("args.bytes")
        values = batches[0].values  # (the scanner's table of other values: a number beyond int64 or a double)
        for i, value, k in zip(copies.tolist(), data[copies].tolist(), kind[copies].tolist()):
            number = value if k == K_INT else np.int64(value).view(np.float64).item() if k == K_FLOAT else (
                values[value] if k == K_OBJECT else None)
            if isinstance(number, (int, float)):
                nbytes[i] = int(number)
    source = order.tolist()
    read = sorted(np.asarray(source)[np.array(read_args, np.bool_)[pair_of]].tolist())
    made: dict[int, Event] = {}

    def event_of(k: int) -> Event:
        """The event filed ``k``-th: those whose args are read made at once the first time one is asked for."""
        if not made:
            made.update(zip(read, events_at(batches, np.array(read, np.int64))))
        return made[k]

    return GpuColumns(
        list(map(strings.__getitem__, name.tolist())), kind_list, list(map(classes.__getitem__, pair_of.tolist())),
        list(map(threads.__getitem__, thread_of.reshape(-1).tolist())), device.tolist(), stream.tolist(),
        [c if k == K_INT else None for c, k in zip(corr.tolist(), corr_kind.tolist())], nbytes, source,
        ts[order].tolist(), (ts + dur)[order].tolist(), event_of,
    )


def _same(ev: Event) -> Event:
    return ev


def _blocking_copy(table: TaskTable, call: int, copy: int) -> bool:
    name, ts, end = table.column("name"), table.ts, table.end
    return copy_waits(name[call], name[copy], ts[call], end[call], ts[copy], end[copy])


def _typical_issue_us(table: TaskTable, blocking: set[int]) -> float:
    """How long a call takes to issue GPU work: the median duration of the calls that launched work and did not
    wait for it (cudaLaunchKernel, cudaMemcpyAsync...)."""
    name = table.column("name")
    calls = [call for call in table.launcher if call >= 0 and call not in blocking]
    issuing = {n: call_role(n) is None for n in set(map(name.__getitem__, calls))}  # (once per name)
    calls = [call for call in calls if issuing[name[call]]]
    if not calls:
        return DEFAULT_ISSUE_US
    durations = np.subtract(list(map(table.end.__getitem__, calls)), list(map(table.ts.__getitem__, calls)))
    return float(np.median(durations))  # (statistics.median's value, without a list's sort)


def _split_blocking_call(table: TaskTable, call: int, copy: int, issue_us: float) -> CopyWait:
    """A call that issues a copy and waits for it becomes two CPU tasks: the issue (the call's own cost of
    issuing work, typical of the trace's launch calls), and the wait, released by the copy's end. The copy itself
    waits in its stream behind the work queued before it, so faster GPU work starts the copy, and returns the
    call, sooner; the time the call spent waiting is nobody's CPU time."""
    issue_end = min(table.ts[call] + issue_us, table.ts[copy], table.end[call])
    issue_end = max(issue_end, table.ts[call])
    call_end = table.end[call]
    table.end[call] = issue_end
    (wait_attrs,) = table.attrs_of([call])
    wait_attrs["name"] += " [wait]"
    wait = table.add_task(wait_attrs, issue_end, call_end - issue_end)
    return CopyWait(wait, copy)
