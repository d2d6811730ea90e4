"""The frontier scheduler: Algorithm 1 of the Daydream paper, over a task graph.

Each task starts when its thread is free (the previous task's end plus its gap) and every parent
has finished (plus the edge's delay), and never before its release time. Children enter the
frontier when their last parent finishes; the policy picks the next task from the frontier.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from typing import Any

import networkx as nx
import numpy as np

from daydream._gc import paused_gc
from daydream.errors import DaydreamError
from daydream.graph.adjacency import attrs_of, successors_of
from daydream.graph.edit import task_label
from daydream.graph.schema import ORDER_KINDS
from daydream.simulation.policies import EARLIEST, Policy
from daydream.simulation.timeline import Timeline


@paused_gc()
def simulate(graph: nx.DiGraph, policy: Policy = EARLIEST) -> Timeline:
    """Predict when every task of ``graph`` runs."""
    nodes = list(graph.nodes)
    n = len(nodes)
    index = {node: i for i, node in enumerate(nodes)}
    task_attrs, succ_of = attrs_of(graph), successors_of(graph)
    attrs: list[dict[str, Any]] = [task_attrs[node] for node in nodes]
    duration = [float(a["duration"]) for a in attrs]
    gap = [float(a.get("gap", 0.0)) for a in attrs]
    thread_ids: dict[str, int] = {}
    thread = [thread_ids.setdefault(a["thread"], len(thread_ids)) for a in attrs]
    ready = [(r if (r := a.get("release")) is not None else -math.inf) for a in attrs]
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
    prio = policy.priorities(attrs)
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
        if progress[t] > s:
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
        raise DaydreamError(_cycle_message(graph, [nodes[i] for i in range(n) if indegree[i] > 0]))
    return Timeline(graph, nodes, np.asarray(start), np.asarray(end), np.asarray(cause), list(thread_ids), attrs)


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
        path += f" -> {task_label(graph, cycle[0])}" if len(cycle) <= CYCLE_TASKS_SHOWN else f" -> ... ({len(cycle)} tasks)"
    return f"{where}the task graph has a dependency cycle: {path}; {len(stuck)} tasks never became ready"
