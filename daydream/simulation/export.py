"""Writing simulated timelines as Chrome-trace JSON (opens in Perfetto and chrome://tracing).

Each timeline is one process (``pid``), named after its label (``baseline``, ``predicted``) and its trace; its
threads (numeric ``tid``, named by metadata events) are, in this order: a "critical path" track holding one slice per
task on the path, then every CPU thread followed by its "ops" and "modules" tracks, then every GPU stream. Tasks are
X slices (``args.critical_path`` on the path's); every launch edge is a flow arrow from the runtime call to the
kernel. Times are microseconds from the trace's origin plus ``origin_us``, as the trace had them.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from daydream.files import json_bytes, write_atomically
from daydream.graph.adjacency import predecessors_of
from daydream.graph.schema import GPU_KINDS
from daydream.simulation.timeline import Timeline, critical_path_indices, critical_path_segments

_CATS = {
    "cpu": "cpu_op",
    "dataloader": "dataloader",
    "gpu": "kernel",
    "comm": "kernel",
    "memcpy": "gpu_memcpy",
    "memset": "gpu_memset",
}
_ARGS = ("op", "layer", "phase", "step", "class", "bytes")
FLOW_CAT = "launch"  # cat and name of the launch -> kernel flow arrows
CRITICAL_PATH = "critical path"

Named = Sequence[tuple[str, Timeline]]


@dataclass
class _Thread:
    """One CPU thread or GPU stream of a timeline: its tasks in start order and the lane (tid) each lands on."""

    name: str
    gpu: bool
    tasks: list[int] = field(default_factory=list)
    lanes: list[int] = field(default_factory=list)  # per task of ``tasks``: 0, or k > 0 where it overlaps lane 0..k-1
    tids: list[int] = field(default_factory=list)  # per lane


def export_chrome_trace(timelines: Timeline | Named, path: str | os.PathLike[str], label: str = "simulated") -> None:
    """Write one timeline (as a process called ``label``) or several named ones, e.g. ``[("baseline", t0),
    ("predicted", t1)]`` (one process each), as a Chrome-trace JSON file (gzip-compressed when ``path`` ends in .gz)."""
    named = [(label, timelines)] if isinstance(timelines, Timeline) else list(timelines)
    data = json_bytes(chrome_trace(named))
    if str(path).endswith(".gz"):
        import gzip

        data = gzip.compress(data, compresslevel=6)
    write_atomically(path, data)


def chrome_trace(named: Named) -> dict[str, Any]:
    """The Chrome-trace document of the named timelines: one process each; thread and flow ids unique across all (a
    viewer that keys threads by tid alone still keeps the processes apart)."""
    flow_ids, tids = itertools.count(1), itertools.count(1)
    events: list[dict[str, Any]] = []
    flows: list[dict[str, Any]] = []
    for pid, (label, timeline) in enumerate(named, 1):
        slices, arrows = timeline_events(timeline, pid, label, flow_ids, tids)
        events += slices
        flows += arrows
    sources = list(dict.fromkeys(t.graph.graph.get("trace") for _, t in named))
    return {
        # flows after every slice: a viewer binds a flow event to the slice open at its time, so at a tie (a kernel's
        # start) the slice must already be read
        "traceEvents": events + flows,
        "displayTimeUnit": "ms",
        "otherData": {
            "generator": "daydream",
            "source": sources[0] if len(sources) == 1 else sources,
            "processes": [label for label, _ in named],
        },
    }


def timeline_events(
    timeline: Timeline,
    pid: int = 1,
    label: str = "simulated",
    flow_ids: Iterator[int] | None = None,
    tids: Iterator[int] | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The slices and metadata of ``timeline`` as process ``pid``, and its launch flows (ids from ``flow_ids``, its
    threads' from ``tids``; both count from 1 where not given)."""
    origin = float(timeline.graph.graph.get("origin_us", 0.0))
    # times as the file holds them: a slice's end is ts + dur exactly (te - ts of two nearby floats is exact), so
    # tasks that touch on a thread touch in the file too instead of overlapping by a rounding
    ts = (timeline.start + origin).tolist()
    te = (timeline.end + origin).tolist()
    threads = _threads(timeline.task_attrs, ts, te)
    names = _Names(tids or itertools.count(1))
    cp_tid = names.new(CRITICAL_PATH)
    events: list[dict[str, Any]] = []
    tid_of = [0] * len(ts)
    for th in threads:
        events += _thread_tracks(th, timeline.task_attrs, pid, names, ts, te)
        for i, lane in zip(th.tasks, th.lanes):
            tid_of[i] = th.tids[lane]
    path = critical_path_indices(timeline)
    events += _task_slices(timeline, pid, tid_of, ts, te, set(path))
    events += _critical_path_slices(timeline, path, pid, cp_tid, ts, te)
    flows = _flows(timeline, pid, tid_of, ts, te, flow_ids or itertools.count(1))
    return _metadata(pid, _process_name(label, timeline), names) + events, flows


def _thread_tracks(
    th: _Thread, attrs: list[dict[str, Any]], pid: int, names: _Names, ts: list[float], te: list[float]
) -> list[dict[str, Any]]:
    """Give ``th`` its tids (one per lane), and a CPU thread its "ops" and "modules" tracks right below it (where
    its tasks name any): the slices of those."""
    th.tids = [
        names.new(th.name if k == 0 else f"{th.name} (overlap {k})") for k in range(max(th.lanes, default=0) + 1)
    ]
    events: list[dict[str, Any]] = []
    if th.gpu:
        return events
    for attr, what, cat in (("op", "ops", "op"), ("layer", "modules", "module")):
        runs = _runs(attrs, th.tasks, attr, ts, te)
        if runs:
            tid = names.new(f"{th.name} {what}")
            events += [_slice(cat, value, pid, tid, t0, t1, {"tasks": count}) for value, t0, t1, count in runs]
    return events


def _threads(attrs: list[dict[str, Any]], ts: list[float], te: list[float]) -> list[_Thread]:
    """The timeline's threads, CPU threads first (by rank, then name), each with its tasks in start order on lanes."""
    multi_rank = len({a.get("rank") for a in attrs}) > 1  # as the simulator: a job's ranks keep their threads apart
    by_key: dict[tuple[Any, str], _Thread] = {}
    for i, a in enumerate(attrs):
        rank, thread = (a.get("rank") if multi_rank else None), str(a["thread"])
        th = by_key.get((rank, thread))
        if th is None:
            name = f"rank {rank} {thread}" if multi_rank else thread
            th = by_key[rank, thread] = _Thread(name, a["kind"] in GPU_KINDS)
        th.tasks.append(i)
    for th in by_key.values():
        th.tasks.sort(key=lambda i: (ts[i], te[i]))
        th.lanes = _lanes(th.tasks, ts, te)
    order = sorted(
        by_key, key=lambda k: (by_key[k].gpu, k[0] is not None, k[0] if isinstance(k[0], int) else 0, _natural(k[1]))
    )
    return [by_key[k] for k in order]


def _lanes(tasks: list[int], ts: list[float], te: list[float]) -> list[int]:
    """The first lane free at each task's start: all 0 for a simulated thread (its tasks do not overlap); tasks that
    do (the attributes of a baseline that scripts changed since) go to lanes of their own, so slices always nest."""
    free_at: list[float] = []
    out = []
    for i in tasks:
        lane = next((k for k, t in enumerate(free_at) if t <= ts[i]), len(free_at))
        if lane == len(free_at):
            free_at.append(te[i])
        free_at[lane] = te[i]
        out.append(lane)
    return out


def _runs(
    attrs: list[dict[str, Any]], tasks: list[int], attr: str, ts: list[float], te: list[float]
) -> list[tuple[str, float, float, int]]:
    """(value, start, end, tasks) of each run of consecutive ``tasks`` sharing ``attr`` (a task without one ends a run),
    clipped to start where the run before ended so that runs never overlap on their track."""
    runs: list[tuple[str, float, float, int]] = []
    value: Any = None
    for i in tasks:
        v = attrs[i].get(attr)
        if v is not None and v == value:
            name, t0, t1, count = runs[-1]
            runs[-1] = (name, t0, max(t1, te[i]), count + 1)
        elif v is not None:
            t0 = max(ts[i], runs[-1][2]) if runs else ts[i]
            runs.append((str(v), t0, max(t0, te[i]), 1))
        value = v
    return runs


def _task_slices(
    timeline: Timeline, pid: int, tid_of: list[int], ts: list[float], te: list[float], on_path: set[int]
) -> list[dict[str, Any]]:
    events = []
    for i, (node, a) in enumerate(zip(timeline.nodes, timeline.task_attrs)):
        args = {k: v for k in _ARGS if (v := a.get(k)) is not None}
        args["task"] = node if isinstance(node, (int, str)) else str(node)
        if i in on_path:
            args["critical_path"] = True
        events.append(_slice(_CATS.get(a["kind"], str(a["kind"])), a["name"], pid, tid_of[i], ts[i], te[i], args))
    return events


def _critical_path_slices(
    timeline: Timeline, path: list[int], pid: int, tid: int, ts: list[float], te: list[float]
) -> list[dict[str, Any]]:
    """One slice per path task, from its start to the next path task's start (the last: to its end), so the path
    reads as one row; a start before the previous slice's end (a kernel may start before its launch call returns)
    is moved to it, so the row stays in time order."""
    events = []
    at = -float("inf")
    for k, (i, held) in enumerate(zip(path, critical_path_segments(timeline, path))):
        t0 = max(ts[i], at)
        at = max(t0, ts[path[k + 1]] if k + 1 < len(path) else te[i])
        a = timeline.task_attrs[i]
        args = {
            "task": timeline.nodes[i] if isinstance(timeline.nodes[i], (int, str)) else str(timeline.nodes[i]),
            "thread": str(a["thread"]),
            "kind": str(a["kind"]),
            "held_us": held,
        }
        events.append(_slice("critical_path", a["name"], pid, tid, t0, at, args))
    return events


def _flows(
    timeline: Timeline, pid: int, tid_of: list[int], ts: list[float], te: list[float], ids: Iterator[int]
) -> list[dict[str, Any]]:
    """A flow arrow per launch edge whose both ends the timeline holds: its start inside the launch call's slice (the
    middle, or the kernel's start if earlier), its finish at the kernel's start. The graph may have changed since the
    timeline was simulated (a what-if's baseline): tasks and edges it no longer or not yet holds are left out."""
    index = {node: i for i, node in enumerate(timeline.nodes)}
    pred = predecessors_of(timeline.graph)
    flows = []
    for i, node in enumerate(timeline.nodes):
        for parent, edge in pred.get(node, {}).items():
            j = index.get(parent)
            if j is None or edge.get("kind") != "launch":
                continue
            at = max(ts[j], min((ts[j] + te[j]) / 2, ts[i]))
            flow_id = next(ids)
            flows.append(
                {"ph": "s", "id": flow_id, "cat": FLOW_CAT, "name": FLOW_CAT, "pid": pid, "tid": tid_of[j], "ts": at}
            )
            flows.append(
                {
                    "ph": "f",
                    "bp": "e",
                    "id": flow_id,
                    "cat": FLOW_CAT,
                    "name": FLOW_CAT,
                    "pid": pid,
                    "tid": tid_of[i],
                    "ts": max(ts[i], at),
                }
            )
    return flows


def _slice(cat: str, name: Any, pid: int, tid: int, t0: float, t1: float, args: dict[str, Any]) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": str(name), "pid": pid, "tid": tid, "ts": t0, "dur": t1 - t0, "args": args}


class _Names:
    """The tracks of a process: tid -> name, the tids drawn in order from a counter."""

    def __init__(self, ids: Iterator[int]) -> None:
        self.ids = ids
        self.by_tid: dict[int, str] = {}

    def new(self, name: str) -> int:
        tid = next(self.ids)
        self.by_tid[tid] = name
        return tid


def _metadata(pid: int, process: str, names: _Names) -> list[dict[str, Any]]:
    """Process and thread names, and sort indices that keep the tracks in the order of their tids."""
    first = min(names.by_tid)  # the process's own events on one of its threads: some viewers make a thread of tid 0
    events = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": first, "args": {"name": process}},
        {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": first, "args": {"sort_index": pid}},
    ]
    for tid, name in names.by_tid.items():
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}})
        events.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": tid}})
    return events


def _process_name(label: str, timeline: Timeline) -> str:
    trace = timeline.graph.graph.get("trace")
    return f"{label} ({os.path.basename(str(trace))})" if trace else label


def _natural(text: str) -> tuple[Any, ...]:
    """Sort key with numbers in order: stream 7 before stream 13."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text))
