"""Changing a graph: adding, scaling, removing and inserting tasks while it stays a schedulable DAG.

These are the primitives behind .whatif statements (``scale``, ``set``, ``remove``, ``insert``);
notebooks call them directly. Each refuses, before changing anything, an edit that would leave a kernel
without its launch or a thread out of order; ``insert`` also refuses one that would close a cycle.
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import msgspec
import networkx as nx

from daydream.errors import DaydreamError
from daydream.graph import derived
from daydream.graph.adjacency import attrs_of, predecessors_of, successors_of
from daydream.graph.memory import tasks_removed
from daydream.graph.order import Work, edited, find_back_edge_cycle, forget, place_new, topological_order
from daydream.graph.schema import CPU_KINDS, EDGE_KINDS, GPU_KINDS, ORDER_KINDS, Task, delays_of
from daydream.graph.select import Selection, in_time_order, is_real_number

# Attributes that place a task (its thread order, its kind of work): changing them would break the
# thread chains the simulator relies on. A task moves by removing it and inserting a new one.
STRUCTURAL_ATTRIBUTES = frozenset({"kind", "thread", "stream", "rank", "start", "end", "queued"})
# Microseconds a launch call costs where the trace has none to measure (a typical cudaLaunchKernel).
DEFAULT_LAUNCH_CALL_US = 5.0
_LAUNCH_CALLS = {
    "gpu": "cudaLaunchKernel",
    "comm": "cudaLaunchKernel",
    "memcpy": "cudaMemcpyAsync",
    "memset": "cudaMemsetAsync",
}


def add_task(
    graph: nx.DiGraph,
    name: str,
    kind: str,
    thread: str,
    duration: float,
    gap: float = 0.0,
    release: float | None = None,
    **attrs: Any,
) -> int:
    """Add a task and return its node id (a new integer id, above every one in use)."""
    if kind not in CPU_KINDS | GPU_KINDS:
        raise DaydreamError(f"unknown task kind {kind!r}: use one of {sorted(CPU_KINDS | GPU_KINDS)}")
    if duration < 0:
        raise DaydreamError(f"task {name!r}: duration must not be negative (got {duration})")
    node = graph.graph.get("next_task_id")
    if not isinstance(node, int) or node in graph:
        node = max((n for n in graph.nodes if isinstance(n, int)), default=-1) + 1
    graph.graph["next_task_id"] = node + 1
    base = {
        "kind": kind,
        "name": name,
        "thread": thread,
        "duration": float(duration),
        "gap": float(gap),
        "release": release,
        "op": None,
        "shapes": None,
        "top_op_id": None,
        "layer": None,
        "phase": None,
        "region": None,
        "step": None,
        "rank": 0,
        "parallel_us": 0.0,
        "param_us": 0.0,
    }
    base.update(attrs)
    graph.add_node(node, **base)
    derived.changed(graph, derived.TASKS)
    return node


def add_dependency(graph: nx.DiGraph, parent: Any, child: Any, kind: str, lag: float = 0.0) -> None:
    """``child`` may start once ``parent`` has finished: after the parent's gap for the order kinds
    (thread, stream), after ``lag`` for the others."""
    if kind not in EDGE_KINDS:
        raise DaydreamError(f"unknown dependency kind {kind!r}: use one of {list(EDGE_KINDS)}")
    for n in (parent, child):
        if n not in graph:
            raise DaydreamError(f"no task {n!r} in the graph")
    # the cached topological order does not know this edge; a launch between tasks already there: nor the launch calls
    derived.changed(graph, derived.EDGES, *([derived.LAUNCH_EDGES] if kind == "launch" else []))
    graph.add_edge(parent, child, **({"kind": kind} if kind in ORDER_KINDS else {"kind": kind, "lag": float(lag)}))


# a task's name in a message is cut to this many characters (kernel names run to hundreds)
LABEL_NAME_CHARS = 80


def task_label(graph: nx.DiGraph, node: Any) -> str:
    """A task as a user knows it, for messages: its kind, name, thread and traced start (the trace's own ``ts``,
    in microseconds), e.g. ``gpu 'volta_sgemm_128x64_nn' on gpu:0/7 at ts 1045.0 us``; never the graph's internal
    task number. A task inserted by a script is at its anchor's start."""
    a = attrs_of(graph).get(node)
    if a is None:
        return f"task {node!r}"
    name = str(a.get("name", ""))
    if len(name) > LABEL_NAME_CHARS:
        name = name[: LABEL_NAME_CHARS - 3] + "..."
    text = f"{a.get('kind')} {name!r} on {a.get('thread')}"
    start, origin = a.get("start"), graph.graph.get("origin_us", 0.0)
    if isinstance(start, (int, float)) and isinstance(origin, (int, float)):
        text += f" at ts {start + origin:.1f} us"
    return text


def scale(graph: nx.DiGraph, selection: Iterable[Any], factor: float) -> float:
    """Multiply the duration of every selected task by ``factor``; returns the change in total duration (us)."""
    if not factor >= 0:
        raise DaydreamError(f"a scale factor must be a number >= 0 (got {factor})")
    nodes = attrs_of(graph)
    delta = 0.0
    host = False
    for n in selection:
        a = nodes[n]
        d = a["duration"]
        a["duration"] = d * factor
        delta += d * factor - d
        host = host or a["kind"] not in GPU_KINDS
    _durations_changed(graph, host)
    return delta


def scale_each(graph: nx.DiGraph, selection: Iterable[Any], factor_of: Callable[[Task], float]) -> float:
    """Multiply the duration of every selected task by ``factor_of(its attributes)``, which checks the factor (it may
    raise: the tasks before keep their new durations); returns the change in total duration (us)."""
    nodes = attrs_of(graph)
    delta = 0.0
    host = False
    try:
        for n in selection:
            a = nodes[n]
            f = factor_of(a)
            d = a["duration"]
            a["duration"] = d * f
            delta += d * f - d
            host = host or a["kind"] not in GPU_KINDS
    finally:
        _durations_changed(graph, host)
    return delta


def _durations_changed(graph: nx.DiGraph, host: bool) -> None:
    """Durations changed, of a host task (not on a GPU) among them where ``host``."""
    derived.changed(
        graph, derived.DURATIONS, derived.attribute("duration"), *([derived.HOST_DURATIONS] if host else [])
    )


def set_attribute(graph: nx.DiGraph, selection: Iterable[Any], attribute: str, value: Any) -> None:
    """Set ``attribute`` of every selected task to ``value`` (durations and gaps: microseconds, >= 0)."""
    check_settable(attribute, value)
    nodes = attrs_of(graph)
    host = False
    for n in selection:
        a = nodes[n]
        a[attribute] = value
        host = host or a["kind"] not in GPU_KINDS
    _attribute_changed(graph, attribute, host)


def set_each(graph: nx.DiGraph, selection: Iterable[Any], attribute: str, value_of: Callable[[Task], Any]) -> None:
    """Set ``attribute`` of every selected task to ``value_of(its attributes)``, checked as ``set_attribute`` checks
    a value (an error leaves the tasks before with their new value)."""
    nodes = attrs_of(graph)
    host = False
    try:
        for n in selection:
            a = nodes[n]
            value = value_of(a)
            check_settable(attribute, value)
            a[attribute] = value
            host = host or a["kind"] not in GPU_KINDS
    finally:
        _attribute_changed(graph, attribute, host)


def _attribute_changed(graph: nx.DiGraph, attribute: str, host: bool) -> None:
    """``attribute`` of some tasks changed, of a host task among them where ``host``."""
    if attribute == "duration":
        _durations_changed(graph, host)
    else:
        derived.changed(graph, derived.ATTRIBUTES, derived.attribute(attribute))


def check_settable(attribute: str, value: Any) -> None:
    if attribute in STRUCTURAL_ATTRIBUTES:
        raise DaydreamError(
            f"cannot set {attribute!r}: it places the task in its thread's order; remove the task and insert a new one"
            " instead"
        )
    if attribute in ("duration", "gap") and (
        isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0
    ):
        raise DaydreamError(f"{attribute} must be a number of microseconds >= 0 (got {_shown(value)})")
    if (
        attribute == "release"
        and value is not None
        and (isinstance(value, bool) or not isinstance(value, (int, float)))
    ):
        raise DaydreamError(f"release must be a time in microseconds or none (got {_shown(value)})")


def _shown(value: Any) -> str:
    """A value as a script writes it."""
    return "none" if value is None else ("true" if value else "false") if isinstance(value, bool) else repr(value)


def _order_pred(graph: nx.DiGraph, node: Any) -> Any:
    for u, e in predecessors_of(graph)[node].items():
        if e.get("kind") in ORDER_KINDS:
            return u
    return None


def _order_succ(graph: nx.DiGraph, node: Any) -> Any:
    for v, e in successors_of(graph)[node].items():
        if e.get("kind") in ORDER_KINDS:
            return v
    return None


def removal_set(graph: nx.DiGraph, selection: Iterable[Any], with_launches: bool = False) -> set[Any]:
    """What ``remove`` takes out: the selection, and with ``with_launches`` the calls that launched its GPU
    tasks (when they launched nothing else) with the ``[wait]`` half of a blocking copy call."""
    out = set(selection)
    if with_launches:
        nodes, pred, succ = attrs_of(graph), predecessors_of(graph), successors_of(graph)
        for v in list(out):
            for u, e in pred[v].items():
                if e.get("kind") != "launch" or u in out:
                    continue
                launched = [w for w, e2 in succ[u].items() if e2.get("kind") == "launch"]
                if all(w in out for w in launched):
                    out.add(u)
                    nxt = _order_succ(graph, u)
                    if nxt is not None and nodes[nxt]["name"] == nodes[u]["name"] + " [wait]":
                        out.add(nxt)
    return out


def remove(graph: nx.DiGraph, selection: Iterable[Any], with_launches: bool = False) -> Selection:
    """Remove the selected tasks, keeping every ordering they carried.

    A removed task's thread predecessor is joined to its thread successor; what it waited for (a sync, a
    cross-stream wait), its thread successor now waits for; what waited for it now waits for its thread
    predecessor. A kernel's launch edge goes with the kernel. A blocking copy call's ``[wait]`` half removed with
    the copy it waited for takes that wait with it: the copy gone, nothing blocks the thread (passed on, the wait
    would hold the thread's next task behind the work queued before the copy). Returns the removed tasks.
    """
    doomed = removal_set(graph, selection, with_launches)
    for u in doomed:
        if u not in graph:
            raise DaydreamError(f"no task {u!r} in the graph")
    succ = successors_of(graph)
    for u in doomed:
        for v, e in succ[u].items():
            if e.get("kind") == "launch" and v not in doomed:
                raise DaydreamError(
                    f"removing {task_label(graph, u)} would leave {task_label(graph, v)} without its launch; "
                    "remove the kernel too, or remove kernels 'with launches'"
                )
    order = topological_order(graph)
    nodes, pred = attrs_of(graph), predecessors_of(graph)
    for w in doomed:
        if nodes[w]["name"].endswith(" [wait]"):
            for u in [u for u, e in pred[w].items() if u in doomed and e.get("kind") == "sync"]:
                graph.remove_edge(u, w)  # fewer edges: the order computed above still holds
    count = len(graph)
    tasks_removed(graph, doomed)  # their tensors go with them, or move to the task before them (graph.memory)
    for x in in_time_order(graph, doomed):
        _remove_one(graph, x)
    derived.changed(graph, derived.TASKS, derived.EDGES)
    _members_removed(graph, count)
    if order is not None:
        edited(graph, order, doomed)  # the edges a removal joins follow paths that existed: the order still holds
    return Selection(doomed)


def _remove_one(graph: nx.DiGraph, x: Any) -> None:
    pred, succ = predecessors_of(graph)[x], successors_of(graph)[x]
    p = _order_pred(graph, x)
    n = _order_succ(graph, x)
    ins = [(a, e) for a, e in pred.items() if a != p and e.get("kind") != "launch"]
    outs = [(b, e) for b, e in succ.items() if b != n]
    order_edge = succ[n] if n is not None else (pred[p] if p is not None else None)
    graph.remove_node(x)
    if p is not None and n is not None:
        _join(graph, p, n, dict(order_edge))  # type: ignore[arg-type]
    for a, e in ins:
        for b in [n] if n is not None else [b for b, _ in outs]:
            _join(graph, a, b, dict(e))
    for b, e in outs:
        for a in [p] if p is not None else [a for a, _ in ins]:
            _join(graph, a, b, dict(e))


def _join(graph: nx.DiGraph, u: Any, v: Any, edge: dict[str, Any]) -> None:
    """Add u -> v unless it is there already (then the longer delay stands)."""
    if u == v:
        return
    old = successors_of(graph)[u].get(v)
    if old is None:
        graph.add_edge(u, v, **edge)
    elif old.get("kind") not in ORDER_KINDS and edge.get("lag", 0.0) > old.get("lag", 0.0):
        old["lag"] = edge["lag"]


_LAUNCH_CALL_US = "launch_call_us"
_LAUNCH_CALLS_INDEX = "launch_calls"


class _LaunchCalls:
    """The calls that launched tasks, one entry per launch dependency, by the launched task's kind; grown as tasks
    are inserted (an insert adds a launch dependency only into a task it adds), made again after a removal or a
    launch dependency added between tasks already there."""

    __slots__ = ("by_kind", "count", "gpu_launcher", "last")

    def __init__(self, graph: nx.DiGraph) -> None:
        self.by_kind: dict[str, list[Any]] = {}
        self.gpu_launcher = False  # a launch from a GPU-side task: its duration changes without HOST_DURATIONS
        self.count, self.last = 0, None
        self._add(graph, list(attrs_of(graph)))

    def _add(self, graph: nx.DiGraph, new: list[Any]) -> None:
        nodes, pred = attrs_of(graph), predecessors_of(graph)
        for v in new:
            for u, e in pred[v].items():
                if e.get("kind") == "launch":
                    self.by_kind.setdefault(nodes[v]["kind"], []).append(u)
                    self.gpu_launcher = self.gpu_launcher or nodes[u]["kind"] in GPU_KINDS
        self.count += len(new)
        if new:
            self.last = new[-1]

    def grown(self, graph: nx.DiGraph) -> bool:
        """Bring the entries up to the graph's tasks where tasks were only added since (inserts append to the graph's
        order); False where any was removed."""
        added = derived.added_since(graph, self.count, self.last)
        if added is None:
            return False
        if added:
            self._add(graph, added)
        return True


def typical_launch_call_us(graph: nx.DiGraph, kind: str) -> float:
    """Median duration of the calls that launched ``kind`` tasks in the graph: what a launch call costs on this CPU.

    Kept until task durations change (``scale``, ``set duration``): a faster CPU makes faster calls. Tasks inserted
    or removed leave it as it was: an inserted call costs the median itself. After a duration change it is the
    median again only where it can differ: a host task's duration changed, or calls that do not cost the median
    were added, or tasks removed (a script scaling kernels between inserts would otherwise pass over the graph at
    every insert: ``dgc`` on a 326k-task graph)."""
    costs = derived.cached(graph, _LAUNCH_CALL_US, ())
    if costs is None:
        costs = derived.keep(graph, _LAUNCH_CALL_US, {}, ())
    counters = derived.indexes(graph).counters
    now = (counters.get(derived.DURATIONS, 0), counters.get(derived.HOST_DURATIONS, 0))
    kept = costs.get(kind)
    if kept is not None and kept[1] == now[0]:
        return float(kept[0])
    # the calls, brought up to date only here: between duration changes, removals and inserts cost nothing
    calls = derived.cached(graph, _LAUNCH_CALLS_INDEX, (derived.LAUNCH_EDGES,))
    if calls is None or not calls.grown(graph):
        calls = derived.keep(graph, _LAUNCH_CALLS_INDEX, _LaunchCalls(graph), (derived.LAUNCH_EDGES,))
    entries = calls.by_kind.get(kind, [])
    if kept is not None:
        value, _, host_at, calls_at, counted = kept
        nodes = attrs_of(graph)
        if (
            host_at == now[1]
            and calls_at is calls
            and not calls.gpu_launcher
            and all(nodes[u]["duration"] == value for u in entries[counted:])
        ):
            # the same calls at the same durations, and calls at the median: the median of them all is the same
            costs[kind] = (value, now[0], now[1], calls, len(entries))
            return float(value)
    nodes = attrs_of(graph)
    durations = [nodes[u]["duration"] for u in entries]
    value = statistics.median(durations) if durations else DEFAULT_LAUNCH_CALL_US
    costs[kind] = (value, now[0], now[1], calls, len(entries))
    return float(value)


@dataclass
class _Undo:
    """What an insert changed besides adding its tasks, put back if the insert is refused: the order edges it split
    (parent, child, edge attributes) and the gaps it moved (task, old gap)."""

    split: list[tuple[Any, Any, dict[str, Any]]] = field(default_factory=list)
    gaps: list[tuple[Any, float]] = field(default_factory=list)

    def roll_back(self, graph: nx.DiGraph, new_nodes: list[Any]) -> None:
        count = len(graph)
        graph.remove_nodes_from(new_nodes)
        _members_removed(graph, count)
        for u, v, e in self.split:
            graph.add_edge(u, v, **e)
        nodes = attrs_of(graph)
        for u, gap in self.gaps:
            nodes[u]["gap"] = gap
        derived.changed(graph, derived.TASKS, derived.EDGES)


class Placement(msgspec.Struct, frozen=True):
    """Where :func:`insert_task` puts a task: next to the task ``after`` or ``before`` (exactly one), on ``thread``
    (None: the default below), ``queued`` (no fixed place in its thread's order)."""

    after: Any = None
    before: Any = None
    thread: str | None = None
    queued: bool = False


def insert_task(
    graph: nx.DiGraph,
    kind: str,
    name: str,
    duration: float,
    at: Placement,
    *,
    launch_us: float | None = None,
    launched: bool = True,
    work: Work | None = None,
    **attrs: Any,
) -> list[Any]:
    """Insert a task where ``at`` says (:class:`Placement`: next to the task ``at.after`` or ``at.before``) and return
    the new task ids.

    The task runs on ``at.thread`` (default: the anchor's thread if it is on the same side, CPU or GPU;
    a GPU task anchored on a CPU call goes to the stream that call's thread launched to last; a CPU task
    anchored on a GPU task goes to the thread that launched it). On the anchor's thread it goes right
    next to the anchor; elsewhere it takes its place in time order and depends on (or holds back) the
    anchor. A GPU-side task also gets its launch call, ``launch_us`` long (default: the graph's median
    for that kind of call), next to the anchor's launch on the CPU, as in figure 4 of the Daydream paper.
    The last id returned is the task itself; before it, its launch call. Step, phase, layer and rank come
    from the anchor unless given.

    ``launched=False``: a GPU-side task without a launch call (work issued outside the traced threads: a NIC, a
    server process). ``at.queued``: the task joins its thread without a fixed place in its order (attribute
    ``queued``): it depends on the anchor (or the anchor on it, ``before``) and runs when its thread is free and
    the schedule policy picks it among the tasks waiting there (earliest ready first, or by priority). ``work``
    counts the tasks the order's repair went over (a script's budget charges them).
    """
    after, before, thread, queued = at.after, at.before, at.thread, at.queued
    anchor, side = _anchor_and_side(graph, after, before)
    _check_new_task(kind, name, duration, attrs)
    a = attrs_of(graph)[anchor]
    on_gpu = kind in GPU_KINDS
    order = topological_order(graph)  # as it is before the edit; the cycle check brings it up to date
    thread = _thread_for(graph, anchor, kind, thread)
    key = _start(a) + a["duration"] if side == "after" else _start(a)  # the new task's place in time
    gap = _new_task_gap(graph, on_gpu, attrs)  # takes a given gap out of attrs
    inherit = {k: a.get(k) for k in ("step", "phase", "region", "layer", "rank")}
    inherit.update(attrs)
    undo = _Undo()
    new_nodes: list[Any] = []
    launcher = None
    if on_gpu and launched:
        launcher = _insert_launch_call(graph, kind, anchor, side, key, launch_us, inherit, undo)
        new_nodes.append(launcher)
    if queued:
        inherit["queued"] = True  # the task's, not its launch call's
    task = add_task(graph, name, kind, thread, float(duration), gap=gap, start=key, **inherit)
    if on_gpu:
        attrs_of(graph)[task].setdefault("stream", _stream_of(thread))
    new_nodes.append(task)
    if not queued:
        _place(graph, task, thread, anchor, side, key, undo)
    if launcher is not None:
        graph.add_edge(launcher, task, kind="launch", lag=float(delays_of(graph).launch_latency_us))
    _wait_for_anchor(graph, anchor, task, side, queued, launcher is not None)
    derived.changed(graph, derived.EDGES)
    cycle = _rolled_back_cycle(graph, order, new_nodes, undo, work)
    if cycle is not None:
        raise DaydreamError(
            f"inserting {name!r} {side} {task_label(graph, anchor)} would close a dependency cycle: {cycle} ..."
        )
    return new_nodes


def _anchor_and_side(graph: nx.DiGraph, after: Any, before: Any) -> tuple[Any, str]:
    if (after is None) == (before is None):
        raise DaydreamError("insert needs exactly one anchor: after=TASK or before=TASK")
    anchor = after if after is not None else before
    if anchor not in graph:
        raise DaydreamError(f"no task {anchor!r} in the graph")
    return anchor, "after" if after is not None else "before"


def _check_new_task(kind: str, name: str, duration: float, attrs: dict[str, Any]) -> None:
    if kind not in CPU_KINDS | GPU_KINDS:
        raise DaydreamError(f"unknown task kind {kind!r}: use one of {sorted(CPU_KINDS | GPU_KINDS)}")
    if not duration >= 0:
        raise DaydreamError(f"task {name!r}: duration must be a number of microseconds >= 0 (got {duration})")
    for key in attrs:
        if key in STRUCTURAL_ATTRIBUTES | {"name", "duration"}:
            raise DaydreamError(f"insert sets {key!r} itself; it cannot be given as an attribute")


def _thread_for(graph: nx.DiGraph, anchor: Any, kind: str, thread: str | None) -> str:
    """The thread given, else the default for a ``kind`` task next to ``anchor``; it must be on the task's side."""
    on_gpu = kind in GPU_KINDS
    if thread is None:
        thread = _default_thread(graph, anchor, on_gpu)
    if thread.startswith("gpu:") != on_gpu:
        side = "a GPU stream (gpu:DEVICE/STREAM)" if on_gpu else "a CPU thread (cpu:PID/TID)"
        raise DaydreamError(f"a {kind} task runs on {side}, not on {thread!r}")
    return thread


def _new_task_gap(graph: nx.DiGraph, on_gpu: bool, attrs: dict[str, Any]) -> float:
    """The new task's gap: the one given (a network queue has no kernel-to-kernel gap), else the stream's typical
    gap for a GPU task, none for a CPU task (``_place`` gives it its share of the gap it splits)."""
    gap = float(delays_of(graph).stream_gap_us) if on_gpu else 0.0
    if "gap" in attrs:
        check_settable("gap", attrs["gap"])
        gap = float(attrs.pop("gap"))
    return gap


def _insert_launch_call(
    graph: nx.DiGraph,
    kind: str,
    anchor: Any,
    side: str,
    key: float,
    launch_us: float | None,
    inherit: dict[str, Any],
    undo: _Undo,
) -> Any:
    """Add the launch call of a GPU-side task inserted next to ``anchor``, in its CPU thread's order; returns it."""
    call_anchor, call_side = _launch_anchor(graph, anchor, side)
    nodes = attrs_of(graph)
    call_thread = nodes[call_anchor]["thread"]
    call_us = typical_launch_call_us(graph, kind) if launch_us is None else float(launch_us)
    if not call_us >= 0:
        raise DaydreamError(f"a launch call takes >= 0 us (got {launch_us})")
    launcher = add_task(graph, _LAUNCH_CALLS[kind], "cpu", call_thread, call_us, start=key, **inherit)
    c = nodes[call_anchor]
    call_key = _start(c) + c["duration"] if call_side == "after" else _start(c)
    _place(graph, launcher, call_thread, call_anchor, call_side, call_key, undo)
    return launcher


def _wait_for_anchor(graph: nx.DiGraph, anchor: Any, task: Any, side: str, queued: bool, has_launch_call: bool) -> None:
    """Across threads "after" is a wait: a stream waits for another stream's kernel, a CPU call for a kernel (a
    sync). A GPU task next to a CPU call needs no wait: its launch call orders it. A queued task has no place next to
    its anchor, so it waits for it (or holds it back) on any thread."""
    nodes = attrs_of(graph)
    a, t = nodes[anchor], nodes[task]
    launched_by_anchor = t["kind"] in GPU_KINDS and has_launch_call and a["kind"] in CPU_KINDS
    if queued or a.get("queued") or (a["thread"] != t["thread"] and not launched_by_anchor):
        if side == "after":
            graph.add_edge(anchor, task, kind="sync", lag=0.0)
        else:
            graph.add_edge(task, anchor, kind="sync", lag=0.0)


def _rolled_back_cycle(
    graph: nx.DiGraph, order: dict[Any, float] | None, new_nodes: list[Any], undo: _Undo, work: Work | None = None
) -> str | None:
    """If the inserted tasks and their edges close a dependency cycle: the start of the cycle, after rolling the
    insert back; else None (and the cached topological order is up to date)."""
    pred, succ = predecessors_of(graph), successors_of(graph)
    new_edges = [e for n in new_nodes for e in (*((u, n) for u in pred[n]), *((n, v) for v in succ[n]))]
    if not _closes_cycle(graph, order, new_nodes, new_edges, work):
        return None
    cycle = nx.find_cycle(graph, new_nodes)
    path = " -> ".join(task_label(graph, u) for u, _ in cycle[:4])
    undo.roll_back(graph, new_nodes)
    return path


def _closes_cycle(
    graph: nx.DiGraph,
    order: dict[Any, float] | None,
    new_nodes: list[Any],
    new_edges: list[tuple[Any, Any]],
    work: Work | None = None,
) -> bool:
    """Whether the new tasks and edges close a cycle; if not, the cached topological order is brought up to date."""
    if order is None:  # the graph had a cycle before (built by hand): search from the new tasks
        try:
            nx.find_cycle(graph, [v for _, v in new_edges] + new_nodes)
        except nx.NetworkXNoCycle:
            return False
        return True
    place_new(graph, order, new_nodes)
    if find_back_edge_cycle(graph, order, new_edges, work):
        forget(graph)
        return True
    edited(graph, order)
    return False


def add_waits(graph: nx.DiGraph, waiters: Iterable[Any], sources: Iterable[Any], work: Work | None = None) -> int:
    """Make each task of ``waiters`` wait for every task of ``sources`` (``sync`` edges, no delay): a stream
    waiting on another stream's event, a CPU call on a kernel. Returns how many edges are new; an edge that would
    close a cycle (or make a task wait for itself) is refused and nothing is added."""
    waiters, sources = list(waiters), list(sources)
    for u in (*waiters, *sources):
        if u not in graph:
            raise DaydreamError(f"no task {u!r} in the graph")
    succ = successors_of(graph)
    added = [(u, v) for v in waiters for u in sources if v not in succ[u]]
    for u, v in added:
        if u == v:
            raise DaydreamError(f"{task_label(graph, v)} cannot wait for itself")
    order = topological_order(graph)
    graph.add_edges_from(added, kind="sync", lag=0.0)
    if added:
        derived.changed(graph, derived.EDGES)
    if added and _closes_cycle(graph, order, [], added, work):
        cycle = nx.find_cycle(graph, [v for _, v in added])
        path = " -> ".join(task_label(graph, a) for a, _ in cycle[:4])
        graph.remove_edges_from(added)
        raise DaydreamError(f"that wait would close a dependency cycle: {path} ...")
    return len(added)


def _stream_of(thread: str) -> Any:
    s = thread.rsplit("/", 1)[-1]
    return int(s) if s.lstrip("-").isdigit() else s


def _default_thread(graph: nx.DiGraph, anchor: Any, on_gpu: bool) -> str:
    nodes, pred, succ = attrs_of(graph), predecessors_of(graph), successors_of(graph)
    a = nodes[anchor]
    if a["thread"].startswith("gpu:") == on_gpu:
        return a["thread"]
    if on_gpu:
        launched = [v for v, e in succ[anchor].items() if e.get("kind") == "launch"]
        if launched:
            return nodes[launched[0]]["thread"]
        best = None
        for u, b in nodes.items():
            if b["thread"] == a["thread"] and _start(b) <= _start(a):
                for v, e in succ[u].items():
                    if e.get("kind") == "launch" and (best is None or _start(b) > best[0]):
                        best = (_start(b), nodes[v]["thread"])
        if best is None:
            raise DaydreamError(
                f"{task_label(graph, anchor)} launched no GPU work before it: say which stream with 'on'"
            )
        return best[1]
    for u, e in pred[anchor].items():
        if e.get("kind") == "launch":
            return nodes[u]["thread"]
    raise DaydreamError(f"{task_label(graph, anchor)} has no launching CPU call: say which CPU thread with 'on'")


def _launch_anchor(graph: nx.DiGraph, anchor: Any, side: str) -> tuple[Any, str]:
    """Where the launch call of a GPU task inserted next to ``anchor`` goes: next to the anchor's own launch
    (or the anchor itself, if it is a CPU call); a GPU anchor without a launch: its stream's nearest launch."""
    a = attrs_of(graph)[anchor]
    pred = predecessors_of(graph)
    if a["kind"] in CPU_KINDS:
        return anchor, side
    for u, e in pred[anchor].items():
        if e.get("kind") == "launch":
            return u, side
    step = _order_pred if side == "after" else _order_succ
    other = step(graph, anchor)
    while other is not None:
        for u, e in pred[other].items():
            if e.get("kind") == "launch":
                return u, side  # the nearest launch on the anchor's side: after an earlier one, before a later one
        other = step(graph, other)
    raise DaydreamError(
        f"no CPU call launches work on {a['thread']} near {task_label(graph, anchor)}: insert the task with a CPU"
        " anchor"
    )


def _place(graph: nx.DiGraph, node: Any, thread: str, anchor: Any, side: str, key: float, undo: _Undo) -> None:
    """Put ``node`` into ``thread``'s order: next to ``anchor`` if it is on that thread, else at time ``key``.
    ``undo`` gets the edge it split and (task, old gap) for a gap it changed.

    On a CPU thread the gap after the predecessor (framework time before the next call) is split at ``key``: the
    part up to ``key`` stays before the new task, the rest follows it. So a task inserted after a call runs as
    soon as the call returns, and one inserted before a call runs right before it."""
    nodes = attrs_of(graph)
    members = _thread_members(graph, node)  # keeps the per-thread index up to date with the new task
    if nodes[anchor]["thread"] == thread and not nodes[anchor].get("queued"):
        prev = anchor if side == "after" else _order_pred(graph, anchor)
        nxt = _order_succ(graph, anchor) if side == "after" else anchor
    else:
        prev = _latest_before(graph, thread, members, node, key)
        if prev is not None:
            nxt = _order_succ(graph, prev)
        else:
            heads = [
                u
                for u in members
                if u != node and u in nodes and _order_pred(graph, u) is None and not nodes[u].get("queued")
            ]
            nxt = heads[0] if heads else None
    order = "stream" if thread.startswith("gpu:") else "thread"
    if prev is not None and nxt is not None:
        undo.split.append((prev, nxt, successors_of(graph)[prev][nxt]))
        graph.remove_edge(prev, nxt)
    if prev is not None:
        p = nodes[prev]
        if order == "thread" and p.get("gap"):
            keep = min(p["gap"], max(0.0, key - (_start(p) + p["duration"])))
            undo.gaps.append((prev, p["gap"]))
            nodes[node]["gap"] = nodes[node].get("gap", 0.0) + p["gap"] - keep
            p["gap"] = keep
    if prev is not None:
        graph.add_edge(prev, node, kind=order)
    if nxt is not None:
        graph.add_edge(node, nxt, kind=order)


def _latest_before(graph: nx.DiGraph, thread: str, members: list[Any], node: Any, key: float) -> Any:
    """The task of ``thread`` (in the graph, not queued, not ``node``) latest by (start, id) at or before (``key``,
    ``node``'s id); None if there is none. From the thread's members ordered by start (kept beside the per-thread
    index) with a bisection, where every start is a real number; else from every member."""
    nodes = attrs_of(graph)
    mark = (key, _tiebreak(node))
    ordered = _members_by_start(graph, thread, members) if is_real_number(key) else None
    if ordered is None:
        live = [u for u in members if u != node and u in nodes and not nodes[u].get("queued")]
        earlier = [x for x in ((_start(nodes[u]), _tiebreak(u), u) for u in live) if (x[0], x[1]) <= mark]
        return max(earlier)[2] if earlier else None
    keys, tasks = ordered
    i = bisect.bisect_right(keys, mark)
    found: Any = None
    while i > 0:
        i -= 1
        u = tasks[i]
        if u == node or u not in nodes or nodes[u].get("queued"):
            continue
        if found is not None and keys[i] != keys[found]:
            break
        if found is None or u > tasks[found]:  # the same (start, id) twice: ids that are not numbers, the larger
            found = i
    return None if found is None else tasks[found]


_THREAD_MEMBERS = "thread_members"


def _thread_members(graph: nx.DiGraph, new: Any) -> list[Any]:
    """The tasks on the thread of ``new``, a task just added (kept among the graph's derived indexes as [task count,
    thread -> tasks, thread -> the tasks ordered by start], brought up to date by inserts one task at a time; rebuilt
    when tasks were added or removed some other way, which the task count tells). May hold tasks removed since:
    callers check membership."""
    nodes = attrs_of(graph)
    kept = derived.cached(graph, _THREAD_MEMBERS, ())
    thread = nodes[new]["thread"]
    if kept is not None and kept[0] + 1 == len(nodes):
        kept[1].setdefault(thread, []).append(new)  # the one task added since
        kept[0] += 1
        ordered = kept[2].get(thread)
        if ordered is not None:
            start = _start(nodes[new])
            if is_real_number(start):
                mark = (start, _tiebreak(new))
                i = bisect.bisect_right(ordered[0], mark)
                ordered[0].insert(i, mark)
                ordered[1].insert(i, new)
            else:
                del kept[2][thread]
    elif kept is None or kept[0] != len(nodes):
        by_thread: dict[str, list[Any]] = {}
        for u, a in nodes.items():
            by_thread.setdefault(a["thread"], []).append(u)
        kept = derived.keep(graph, _THREAD_MEMBERS, [len(nodes), by_thread, {}], ())
    return kept[1].setdefault(thread, [])


def _members_by_start(
    graph: nx.DiGraph, thread: str, members: list[Any]
) -> tuple[list[tuple[float, int]], list[Any]] | None:
    """``thread``'s members (from :func:`_thread_members`, just called) as (start, id) keys in order and the tasks in
    that order, made on first use and kept beside them; None where a start is not a real number."""
    kept = derived.cached(graph, _THREAD_MEMBERS, ())
    if kept is None:
        return None
    ordered = kept[2].get(thread)
    if ordered is None:
        nodes = attrs_of(graph)
        present = [u for u in members if u in nodes]
        starts = [_start(nodes[u]) for u in present]
        if not all(map(is_real_number, starts)):
            return None
        pairs = sorted(zip(zip(starts, map(_tiebreak, present)), present), key=lambda p: p[0])
        ordered = kept[2][thread] = ([k for k, _ in pairs], [u for _, u in pairs])
    return ordered


def _members_removed(graph: nx.DiGraph, count: int) -> None:
    """Tasks were removed from a graph of ``count`` tasks: the per-thread index, if it was up to date, stays so (it
    may hold removed tasks; ids are never reused, ``add_task``). Without this every insert after a removal would
    rebuild it, a pass over the graph per insert (``fused_optimizer``'s 75 on a 326k-task graph: 0.06 s each)."""
    kept = derived.cached(graph, _THREAD_MEMBERS, ())
    if kept is not None and kept[0] == count:
        kept[0] = len(graph)


def _start(attrs: dict[str, Any]) -> float:
    """Traced start; a hand-built task without one counts as at 0."""
    s = attrs.get("start")
    return 0.0 if s is None else float(s)


def _tiebreak(node: Any) -> int:
    return node if isinstance(node, int) else 0


def check_threads(graph: nx.DiGraph, threads: Iterable[str] | None = None) -> None:
    """Every thread's tasks form one chain of order edges (each task one thread predecessor at most), but for
    queued tasks, which have no order edges."""
    wanted = None if threads is None else set(threads)
    heads: dict[str, int] = {}
    for node, a in attrs_of(graph).items():
        t = a["thread"]
        if wanted is not None and t not in wanted:
            continue
        if _check_links(graph, node) == 0 and not a.get("queued"):
            heads[t] = heads.get(t, 0) + 1
    for t, count in heads.items():
        if count > 1:
            raise DaydreamError(f"thread {t} is split into {count} chains")


def check_links(graph: nx.DiGraph, nodes: Iterable[Any]) -> None:
    """The tasks ``nodes`` and their thread neighbours each have one thread neighbour per side at most, on their own
    thread: what an edit must keep, checked where it edited (``check_threads`` checks whole threads)."""
    pred, succ = predecessors_of(graph), successors_of(graph)
    seen: set[Any] = set()
    for node in nodes:
        for x in (node, *pred[node], *succ[node]):
            if x not in seen:
                seen.add(x)
                _check_links(graph, x)


def _check_links(graph: nx.DiGraph, node: Any) -> int:
    """Raise unless ``node`` has at most one order neighbour per side, on its thread; returns its order parents."""
    nodes = attrs_of(graph)
    t = nodes[node]["thread"]
    order_in = [u for u, e in predecessors_of(graph)[node].items() if e.get("kind") in ORDER_KINDS]
    order_out = [v for v, e in successors_of(graph)[node].items() if e.get("kind") in ORDER_KINDS]
    if len(order_in) > 1 or len(order_out) > 1:
        raise DaydreamError(f"{task_label(graph, node)} has more than one thread neighbour on a side")
    if (order_in or order_out) and nodes[node].get("queued"):
        raise DaydreamError(f"{task_label(graph, node)} is queued but has a place in its thread's order")
    for u in order_in:
        if nodes[u]["thread"] != t:
            raise DaydreamError(
                f"an order edge joins {task_label(graph, u)} to {task_label(graph, node)} on another thread"
            )
    return len(order_in)
