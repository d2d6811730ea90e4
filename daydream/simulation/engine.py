"""The frontier scheduler: Algorithm 1 of the Daydream paper, over a task graph.

Each task starts when its thread is free (the previous task's end plus its gap) and every parent
has finished (plus the edge's delay), and never before its release time. Children enter the
frontier when their last parent finishes; the policy picks the next task from the frontier.

Collectives of a multi-rank job's graph (``graph.graph["ranks"]``: tasks sharing a ``collective_id``, one per
rank of its process group, :mod:`daydream.graph.job`) start together: each member *arrives* when it could start
on its own and then holds its stream (an NCCL kernel spins until its peers arrive); once the last member arrives
all start, and all end after the longest member's duration (a collective ends at the same time on every rank).
Threads are told apart by rank, so the ranks of a job share one graph without sharing streams.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from itertools import chain, count, repeat
from operator import itemgetter
from typing import Any

import networkx as nx
import numpy as np

from daydream import progress
from daydream._gc import paused_gc
from daydream.errors import DaydreamError
from daydream.files import clip
from daydream.graph import derived
from daydream.graph.adjacency import (
    EdgeArrays,
    TaskColumns,
    attrs_of,
    edge_arrays,
    successors_of,
    task_columns,
    task_ids,
)
from daydream.graph.edit import task_label
from daydream.graph.job import format_ranks
from daydream.graph.schema import ORDER_KINDS
from daydream.simulation.policies import EARLIEST, Policy
from daydream.simulation.timeline import Timeline


def simulate(graph: nx.DiGraph, policy: Policy = EARLIEST, reuse: bool = False) -> Timeline:
    """Predict when every task of ``graph`` runs: each thread and stream runs its tasks one at a time, a task once
    every task it depends on has finished (and its lag has passed).

    Parameters
    ----------
    graph : networkx.DiGraph
        A task graph (:func:`~daydream.graph.build_graph`, or one made with :func:`~daydream.graph.add_task`): every
        task has a ``duration`` (microseconds) and a ``thread``.
    policy : Policy, optional
        Which ready task a thread runs first (:func:`~daydream.simulation.parse_policy`): ``earliest`` (default: the
        one ready first), ``fifo`` (the trace's order), ``priority:ATTR`` (the lowest value of a task attribute).
    reuse : bool, optional
        Keep the graph as the simulation reads it among the graph's derived indexes, and next time read only the
        durations again (Notes). Default False: every call reads the graph afresh.

    Returns
    -------
    Timeline
        Each task's start and end; ``step_us()`` the step's period, and what :func:`~daydream.simulation.breakdown`
        and :func:`~daydream.simulation.critical_path` read.

    Raises
    ------
    DaydreamError
        A task without its ``duration`` or ``thread``, or a time that is not a number (named).

    Notes
    -----
    With ``reuse`` the tasks, threads, release times and dependencies, as arrays, stay among the graph's derived
    indexes (:mod:`daydream.graph.derived`) as long as no task, dependency or other task attribute changed through
    :mod:`daydream.graph.edit`: a what-if session, whose changes all go through it, predicts again without reading
    the whole graph (on a 300k-task graph reading it is three quarters of a prediction). Changes made behind the edit
    functions' back (a task's thread set in its dict) go unnoticed.

    Examples
    --------
    >>> from daydream import build_graph, bundled_example, load_trace, parse_policy, simulate
    >>> graph = build_graph(load_trace(bundled_example()))
    >>> round(simulate(graph).step_us())
    19163
    >>> round(simulate(graph, parse_policy("fifo")).step_us())
    19163
    """
    with progress.task(
        f"simulating {graph.number_of_nodes():,} tasks"
    ):  # a spinner: the heap loop is too hot to count in
        try:
            return _simulate(graph, policy, reuse)
        except (KeyError, TypeError, ValueError):
            # a graph the Python API was handed or changed by hand: a task without its attributes. The fast reads
            # above assume them; only when one fails is the graph searched for the task to name
            problem = _unsimulatable(graph)
            if problem is None:
                raise
            raise DaydreamError(problem) from None


# what simulate reads of every task, and of every dependency (defaults where absent)
_TASK_NEEDS = {"duration": "its time in microseconds", "thread": "the CPU thread or GPU stream it runs on"}


def _unsimulatable(graph: nx.DiGraph) -> str | None:
    """Why ``graph`` cannot be simulated, naming the first task (or dependency) and attribute at fault: one missing,
    or a time that is not a number; None where nothing is."""
    for node, attrs in graph.nodes(data=True):
        for name, what in _TASK_NEEDS.items():
            if name not in attrs:
                return (
                    f"task {clip(repr(node), 200)} has no {name!r} ({what}): every task of a graph to simulate has "
                    f"{' and '.join(map(repr, _TASK_NEEDS))} (daydream.graph.add_task makes one)"
                )
        for name in ("duration", "gap", "release"):
            value = attrs.get(name)
            if value is not None and not _number(value):
                return f"task {clip(repr(node), 200)}: {name} {clip(repr(value), 100)} is not a number of microseconds"
    for u, v, e in graph.edges(data=True):
        lag = e.get("lag")
        if lag is not None and not _number(lag):
            return (
                f"dependency {clip(repr(u), 100)} -> {clip(repr(v), 100)}: lag {clip(repr(lag), 100)} is not a number"
            )
    return None


def _number(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return not isinstance(value, (str, bytes))


def carry_arrays(source: nx.DiGraph, copy: nx.DiGraph) -> None:
    """Give ``copy``, a copy of ``source`` (:func:`~daydream.graph.adjacency.copy_graph`) changed in nothing since,
    the arrays ``simulate(source, reuse=True)`` kept, so that its first ``simulate(copy, reuse=True)`` reads only
    the durations. Nothing happens where none are kept or the copy's tasks are not those of ``source``."""
    kept = derived.cached(source, _ARRAYS, _ARRAYS_DEPEND_ON)
    if kept is None or len(copy) != len(kept.nodes) or task_ids(copy) != kept.nodes:
        return
    derived.keep(copy, _ARRAYS, kept.of(copy), _ARRAYS_DEPEND_ON)


@paused_gc()
def _simulate(graph: nx.DiGraph, policy: Policy, reuse: bool) -> Timeline:
    if len(graph) >= COMPILED_MIN_TASKS and (compiled := _compiled()) is not None:
        arrays = derived.cached(graph, _ARRAYS, _ARRAYS_DEPEND_ON) if reuse else None
        if arrays is None or (arrays.attrs is None and task_columns(graph) is None):
            # read afresh; or read from the task columns and the task dicts made since: the dicts' now
            arrays = read_arrays(graph) if arrays is None else arrays.of(graph)
            if reuse:
                derived.keep(graph, _ARRAYS, arrays, _ARRAYS_DEPEND_ON)
        timeline = _simulate_compiled(compiled, graph, arrays, policy)
        if timeline is not None:
            return timeline
    task_attrs, succ_of = attrs_of(graph), successors_of(graph)
    nodes = list(task_attrs)
    n = len(nodes)
    index = dict(zip(nodes, range(n)))
    attrs: list[dict[str, Any]] = list(task_attrs.values())
    duration = list(_durations(attrs))
    gap, thread, thread_ids, multi_rank, ready = _task_columns(graph, attrs)
    prio = policy.priorities(map(dict.get, attrs, repeat(policy.attribute)))
    gangs = _gangs(map(dict.get, attrs, repeat("collective_id"))) if graph.graph.get("ranks") else []
    succ: list[list[tuple[int, bool, float]]] = []
    indegree = [0] * n
    for node in nodes:
        out = []
        for child, e in succ_of[node].items():
            c = index[child]
            indegree[c] += 1
            kind = e.get("kind")
            out.append((c, kind in ORDER_KINDS, float(e.get("lag", 0.0))))
        succ.append(out)
    for i in range(n):
        if indegree[i] == 0 and ready[i] == -math.inf:
            ready[i] = 0.0

    start = [0.0] * n
    end = [0.0] * n
    cause = [-1] * n  # the task whose end (or whose thread slot) fixed this task's start
    progress = [-math.inf] * len(thread_ids)
    last_on_thread = [-1] * len(thread_ids)
    done = 0
    fifo = policy.kind == "fifo"
    heap: list[tuple[Any, ...]] = []
    queue: deque[int] = deque()
    seq = 0

    def push(i: int) -> None:
        nonlocal seq
        if fifo:
            queue.append(i)
        elif prio is not None:
            heapq.heappush(heap, (max(ready[i], progress[thread[i]]), prio[i], ready[i], seq, i))
        else:
            heapq.heappush(heap, (ready[i], ready[i], seq, i))
        seq += 1

    gang_of = [-1] * n
    for g, members in enumerate(gangs):
        for m in members:
            gang_of[m] = g
    arrival = [math.nan] * n  # when a collective's member could have started alone
    arrived = [0] * len(gangs)
    holding = [False] * len(thread_ids)  # a member waits on this thread for its peers: nothing else runs there
    parked: list[list[int]] = [[] for _ in thread_ids] if gangs else []

    for i in range(n):
        if indegree[i] == 0:
            push(i)
    while heap or queue:
        if fifo:
            i = queue.popleft()
        elif prio is not None:
            key, _, _, _, i = heapq.heappop(heap)
            s0 = max(ready[i], progress[thread[i]])
            if s0 > key:
                # Its thread got busy since it was queued: it competes again at the time the thread frees, where
                # the priority decides among the tasks waiting for it (a free thread never idles), and among
                # equals the one ready first.
                heapq.heappush(heap, (s0, prio[i], ready[i], seq, i))
                seq += 1
                continue
        else:
            r, _, _, i = heapq.heappop(heap)
            p = progress[thread[i]]
            if p > r and heap and heap[0][:2] < (p, ready[i]):
                # Its thread is busy until p, and another task could start before that (or as early, having been
                # ready sooner: tasks waiting for one thread run in the order they became ready): run that first.
                heapq.heappush(heap, (p, ready[i], seq, i))
                seq += 1
                continue
        t = thread[i]
        s = ready[i]
        if gangs:
            if holding[t]:
                parked[t].append(i)  # its thread is held by a collective waiting for its peers
                continue
            if progress[t] > s:
                s = progress[t]
                cause[i] = last_on_thread[t]
            g = gang_of[i]
            if g >= 0:
                arrival[i] = s
                arrived[g] += 1
                if arrived[g] < len(gangs[g]):
                    holding[t] = True
                    continue
                members = gangs[g]
                last = max(members, key=lambda m: arrival[m])
                s = arrival[last]
                e = s + max(duration[m] for m in members)
                # every member ends now: the one-task path below, per member (it stays inline there, the hot path,
                # where a call per task would cost a tenth of the simulation)
                for m in members:
                    tm = thread[m]
                    if arrival[m] < s:
                        cause[m] = last
                    if m != i:
                        holding[tm] = False
                        for j in parked[tm]:
                            push(j)
                        parked[tm].clear()
                    start[m] = s
                    end[m] = e
                    progress[tm] = e + gap[m]
                    last_on_thread[tm] = m
                    done += 1
                    for c, order, lag in succ[m]:
                        rc = e + (gap[m] if order else lag)
                        if rc > ready[c]:
                            ready[c] = rc
                            cause[c] = m
                        indegree[c] -= 1
                        if indegree[c] == 0:
                            push(c)
                continue
        elif progress[t] > s:
            s = progress[t]
            cause[i] = last_on_thread[t]
        start[i] = s
        e = s + duration[i]
        end[i] = e
        progress[t] = e + gap[i]
        last_on_thread[t] = i
        done += 1
        for c, order, lag in succ[i]:
            rc = e + (gap[i] if order else lag)
            if rc > ready[c]:
                ready[c] = rc
                cause[c] = i
            indegree[c] -= 1
            if indegree[c] == 0:
                push(c)
    if done != n:
        raise _stuck(graph, nodes, attrs, gangs, arrived, arrival, indegree)
    names = [f"rank {r} {t}" for r, t in thread_ids] if multi_rank else list(thread_ids)
    return Timeline(
        graph,
        nodes,
        np.asarray(start),
        np.asarray(end),
        np.asarray(cause),
        names,
        attrs,
        arrival=np.asarray(arrival) if gangs else None,
    )


# graphs of this many tasks are simulated by the compiled loop (daydream.simulation.compiled): importing numba costs
# about 0.5 s, what the Python loop takes for some 100k tasks, and a what-if session simulates a graph many times
COMPILED_MIN_TASKS = 50_000


def _compiled() -> Any:
    """The compiled loop's module, or None where numba does not import (the Python loop then runs everything)."""
    try:
        from daydream.simulation import compiled
    except Exception:  # noqa: BLE001 - numba missing or broken: not an error, only slower
        return None
    return compiled


def _durations(attrs: list[dict[str, Any]]) -> Iterator[float]:
    return map(float, map(itemgetter("duration"), attrs))


def _task_columns(
    graph: nx.DiGraph, attrs: list[dict[str, Any]] | None, tasks: TaskColumns | None = None
) -> tuple[list[float], list[int], dict[Any, int], bool, list[float]]:
    """Each task's gap, thread number and release time (-inf: none), the threads numbered in order of first use
    (a multi-rank job's told apart by rank), and whether they were; from the task dicts ``attrs``, or from a built
    graph's task columns ``tasks``. Read by map() over C-level getters: reading the graph, not the loop, is most of
    a simulation of a large graph."""
    if tasks is not None:
        gap = list(map(float, tasks.values("gap", 0.0)))
        threads: list[Any] = tasks.values("thread")
        ranks = tasks.values("rank")
        release: Iterable[Any] = tasks.values("release")
    else:
        assert attrs is not None
        gap = list(map(float, map(dict.get, attrs, repeat("gap"), repeat(0.0))))
        threads = list(map(itemgetter("thread"), attrs))
        ranks = list(map(dict.get, attrs, repeat("rank"))) if graph.graph.get("ranks") else []
        release = map(dict.get, attrs, repeat("release"))
    # a multi-rank job's graph (daydream.graph.job) holding several ranks: their threads are told apart by rank
    multi_rank = bool(graph.graph.get("ranks")) and len(set(ranks)) > 1
    if multi_rank:
        threads = list(zip(ranks, threads))
    thread_ids: dict[Any, int] = dict(zip(dict.fromkeys(threads), count()))
    thread = list(map(thread_ids.__getitem__, threads))
    ready = [-math.inf if r is None else r for r in release]
    return gap, thread, thread_ids, multi_rank, ready


# the arrays simulate(reuse=True) keeps among a graph's derived indexes, and what they depend on (not the durations:
# they are read again at each simulation)
_ARRAYS = "simulation_arrays"
_ARRAYS_DEPEND_ON = (derived.TASKS, derived.EDGES, derived.ATTRIBUTES)


@dataclass(frozen=True, slots=True)
class GraphArrays:
    """A graph as the compiled loop reads it, but for the durations (and the priorities, read per simulation): the
    tasks (``nodes``, and ``attrs`` their attribute dicts), thread numbers, gaps, release times (those of tasks
    with no parent and none set: 0), dependencies in CSR form (each task's children from ``ptr[i]`` to
    ``ptr[i + 1]`` in ``child``, with ``order`` for thread/stream order edges and their ``lag``), in-degrees and
    collectives (gangs). ``nan``: a gap, lag or release time is NaN (the Python loop alone orders those). The
    loop changes ``ready`` and ``indegree`` in place: a simulation runs on copies of them."""

    nodes: list[Any]
    attrs: list[dict[str, Any]] | None  # None: a built graph's, read from its task columns
    thread: np.ndarray
    thread_ids: dict[Any, int]
    multi_rank: bool
    gap: np.ndarray
    ready: np.ndarray
    ptr: np.ndarray
    child: np.ndarray
    order: np.ndarray
    lag: np.ndarray
    indegree: np.ndarray
    gangs: list[list[int]]
    gang_of: np.ndarray
    gang_ptr: np.ndarray
    gang_members: np.ndarray
    nan: bool

    def of(self, copy: nx.DiGraph) -> GraphArrays:
        """The same arrays for a copy of the graph (the same tasks in the same order): its own attribute dicts (none
        where the copy holds its tasks as columns still)."""
        return replace(self, attrs=None if task_columns(copy) is not None else list(attrs_of(copy).values()))


def read_arrays(graph: nx.DiGraph) -> GraphArrays:
    """The graph as the compiled loop reads it (:class:`GraphArrays`): from its columns where it holds them still."""
    tasks = task_columns(graph)
    attrs: list[dict[str, Any]] | None = None
    if tasks is not None:  # a built graph whose task dicts are not made: its tasks are 0..n-1
        nodes: list[Any] = list(range(len(tasks)))
        gap, thread, thread_ids, multi_rank, ready = _task_columns(graph, None, tasks)
    else:
        nodes = list(attrs_of(graph))
        attrs = list(attrs_of(graph).values())
        gap, thread, thread_ids, multi_rank, ready = _task_columns(graph, attrs)
    n = len(nodes)
    built = edge_arrays(graph)
    ptr, child_a, order_a, lag_a = _children_of(graph, nodes) if built is None else _children_from(built)
    f8 = np.float64
    gap_a, ready_a = np.asarray(gap, f8), np.asarray(ready, f8)
    indegree = np.bincount(child_a, minlength=n).astype(np.int64)
    nan = bool(np.isnan(gap_a).any() or np.isnan(lag_a).any() or np.isnan(ready_a).any())
    ready_a[(indegree == 0) & (ready_a == -math.inf)] = 0.0
    collective_ids = (
        tasks.values("collective_id") if tasks is not None else map(dict.get, attrs, repeat("collective_id"))
    )  # type: ignore[arg-type]
    gangs = _gangs(collective_ids) if graph.graph.get("ranks") else []
    gang_of = np.full(n if gangs else 1, -1, np.int64)  # read only where there are collectives
    for g, members in enumerate(gangs):
        gang_of[members] = g
    gang_ptr = np.zeros(len(gangs) + 1, np.int64)
    gang_ptr[1:] = np.cumsum([len(m) for m in gangs]) if gangs else []
    return GraphArrays(
        nodes,
        attrs,
        np.asarray(thread, np.int64),
        thread_ids,
        multi_rank,
        gap_a,
        ready_a,
        ptr,
        child_a,
        order_a,
        lag_a,
        indegree,
        gangs,
        gang_of,
        gang_ptr,
        np.asarray([m for members in gangs for m in members], np.int64),
        nan,
    )


def _children_of(graph: nx.DiGraph, nodes: list[Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each task's dependents in CSR form (from ``ptr[i]`` to ``ptr[i + 1]`` in ``child``), with whether each edge
    orders a thread or stream and its lag, read from the graph's adjacency dicts."""
    n = len(nodes)
    children = list(map(successors_of(graph).__getitem__, nodes))
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.fromiter(map(len, children), np.int64, n), out=ptr[1:])
    n_edges = int(ptr[-1])
    # read into arrays without a list of each column in between (on a 10M-event trace's graph, 4.2M dependencies,
    # those lists held 0.1 GB)
    child = chain.from_iterable(children)
    if nodes != list(range(n)):  # a built graph numbers its tasks 0..n-1 in order: a child's index is its name
        child = map(dict(zip(nodes, range(n))).__getitem__, child)
    child_a = np.fromiter(child, np.int64, n_edges)
    edges = list(chain.from_iterable(map(dict.values, children)))
    lag_a = np.fromiter(map(dict.get, edges, repeat("lag"), repeat(0.0)), np.float64, n_edges)
    order_a = np.fromiter(map(ORDER_KINDS.__contains__, map(dict.get, edges, repeat("kind"))), np.bool_, n_edges)
    return ptr, child_a, order_a, lag_a


def _children_from(edges: EdgeArrays) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_children_of` from a built graph's edge arrays (its tasks are 0..n-1): each task's dependents in the
    order its ``succ`` dict would hold them, the order of the tasks (a stable sort of the edges by parent)."""
    by_parent = np.argsort(edges.parent, kind="stable")
    ptr = np.zeros(len(edges.ptr), np.int64)
    np.cumsum(np.bincount(edges.parent, minlength=len(ptr) - 1), out=ptr[1:])
    order = edges.of_kind(ORDER_KINDS)
    return ptr, edges.child()[by_parent], order[by_parent], np.where(edges.has_lag, edges.lag, 0.0)[by_parent]


def timing_arrays(graph: nx.DiGraph, arrays: GraphArrays, policy: Policy) -> tuple[np.ndarray, np.ndarray]:
    """What a simulation reads afresh each time: every task's duration and its priority under ``policy`` (one 0.0
    where the policy has none), in the order of ``arrays``."""
    f8 = np.float64
    n = len(arrays.nodes)
    tasks = task_columns(graph)  # the task dicts not made since the arrays were read: the columns are the graph's
    if tasks is not None:
        duration_a = np.fromiter(map(float, tasks.values("duration")), f8, n)
        prio = policy.priorities(tasks.values(policy.attribute) if policy.attribute is not None else ())
    else:
        attrs = arrays.attrs if arrays.attrs is not None else list(map(attrs_of(graph).__getitem__, arrays.nodes))
        duration_a = np.fromiter(_durations(attrs), f8, n)
        prio = policy.priorities(map(dict.get, attrs, repeat(policy.attribute)))
    return duration_a, np.asarray(prio if prio is not None else [0.0], f8)


def _simulate_compiled(compiled: Any, graph: nx.DiGraph, arrays: GraphArrays, policy: Policy) -> Timeline | None:
    """The compiled loop over the graph as flat arrays; None where a NaN would meet a comparison, whose order the
    Python loop alone defines (a tuple holding NaN)."""
    duration_a, prio_a = timing_arrays(graph, arrays, policy)
    if arrays.nan or np.isnan(duration_a).any() or np.isnan(prio_a).any():
        return None
    mode = (
        compiled.PRIORITY
        if policy.kind == "priority"
        else compiled.FIFO
        if policy.kind == "fifo"
        else compiled.EARLIEST
    )
    indegree = arrays.indegree.copy()
    start, end, cause, arrival, arrived, done = compiled._simulate_arrays(
        mode,
        duration_a,
        arrays.gap,
        arrays.thread,
        arrays.ready.copy(),
        prio_a,
        indegree,
        arrays.ptr,
        arrays.child,
        arrays.order,
        arrays.lag,
        arrays.gang_of,
        arrays.gang_ptr,
        arrays.gang_members,
        len(arrays.thread_ids),
    )
    if done != len(arrays.nodes):
        attrs = list(map(attrs_of(graph).__getitem__, arrays.nodes))
        raise _stuck(graph, arrays.nodes, attrs, arrays.gangs, arrived.tolist(), arrival.tolist(), indegree.tolist())
    names = [f"rank {r} {t}" for r, t in arrays.thread_ids] if arrays.multi_rank else list(arrays.thread_ids)
    # the threads as numbered here (in order of first use) are the timeline's numbering of the attribute, but for a
    # multi-rank job's, told apart by rank
    known = {} if arrays.multi_rank else {"thread": (arrays.thread, list(arrays.thread_ids))}
    return Timeline(
        graph,
        arrays.nodes,
        start,
        end,
        cause,
        names,
        arrays.attrs,
        arrival=arrival if arrays.gangs else None,
        _columns=known,
    )


def _stuck(
    graph: nx.DiGraph,
    nodes: list[Any],
    attrs: list[dict[str, Any]],
    gangs: list[list[int]],
    arrived: list[int],
    arrival: list[float],
    indegree: list[int],
) -> DaydreamError:
    """Why some tasks never ran: a collective some ranks never reached, or else a dependency cycle."""
    waiting = [g for g in range(len(gangs)) if 0 < arrived[g] < len(gangs[g])]
    if waiting:
        return DaydreamError(_collective_message(graph, nodes, attrs, gangs[waiting[0]], arrival, len(waiting)))
    return DaydreamError(_cycle_message(graph, [nodes[i] for i, d in enumerate(indegree) if d > 0]))


def _gangs(collective_ids: Iterable[Any]) -> list[list[int]]:
    """The tasks of each collective (those sharing a ``collective_id``: each task's, None where none), in task order;
    one-member ones left out."""
    by_id: dict[Any, list[int]] = {}
    for i, cid in enumerate(collective_ids):
        if cid is not None:
            by_id.setdefault(cid, []).append(i)
    return [members for members in by_id.values() if len(members) > 1]


def _collective_message(
    graph: nx.DiGraph,
    nodes: list[Any],
    attrs: list[dict[str, Any]],
    members: list[int],
    arrival: list[float],
    stuck: int,
) -> str:
    """A collective some ranks reached and others never did: which, where, and who is missing."""
    where = f"{graph.graph['trace']}: " if isinstance(graph.graph.get("trace"), str) else ""
    a = attrs[members[0]]
    came = list({attrs[m].get("rank") for m in members if not math.isnan(arrival[m])})
    missing = list({attrs[m].get("rank") for m in members if math.isnan(arrival[m])})
    missed = next(m for m in members if math.isnan(arrival[m]))
    more = f"; {stuck - 1} more collectives wait likewise" if stuck > 1 else ""
    return (
        f"{where}collective {a['collective_id']} ({a.get('collective') or a['name']}) never starts:"
        f" rank{'s' if len(came) > 1 else ''} {format_ranks(came)} reached it, rank{'s' if len(missing) > 1 else ''}"
        f" {format_ranks(missing)} never did (rank {attrs[missed].get('rank')}'s {task_label(graph, nodes[missed])}"
        " never became ready: it waits on work that waits on a collective the other ranks issue later, or on a"
        f" cycle){more}"
    )


# tasks a dependency-cycle message names at most
CYCLE_TASKS_SHOWN = 5


def _cycle_message(graph: nx.DiGraph, stuck: list[Any]) -> str:
    """What a user needs to find a cycle: the trace, and the tasks of one cycle (at most CYCLE_TASKS_SHOWN) as
    they know them (kind, name, thread, traced start); never the graph's internal task numbers."""
    where = f"{graph.graph['trace']}: " if isinstance(graph.graph.get("trace"), str) else ""
    try:
        cycle = [u for u, _ in nx.find_cycle(graph.subgraph(stuck))]
    except nx.NetworkXNoCycle:  # not expected: every task left waiting waits, at some remove, on a cycle
        cycle = []
    shown = cycle[:CYCLE_TASKS_SHOWN] or stuck[:CYCLE_TASKS_SHOWN]
    path = " -> ".join(task_label(graph, u) for u in shown)
    if cycle:
        path += (
            f" -> {task_label(graph, cycle[0])}" if len(cycle) <= CYCLE_TASKS_SHOWN else f" -> ... ({len(cycle)} tasks)"
        )
    return f"{where}the task graph has a dependency cycle: {path}; {len(stuck)} tasks never became ready"
