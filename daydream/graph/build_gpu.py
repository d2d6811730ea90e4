"""Builder stage 2: the GPU tasks (kernels, copies, fills, collectives), each launched by the runtime call with its
correlation id and taking that call's context; a call that issued a copy and returned only when it ended becomes two
tasks, the issue and the wait.
"""

from __future__ import annotations

import re
import statistics
from typing import Any, NamedTuple

from daydream.graph.build_cpu import CpuCalls
from daydream.graph.build_table import TaskTable
from daydream.graph.kernel_class import classify_kernel, collective_of, is_comm_kernel
from daydream.graph.schema import EDGE_KIND_NUMBER, new_task_attrs
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


def gpu_tasks(trace: Trace, table: TaskTable, calls: CpuCalls) -> list[CopyWait]:
    """Add the trace's GPU tasks to ``table``, each with its ``launch`` edge; returns the blocking copy calls' waits."""
    rank = trace.rank
    n_cpu = len(table.attrs)
    blocking: list[tuple[int, int]] = []  # (call, copy) pairs where the call returned only when the copy ended
    corr_task = calls.corr_task
    streams: dict[tuple[Any, Any], str] = {}  # each stream's thread name, one string for all its tasks
    made: list[dict[str, Any]] = []
    starts: list[float] = []
    ends: list[float] = []
    launchers: list[int] = []
    for task, ev in enumerate(trace.gpu, n_cpu):
        args = ev.args
        corr = args.correlation if args is not None else None
        launcher = corr_task.get(corr) if corr is not None else None
        if launcher is not None and launcher >= n_cpu:
            launcher = None  # the id names another GPU task, not a call
        made.append(
            _gpu_attrs(ev, rank, table.attrs[launcher] if launcher is not None else None, calls.comm_ev, launcher, streams)
        )
        starts.append(ev.ts)  # type: ignore[arg-type]
        ends.append(ev.ts + ev.dur)  # type: ignore[operator]
        launchers.append(-1 if launcher is None else launcher)
        if corr is not None:
            corr_task.setdefault(corr, task)
    # the tasks added at once, as TaskTable.add_task adds each, with their launch edges (in order, as add_edge)
    table.attrs += made
    table.ts += starts
    table.end += ends
    table.launcher += launchers
    call_ts = table.ts
    table.launch_ts += [call_ts[call] if call >= 0 else t0 for call, t0 in zip(launchers, starts)]
    launched = [(call, task) for task, call in enumerate(launchers, n_cpu) if call >= 0]
    table.edge_parent += [call for call, _ in launched]
    table.edge_child += [task for _, task in launched]
    table.edge_kind += [EDGE_KIND_NUMBER["launch"]] * len(launched)
    for call, task in launched:
        if made[task - n_cpu]["kind"] == "memcpy" and _blocking_copy(table, call, task):
            blocking.append((call, task))
    if not blocking:
        return []
    issue_us = _typical_issue_us(table, {call for call, _ in blocking})
    return [_split_blocking_call(table, call, copy, issue_us) for call, copy in blocking]


def _gpu_attrs(
    ev: Event, rank: int, src: dict[str, Any] | None, comm_ev: dict[int, Event], launcher: int | None,
    streams: dict[tuple[Any, Any], str],
) -> dict[str, Any]:  # fmt: skip
    """A GPU task's attributes: where it ran, what it is, and the context of the call that launched it (``src``);
    a collective's size and name may come from the op or range the call was made in (``comm_ev``). ``streams``: the
    thread names made so far, by (device, stream) where both are ints: one string per stream, not one per task."""
    args = ev.args
    stream = args.stream if args is not None and isinstance(args.stream, int) else ev.tid
    device = args.device if args is not None and args.device is not None else ev.pid
    cat = ev.cat
    kind = "memcpy" if cat in MEMCPY_CATS else "memset" if cat in MEMSET_CATS else "gpu"
    if kind == "gpu" and is_comm_kernel(ev.name):
        kind = "comm"
    attrs = new_task_attrs(kind)  # filled a key at a time: see new_task_attrs
    attrs["name"] = ev.name
    key = (device, stream) if type(device) is int and type(stream) is int else None  # ints only: 1 == True == 1.0
    thread = streams.get(key)
    if thread is None:
        thread = f"gpu:{device}/{stream}"
        if key is not None:
            streams[key] = thread
    attrs["thread"] = thread
    attrs["rank"] = rank
    if src:
        attrs["op"] = src["op"]
        attrs["shapes"] = src["shapes"]
        attrs["top_op"] = src["top_op"]
        attrs["layer"] = src["layer"]
        attrs["phase"] = src["phase"]
        attrs["region"] = src["region"]
        attrs["top_op_id"] = src["top_op_id"]
    else:
        attrs["op"] = attrs["shapes"] = attrs["top_op"] = attrs["layer"] = attrs["phase"] = attrs["region"] = None
        attrs["top_op_id"] = None
    attrs["class"] = classify_kernel(ev.name, kind)
    attrs["device"] = device
    attrs["stream"] = stream
    if args is not None and kind in ("memcpy", "memset") and isinstance(args.bytes, (int, float)):
        attrs["bytes"] = int(args.bytes)
    if kind == "comm":
        around = comm_ev.get(launcher) if launcher is not None else None
        named = (
            collective_of(re.sub(r"[^0-9A-Za-z]", "", around.name[5:])) if around and around.name.startswith("nccl:") else None
        )
        # all-to-all runs as SendRecv kernels: the range that launched them says what it was
        attrs["collective"] = named or collective_of(ev.name)
        nbytes = message_bytes(args) or (message_bytes(around.args) if around is not None else None)
        if nbytes is not None:
            attrs["bytes"] = nbytes
        attrs.update(process_group(args) or (process_group(around.args) if around is not None else None) or {})
    return attrs


def _blocking_copy(table: TaskTable, call: int, copy: int) -> bool:
    attrs, ts, end = table.attrs, table.ts, table.end
    return copy_waits(attrs[call]["name"], attrs[copy]["name"], ts[call], end[call], ts[copy], end[copy])


def _typical_issue_us(table: TaskTable, blocking: set[int]) -> float:
    """How long a call takes to issue GPU work: the median duration of the calls that launched work and did not
    wait for it (cudaLaunchKernel, cudaMemcpyAsync...)."""
    durations = [
        table.end[call] - table.ts[call]
        for call in table.launcher
        if call >= 0 and call not in blocking and call_role(table.attrs[call]["name"]) is None
    ]
    return statistics.median(durations) if durations else DEFAULT_ISSUE_US


def _split_blocking_call(table: TaskTable, call: int, copy: int, issue_us: float) -> CopyWait:
    """A call that issues a copy and waits for it becomes two CPU tasks: the issue (the call's own cost of
    issuing work, typical of the trace's launch calls), and the wait, released by the copy's end. The copy itself
    waits in its stream behind the work queued before it, so faster GPU work starts the copy, and returns the
    call, sooner; the time the call spent waiting is nobody's CPU time."""
    issue_end = min(table.ts[call] + issue_us, table.ts[copy], table.end[call])
    issue_end = max(issue_end, table.ts[call])
    call_end = table.end[call]
    table.end[call] = issue_end
    wait_attrs = table.attrs[call].copy()  # .copy(), not dict(): it keeps the compact form (see new_task_attrs)
    wait_attrs["name"] = table.attrs[call]["name"] + " [wait]"
    wait = table.add_task(wait_attrs, issue_end, call_end - issue_end)
    return CopyWait(wait, copy)
