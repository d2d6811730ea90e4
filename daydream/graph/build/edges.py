"""Builder stage 3: the dependencies the trace gives evidence of (docs/graph.md, "Dependencies"): each thread's and
stream's order, CPU calls that block on GPU work, streams that wait for other streams, the caller of
``loss.backward()`` and the autograd engine's thread, and a DataLoader's calls that wait for its worker processes.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable
from typing import Any, NamedTuple

import numpy as np

from daydream.graph.build.cpu import LoaderRange, root_cpu_attrs
from daydream.graph.build.gpu import CopyWait
from daydream.graph.build.table import InEdge, TaskTable
from daydream.graph.context import fed_by_workers
from daydream.graph.schema import CPU_KINDS, EDGE_KIND_NUMBER
from daydream.trace.model import Trace
from daydream.trace.runtime_calls import LaunchQueue, call_role
from daydream.trace.schema import Event

# A thread idle this long across another thread's backward tasks is waiting in loss.backward().
BACKWARD_WAIT_MIN_US = 20.0
# A thread idle this long inside a DataLoader's `__next__` (worker processes) waited for a batch.
LOADER_WAIT_MIN_US = 20.0
# ... and this share of the time since its previous call: a shorter wait is within the call's jitter and changes the
# step by less than that.
LOADER_WAIT_SHARE = 0.01
# The thread that stands for a DataLoader's worker processes (the trace holds none of their work).
LOADER_WORKERS_THREAD = "DataLoader workers"
# A CPU thread whose tasks are at least this share backward tasks is the autograd engine's.
ENGINE_THREAD_SHARE = 0.5


class BackwardWait(NamedTuple):
    """A caller thread idle across the engine thread's backward tasks (see :func:`backward_waits`)."""

    call: int  # the caller's task before the idle stretch
    after: int  # its task after it
    last: int  # the last backward task inside the stretch
    first: int  # the first


class LoaderWait(NamedTuple):
    """A DataLoader call that waited for its workers' batch (see :func:`loader_waits`)."""

    workers: int  # the workers' task: making the batch
    consumer: int  # the task that waited for it
    before: int | None  # the calling thread's task before the wait (None: the range is one task)
    own_us: float  # the call's own cost, which stays the calling thread's


class _LoaderCall(NamedTuple):
    """A data-loading range and its longest idle stretch."""

    thread: str
    t0: float  # the range's start
    name: str
    whole: bool  # the range is one task (nothing traced ran inside it): the stretch is all of it
    idle: float
    after: int  # the task after the idle stretch (the whole range's task)
    before: int | None  # the task before it


def order_edges(table: TaskTable) -> dict[str, list[int]]:
    """Chain each thread's (stream's) tasks in order of start; returns the tasks of each thread, in that order."""
    threads: dict[str, list[int]] = {}
    for task, thread in enumerate(table.column("thread")):
        threads.setdefault(thread, []).append(task)
    ts = table.ts
    for thread, tasks in threads.items():
        tasks.sort(key=ts.__getitem__)
        # table.add_edge, a thread at a time: the most frequent edge by far
        table.edge_parent += tasks[:-1]
        table.edge_child += tasks[1:]
        table.edge_kind += [EDGE_KIND_NUMBER["stream" if thread.startswith("gpu:") else "thread"]] * (len(tasks) - 1)
    return threads


def copy_wait_edges(table: TaskTable, waits: list[CopyWait], threads: dict[str, list[int]]) -> None:
    """What each blocking copy call waited for: the copy's end where the copy ended inside the call; else (a
    copy from pageable host memory, which CUDA starts by draining the stream and returns from once the data is
    staged, before the last transfer ends) the end of the work queued before the copy on its stream."""
    end = table.end
    position: dict[int, int] = {}
    for wait, copy in waits:
        if end[copy] <= end[wait]:
            table.add_edge(copy, wait, "sync")
            continue
        stream = threads[table.column("thread")[copy]]
        if not position:
            position = {x: i for tasks in threads.values() for i, x in enumerate(tasks)}
        i = position[copy]
        if i > 0 and end[stream[i - 1]] <= end[wait]:
            table.add_edge(stream[i - 1], wait, "sync")


def infers_stream_waits(trace: Trace) -> bool:
    """Whether cross-stream waits must be inferred from timing: the trace calls cudaStreamWaitEvent but records no
    ``cuda_sync`` event saying what each call waited for."""
    return not any((e.args is not None and "Wait Event" in (e.args.cuda_sync_kind or "")) for e in trace.syncs) and any(
        call_role(name) == "wait_event" for name in _runtime_names(trace)
    )


def _runtime_names(trace: Trace) -> Iterable[str]:
    """The runtime calls' names (each distinct one once, where read from the loader's columns: Trace.kept_rows)."""
    kept, cols = trace.kept_rows("runtime"), trace.cpu_columns
    if kept is None or cols is None:
        return (e.name for e in trace.runtime)
    return (cols.strings[i] for i in np.unique(cols.name[kept]).tolist())


def _runtime_correlations(trace: Trace) -> Iterable[int]:
    """The runtime calls' correlation ids, in the family's order (calls without one left out)."""
    kept, cols = trace.kept_rows("runtime"), trace.cpu_columns
    if kept is None or cols is None:
        return (e.args.correlation for e in trace.runtime if e.args is not None and e.args.correlation is not None)
    return cols.corr[kept][cols.has_corr[kept]].tolist()


class _IssueOrder:
    """Per stream, its tasks in the order they were issued, and their issue times: "the last work issued before t"."""

    __slots__ = ("tasks", "times")

    def __init__(self, table: TaskTable, streams: dict[str, list[int]]) -> None:
        launch_ts = table.launch_ts
        self.tasks = {t: sorted(tasks, key=launch_ts.__getitem__) for t, tasks in streams.items()}
        self.times = {t: [launch_ts[x] for x in tasks] for t, tasks in self.tasks.items()}

    def last_before(self, stream: str, t: float) -> int | None:
        i = bisect.bisect_left(self.times[stream], t)
        return self.tasks[stream][i - 1] if i else None


def sync_edges(trace: Trace, table: TaskTable, corr_task: dict[int, int], threads: dict[str, list[int]]) -> None:
    """CPU calls that block on GPU work, and GPU work that waits on another stream."""
    kind, name = table.column("kind"), table.column("name")
    streams = {t: tasks for t, tasks in threads.items() if t.startswith("gpu:")}
    issued = _IssueOrder(table, streams)
    explicit = {ev.args.correlation: ev for ev in trace.syncs if ev.args is not None and ev.args.correlation is not None}
    by_stream_id: dict[Any, list[str]] = {}
    for t in streams:
        by_stream_id.setdefault(t.rsplit("/", 1)[1], []).append(t)
    runtime_by_corr: dict[int, int] = {}
    for corr in _runtime_correlations(trace):
        task = corr_task.get(corr)
        if task is not None and kind[task] == "cpu":
            runtime_by_corr[corr] = task
    for corr, task in runtime_by_corr.items():
        sync = explicit.get(corr)
        if sync is not None and sync.args is not None:
            if "Wait Event" in (sync.args.cuda_sync_kind or sync.name):
                _explicit_wait(table, sync, task, by_stream_id, issued, runtime_by_corr)
                continue
            targets = _named_by_sync_event(table, task, sync, streams, by_stream_id, issued)
        else:
            role = call_role(name[task])
            if role is None:
                continue  # a call that waits for nothing: most are launches
            targets = _waited_for_by_role(table, task, role, streams, issued)
        for target in targets:
            table.add_edge(target, task, "sync")


def queue_waits(table: TaskTable, threads: dict[str, list[int]], long_calls: list[int]) -> int:
    """Launch calls that waited for room in the launch queue (trace.runtime_calls.LaunchQueue): each waited for the
    task whose end freed its slot, a ``sync`` edge from it, so that the call keeps only its own cost after the wait as
    its duration (build_delays) and faster GPU work lets it return sooner. ``long_calls``: the calls the CPU sweep
    found that may have waited (trace.runtime_calls.may_wait_for_queue). Returns how many calls waited. Only the
    waits the trace shows are edges: where a change makes the GPU slower than in the trace, a queue that never filled
    in the trace fills in no prediction either."""
    if not long_calls:
        return 0
    ts, end = table.ts, table.end
    devices: dict[str, list[int]] = {}  # device -> its GPU tasks
    for thread, tasks in threads.items():
        if thread.startswith("gpu:"):
            devices.setdefault(thread.split("/")[0], []).extend(tasks)
    queues = [(tasks, LaunchQueue([table.launch_ts[x] for x in tasks], [end[x] for x in tasks])) for tasks in devices.values()]
    waited = 0
    for call in long_calls:
        for tasks, queue in queues:
            freed = queue.freed_by(ts[call], end[call])
            if freed is not None:
                table.add_edge(tasks[freed], call, "sync")
                waited += 1
                break
    return waited


def _named_by_sync_event(table: TaskTable, task: int, sync: Event, streams: dict[str, list[int]],
                         by_stream_id: dict[Any, list[str]], issued: _IssueOrder) -> list[int]:
    """What a call with a ``cuda_sync`` event returns only after: the last work issued to the stream it names (the
    recorded event's, for an event sync), or to every stream (a context or device sync)."""
    args = sync.args
    assert args is not None
    call_ts = table.ts[task]
    kind = args.cuda_sync_kind or sync.name
    if "Stream" in kind or "Event" in kind:
        sid = args.wait_on_stream if "Event" in kind and args.wait_on_stream is not None else args.stream
        return [last for stream in by_stream_id.get(str(sid), []) if (last := issued.last_before(stream, call_ts)) is not None]
    return [x for s in streams if (x := issued.last_before(s, call_ts)) is not None]


def _waited_for_by_role(table: TaskTable, task: int, role: str, streams: dict[str, list[int]], issued: _IssueOrder) -> list[int]:
    """What a call without a ``cuda_sync`` event returns only after, by its role (trace/runtime_calls.py): a device
    sync, the last work issued to every stream; a stream sync, the stream's."""
    call_ts, call_end = table.ts[task], table.end[task]
    if role == "device":
        return [x for s in streams if (x := issued.last_before(s, call_ts)) is not None]
    if role == "stream":
        # The stream is not recorded: it is the one whose pending work ended last within the call.
        end = table.end
        best = None
        for s in streams:
            last = issued.last_before(s, call_ts)
            if last is not None and call_ts < end[last] <= call_end and (best is None or end[last] > end[best]):
                best = last
        return [best] if best is not None else []
    return []


def _explicit_wait(table: TaskTable, sync: Event, wait_task: int, by_stream_id: dict[Any, list[str]], issued: _IssueOrder,
                   runtime_by_corr: dict[int, int]) -> None:
    """A ``cudaStreamWaitEvent`` with its ``cuda_sync`` event: the next work issued to the waiting stream waits for the
    last work issued to the waited stream before the ``cudaEventRecord``."""
    args = sync.args
    assert args is not None
    record = runtime_by_corr.get(args.wait_on_cuda_event_record_corr_id)  # type: ignore[arg-type]
    if record is None:
        return
    for src_stream in by_stream_id.get(str(args.wait_on_stream), []):
        source = issued.last_before(src_stream, table.ts[record])
        if source is None:
            continue
        for dst_stream in by_stream_id.get(str(args.stream), []):
            j = bisect.bisect_right(issued.times[dst_stream], table.ts[wait_task])
            if j < len(issued.tasks[dst_stream]):
                dest = issued.tasks[dst_stream][j]
                kinds = (table.column("kind")[source], table.column("kind")[dest])
                table.add_edge(source, dest, "comm" if "comm" in kinds else "sync")


def backward_waits(table: TaskTable, threads: dict[str, list[int]]) -> list[BackwardWait]:
    """`loss.backward()` blocks its thread while the autograd engine's thread runs the backward pass: where a CPU
    thread is idle across a stretch of the engine thread's backward tasks, the task after the idle stretch waits
    for the last of them (a `sync` edge), and the first of them waits for the task before the stretch (the call).
    Returns the stretches for :func:`~daydream.graph.build.delays.split_backward_gaps`."""
    op, ts, end = table.column("op"), table.ts, table.end
    backward = _engine_threads(table, threads)
    found = []
    for t, tasks in threads.items():
        # the caller runs framework ops; a polling thread (NCCL's watchdog querying events) runs none
        if t.startswith("gpu:") or all(op[x] is None for x in tasks):
            continue
        others = [(u, [ts[x] for x in xs], xs) for u, xs in backward.items() if u != t]
        if not others:
            continue
        for p, n in zip(tasks, tasks[1:]):
            if ts[n] - end[p] < BACKWARD_WAIT_MIN_US:
                continue
            for _, starts, xs in others:
                lo = bisect.bisect_right(starts, end[p])
                hi = bisect.bisect_left(starts, ts[n])
                inside = [x for x in xs[lo:hi] if end[x] <= ts[n]]
                if inside:
                    last = max(inside, key=end.__getitem__)
                    table.add_edge(last, n, "sync")
                    table.add_edge(p, inside[0], "sync")  # and the backward began when called
                    found.append(BackwardWait(p, n, last, inside[0]))
                    break
    return found


def _engine_threads(table: TaskTable, threads: dict[str, list[int]]) -> dict[str, list[int]]:
    """The autograd engine's threads, with their backward tasks: it runs the backward pass and little else; a thread
    that merely holds a `## backward ##` range around its loss computation is the caller, not the engine."""
    phase, kind = table.column("phase"), table.column("kind")
    backward: dict[str, list[int]] = {}
    for t, tasks in threads.items():
        if not t.startswith("gpu:"):
            bwd = [x for x in tasks if phase[x] == "backward" and kind[x] in CPU_KINDS]
            if bwd and len(bwd) >= ENGINE_THREAD_SHARE * len(tasks):
                backward[t] = bwd
    return backward


def loader_waits(
    table: TaskTable, loader_ranges: list[LoaderRange], threads: dict[str, list[int]], rank: int
) -> list[LoaderWait]:
    """A DataLoader with worker processes hands out batches the workers made; where `__next__` idles waiting for
    one, the wait is a dependency on the workers, not the thread's own CPU time.

    The workers are one task per waited batch on a thread of their own (``cpu:<pid>/DataLoader workers``, kind
    ``dataloader``), from the call's start to the end of its wait; the task after the wait depends on it
    (``sync``). A wait means the workers' prefetched batches had run out: they make batches no faster than the
    step takes them. So where two calls in a row waited, the second batch follows the first on the workers'
    thread, the time between the two waits being the workers' gap: the thread carries the loader's throughput,
    and a step cannot come sooner than its batch, whatever else gets faster, while a faster loader
    (``dataloader``) shortens both. Otherwise, or where the workers' previous task is outside the window, the
    batch is asked for by the call: an edge from the thread's task before it, with the measured delay
    (``fallback_edges``: used by :func:`daydream.graph.build._cut` only where the task has no other parent in the window).

    A call's own cost is its shortest idle stretch among the trace's calls of the same range (a batch that was
    ready; where nothing traced runs inside the range, the range is one task and the stretch is all of it); a call
    waited where it idled longer than that by at least as much again, by LOADER_WAIT_SHARE of the time since the
    previous call, and by LOADER_WAIT_MIN_US (a shorter wait is within the call's jitter). Returns the waits for
    :func:`~daydream.graph.build.delays.split_loader_gaps`."""
    ts, end = table.ts, table.end
    ranges = sorted((r for r in loader_ranges if fed_by_workers(r.name)), key=lambda r: r.ts)
    calls = _loader_calls(table, ranges, threads)
    ready_cost: dict[tuple[str, str, bool], float] = {}
    for c in calls:
        key = (c.thread, c.name, c.whole)
        ready_cost[key] = min(ready_cost.get(key, math.inf), c.idle)
    ends = {t: [end[x] for x in threads[t]] for t in {r.thread for r in ranges}}  # a thread's tasks do not overlap
    waits: list[LoaderWait] = []
    previous_waited: dict[str, int] = {}  # per calling thread, the workers' task of its last call if it waited
    previous_call: dict[str, float] = {}
    for thread, t0, name, whole, idle, consumer, before in calls:
        own = ready_cost[(thread, name, whole)]
        since = t0 - previous_call.get(thread, t0)
        previous_call[thread] = t0
        if idle - own < max(LOADER_WAIT_MIN_US, own, LOADER_WAIT_SHARE * since):
            previous_waited.pop(thread, None)
            continue
        ready_at = (end[consumer] if whole else ts[consumer]) - own
        workers = f"{thread.split('/')[0]}/{LOADER_WORKERS_THREAD}"
        a = root_cpu_attrs("dataloader", "DataLoader workers: batch", workers, rank)
        a.update(phase="dataloader", region=name, duration=ready_at - t0)
        worker = table.add_task(a, t0, ready_at - t0)
        threads.setdefault(a["thread"], []).append(worker)
        table.add_edge(worker, consumer, "sync")
        if thread in previous_waited:
            table.add_edge(previous_waited[thread], worker, "thread")
        k = bisect.bisect_right(ends[thread], t0) - 1
        if k >= 0:
            table.fallback_edges[worker] = InEdge(threads[thread][k], "sync", t0 - ends[thread][k])
        previous_waited[thread] = worker
        waits.append(LoaderWait(worker, consumer, before, 0.0 if whole else own))
    return waits


def _loader_calls(table: TaskTable, ranges: list[LoaderRange], threads: dict[str, list[int]]) -> list[_LoaderCall]:
    """Each data-loading range with its longest idle stretch: the range's own task where it is one, else the longest
    time the calling thread's tasks inside it left idle."""
    kind, ts, end = table.column("kind"), table.ts, table.end
    starts = {t: [ts[x] for x in threads[t]] for t in {r.thread for r in ranges}}
    calls = []
    for thread, t0, t1, name in ranges:
        tasks = threads[thread]
        i = bisect.bisect_left(starts[thread], t0)
        whole = next((x for x in tasks[i : i + 2] if ts[x] == t0 and end[x] == t1 and kind[x] == "dataloader"), None)
        if whole is not None:
            calls.append(_LoaderCall(thread, t0, name, True, t1 - t0, whole, None))
            continue
        best = None
        for j in range(max(i, 1), len(tasks)):
            n = tasks[j]
            if ts[n] > t1:
                break
            idle = ts[n] - max(end[tasks[j - 1]], t0)
            if best is None or idle > best.idle:
                best = _LoaderCall(thread, t0, name, False, idle, n, tasks[j - 1])
        if best is not None:
            calls.append(best)
    return calls
