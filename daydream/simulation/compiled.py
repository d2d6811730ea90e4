"""The frontier scheduler's loop compiled with numba, for large graphs: the same algorithm as the loop in
:mod:`daydream.simulation.engine`, statement for statement, over flat arrays.

The two give the same timeline to the bit: the same float operations in the same order, and the same order of
tasks taken from the frontier (every heap entry ends in a sequence number no other entry has, so any correct heap
pops them in one order). ``tests/test_simulation_compiled.py`` holds them to that on every shared trace, every
policy and multi-rank jobs. The engine imports this module only for large graphs (importing numba takes half a
second); the compiled code is cached on disk next to this module (or in numba's user cache where that is
read-only), so the compilation is paid once per installation.
"""

from __future__ import annotations

import numpy as np

from daydream._jit import jit, jit_without_runtime

# policies, as the compiled loop tells them apart
EARLIEST, FIFO, PRIORITY = 0, 1, 2


@jit_without_runtime
def _less(k1: np.ndarray, k2: np.ndarray, k3: np.ndarray, sq: np.ndarray, a: int, b: int) -> bool:
    """Entry a before entry b: (k1, k2, k3, seq) compared as Python compares tuples (no NaN reaches here)."""
    if k1[a] != k1[b]:
        return k1[a] < k1[b]
    if k2[a] != k2[b]:
        return k2[a] < k2[b]
    if k3[a] != k3[b]:
        return k3[a] < k3[b]
    return sq[a] < sq[b]


@jit_without_runtime
def _push(j, mode, ready, progress, thread, prio, k1, k2, k3, sq, tk, size, queue, qtail, seq):  # type: ignore[no-untyped-def]
    """Task j enters the frontier (the Python loop's ``push``); returns the new heap size, queue tail and seq. A task
    is in the frontier at most once at a time, so n slots hold it: nothing grows."""
    if mode == FIFO:
        queue[qtail % queue.shape[0]] = j
        qtail += 1
    else:
        if mode == PRIORITY:
            k1[size], k2[size], k3[size] = max(ready[j], progress[thread[j]]), prio[j], ready[j]
        else:
            k1[size], k2[size], k3[size] = ready[j], ready[j], 0.0
        sq[size] = seq
        tk[size] = j
        _sift_up(k1, k2, k3, sq, tk, size)
        size += 1
    return size, qtail, seq + 1


@jit
def _simulate_arrays(
    mode,
    duration,
    gap,
    thread,
    ready,
    prio,
    indegree,
    succ_ptr,
    succ_child,
    succ_order,
    succ_lag,  # type: ignore[no-untyped-def]
    gang_of,
    gang_ptr,
    gang_members,
    n_threads,
):
    """Simulate over flat arrays; returns start, end, cause, arrival, arrived (per gang) and how many tasks ran.
    ``ready`` and ``indegree`` change in place: what is left in them tells which tasks never became ready. Every
    collective's members are here: each starts once its last member arrives."""
    n = duration.shape[0]
    n_gangs = gang_ptr.shape[0] - 1
    state = _new_state(mode, n, n_gangs, n_threads)
    start, end, cause, arrival, arrived, progress, last_on_thread, holding, park_head, park_tail, park_next = state[:11]
    k1, k2, k3, sq, tk, queue, counters, horizon, became = state[11:]
    _seed(mode, ready, progress, thread, prio, indegree, k1, k2, k3, sq, tk, queue, counters)
    gang_size = gang_ptr[1:] - gang_ptr[:-1]
    _advance(
        mode,
        duration,
        gap,
        thread,
        ready,
        prio,
        indegree,
        succ_ptr,
        succ_child,
        succ_order,
        succ_lag,
        gang_of,
        gang_ptr,
        gang_members,
        gang_size,
        np.full(max(n_gangs, 0), -np.inf),
        start,
        end,
        cause,
        arrival,
        arrived,
        progress,
        last_on_thread,
        holding,
        park_head,
        park_tail,
        park_next,
        k1,
        k2,
        k3,
        sq,
        tk,
        queue,
        counters,
        horizon,
        became,
    )
    return start, end, cause, arrival, arrived, counters[DONE]


# the counters of a simulation's state (new_state's ``counters``): the heap's size, the fifo's head and tail, the next
# sequence number, the tasks run, the gangs in ``became``
SIZE, QHEAD, QTAIL, SEQ, DONE, BECAME = 0, 1, 2, 3, 4, 5


@jit
def _new_state(mode, n, n_gangs, n_threads):  # type: ignore[no-untyped-def]
    """A simulation's state before its first task, as arrays :func:`_advance` resumes from: start, end, cause,
    arrival, arrived, progress, last_on_thread, holding, park_head, park_tail, park_next, the frontier (k1, k2, k3,
    sq, tk, queue), the counters (SIZE ... BECAME), the horizon (one slot: no task whose key is past it runs) and
    ``became`` (the gangs whose members here have all arrived while some are elsewhere, in the order they did)."""
    start = np.zeros(n)
    end = np.zeros(n)
    cause = np.full(n, -1, dtype=np.int64)
    # what only collectives use is one slot where there are none (at 3M tasks, 26 MB each of the run's peak)
    per_task = n if n_gangs > 0 else 1
    arrival = np.full(per_task, np.nan)
    arrived = np.zeros(max(n_gangs, 0), dtype=np.int64)
    progress = np.full(n_threads, -np.inf)
    last_on_thread = np.full(n_threads, -1, dtype=np.int64)
    holding = np.zeros(n_threads, dtype=np.bool_)
    # tasks parked on a thread held by a collective: a list per thread, in the order they were parked (a task is
    # parked at most once at a time, so the links are per task)
    park_head = np.full(n_threads, -1, dtype=np.int64)
    park_tail = np.full(n_threads, -1, dtype=np.int64)
    park_next = np.full(per_task, -1, dtype=np.int64)
    # the frontier: a binary heap of entries (k1, k2, k3, seq, task) for earliest and priority, a ring for fifo
    cap = max(n, 1)
    k1 = np.zeros(cap)
    k2 = np.zeros(cap)
    k3 = np.zeros(cap)
    sq = np.zeros(cap, dtype=np.int64)
    tk = np.zeros(cap, dtype=np.int64)
    queue = np.zeros(cap if mode == FIFO else 1, dtype=np.int64)
    counters = np.zeros(6, dtype=np.int64)
    horizon = np.full(1, np.inf)
    became = np.zeros(max(n_gangs, 0), dtype=np.int64)
    return (
        start,
        end,
        cause,
        arrival,
        arrived,
        progress,
        last_on_thread,
        holding,
        park_head,
        park_tail,
        park_next,
        k1,
        k2,
        k3,
        sq,
        tk,
        queue,
        counters,
        horizon,
        became,
    )


@jit_without_runtime
def _seed(mode, ready, progress, thread, prio, indegree, k1, k2, k3, sq, tk, queue, counters):  # type: ignore[no-untyped-def]
    """The tasks with no parent enter the frontier, in task order."""
    size, qtail, seq = counters[SIZE], counters[QTAIL], counters[SEQ]
    for i in range(indegree.shape[0]):
        if indegree[i] == 0:
            size, qtail, seq = _push(
                i, mode, ready, progress, thread, prio, k1, k2, k3, sq, tk, size, queue, qtail, seq
            )
    counters[SIZE], counters[QTAIL], counters[SEQ] = size, qtail, seq


@jit_without_runtime
def _advance(
    mode,
    duration,
    gap,
    thread,
    ready,
    prio,
    indegree,
    succ_ptr,
    succ_child,
    succ_order,
    succ_lag,  # type: ignore[no-untyped-def]
    gang_of,
    gang_ptr,
    gang_members,
    gang_size,
    gang_bound,
    start,
    end,
    cause,
    arrival,
    arrived,
    progress,
    last_on_thread,
    holding,
    park_head,
    park_tail,
    park_next,
    k1,
    k2,
    k3,
    sq,
    tk,
    queue,
    counters,
    horizon,
    became,
):
    """Run tasks until none is left or the next one's key is past ``horizon[0]``; resumable.

    A collective (gang g: its members here from ``gang_ptr[g]`` to ``gang_ptr[g + 1]`` in ``gang_members``) whose
    members are all here starts once the last arrives. One with ``gang_size[g]`` members in all, some elsewhere (a
    job simulated in parts, :mod:`daydream.simulation.shard`), is completed by :func:`_finish_gang` once every part
    has reported its members' arrivals: when the members here have all arrived, the gang enters ``became`` and the
    horizon drops to the earliest it can start (its members' latest arrival here, or ``gang_bound[g]``, what the
    other parts' arrivals allow, if later): what runs after that moment may depend on when it starts."""
    size, qhead, qtail, seq, done, n_became = (
        counters[SIZE],
        counters[QHEAD],
        counters[QTAIL],
        counters[SEQ],
        counters[DONE],
        counters[BECAME],
    )
    n_gangs = gang_ptr.shape[0] - 1
    while True:
        if mode == FIFO:
            if qhead == qtail:
                break
            i = queue[qhead % queue.shape[0]]
            qhead += 1
        else:
            if size == 0 or k1[0] > horizon[0]:
                break
            key = k1[0]
            i = tk[0]
            size -= 1
            if size > 0:
                k1[0], k2[0], k3[0], sq[0], tk[0] = k1[size], k2[size], k3[size], sq[size], tk[size]
                _sift_down(k1, k2, k3, sq, tk, 0, size)
            if mode == PRIORITY:
                s0 = max(ready[i], progress[thread[i]])
                if s0 > key:
                    # its thread got busy since it was queued: it competes again when the thread frees
                    k1[size], k2[size], k3[size], sq[size], tk[size] = s0, prio[i], ready[i], seq, i
                    _sift_up(k1, k2, k3, sq, tk, size)
                    size += 1
                    seq += 1
                    continue
            else:
                p = progress[thread[i]]
                if p > key and size > 0 and (k1[0] < p or (k1[0] == p and k2[0] < ready[i])):
                    # its thread is busy until p, and another task could start before that: run that first
                    k1[size], k2[size], k3[size], sq[size], tk[size] = p, ready[i], 0.0, seq, i
                    _sift_up(k1, k2, k3, sq, tk, size)
                    size += 1
                    seq += 1
                    continue
        t = thread[i]
        s = ready[i]
        if n_gangs > 0:
            if holding[t]:
                # its thread is held by a collective waiting for its peers
                park_next[i] = -1
                if park_tail[t] >= 0:
                    park_next[park_tail[t]] = i
                else:
                    park_head[t] = i
                park_tail[t] = i
                continue
            if progress[t] > s:
                s = progress[t]
                cause[i] = last_on_thread[t]
            g = gang_of[i]
            if g >= 0:
                arrival[i] = s
                arrived[g] += 1
                g0, g1 = gang_ptr[g], gang_ptr[g + 1]
                if arrived[g] < g1 - g0:
                    holding[t] = True
                    continue
                if g1 - g0 < gang_size[g]:
                    # every member here has arrived, others are elsewhere: the gang waits for their arrivals
                    holding[t] = True
                    bound = gang_bound[g]
                    for q in range(g0, g1):
                        bound = max(bound, arrival[gang_members[q]])
                    horizon[0] = min(horizon[0], bound)
                    became[n_became] = g
                    n_became += 1
                    continue
                last = gang_members[g0]  # the first member to arrive last, as max() picks it
                longest = duration[last]
                for q in range(g0 + 1, g1):
                    m = gang_members[q]
                    if arrival[m] > arrival[last]:
                        last = m
                    longest = max(longest, duration[m])
                s = arrival[last]
                size, qtail, seq = _finish_gang(
                    g,
                    s,
                    s + longest,
                    last,
                    i,
                    mode,
                    gang_ptr,
                    gang_members,
                    start,
                    end,
                    progress,
                    last_on_thread,
                    gap,
                    ready,
                    cause,
                    arrival,
                    indegree,
                    succ_ptr,
                    succ_child,
                    succ_order,
                    succ_lag,
                    thread,
                    prio,
                    holding,
                    park_head,
                    park_tail,
                    park_next,
                    k1,
                    k2,
                    k3,
                    sq,
                    tk,
                    size,
                    queue,
                    qtail,
                    seq,
                )
                done += g1 - g0
                continue
        elif progress[t] > s:
            s = progress[t]
            cause[i] = last_on_thread[t]
        size, qtail, seq = _run(
            i,
            s,
            s + duration[i],
            mode,
            start,
            end,
            progress,
            last_on_thread,
            gap,
            ready,
            cause,
            indegree,
            succ_ptr,
            succ_child,
            succ_order,
            succ_lag,
            thread,
            prio,
            k1,
            k2,
            k3,
            sq,
            tk,
            size,
            queue,
            qtail,
            seq,
        )
        done += 1
    counters[SIZE], counters[QHEAD], counters[QTAIL], counters[SEQ], counters[DONE], counters[BECAME] = (
        size,
        qhead,
        qtail,
        seq,
        done,
        n_became,
    )


@jit_without_runtime
def _finish_gang(
    g,
    s,
    e,
    last,
    arriving,
    mode,
    gang_ptr,
    gang_members,
    start,
    end,
    progress,
    last_on_thread,
    gap,
    ready,  # type: ignore[no-untyped-def]
    cause,
    arrival,
    indegree,
    succ_ptr,
    succ_child,
    succ_order,
    succ_lag,
    thread,
    prio,
    holding,
    park_head,
    park_tail,
    park_next,
    k1,
    k2,
    k3,
    sq,
    tk,
    size,
    queue,
    qtail,
    seq,
):
    """Gang g's members here all run from s to e: each that arrived earlier gets ``last`` (the member that arrived
    last, as the cause of its start; -2 - its rank where that member is elsewhere) and gives its thread back (but
    ``arriving``, the member whose arrival completes the gang: it held nothing), and the tasks parked on that
    thread enter the frontier again. Returns the new heap size, queue tail and seq."""
    for q in range(gang_ptr[g], gang_ptr[g + 1]):
        m = gang_members[q]
        tm = thread[m]
        if arrival[m] < s:
            cause[m] = last
        if m != arriving:
            holding[tm] = False
            x = park_head[tm]
            park_head[tm] = -1
            park_tail[tm] = -1
            while x >= 0:
                nxt = park_next[x]
                size, qtail, seq = _push(
                    x, mode, ready, progress, thread, prio, k1, k2, k3, sq, tk, size, queue, qtail, seq
                )
                x = nxt
        size, qtail, seq = _run(
            m,
            s,
            e,
            mode,
            start,
            end,
            progress,
            last_on_thread,
            gap,
            ready,
            cause,
            indegree,
            succ_ptr,
            succ_child,
            succ_order,
            succ_lag,
            thread,
            prio,
            k1,
            k2,
            k3,
            sq,
            tk,
            size,
            queue,
            qtail,
            seq,
        )
    return size, qtail, seq


@jit_without_runtime
def _run(
    i,
    s,
    e,
    mode,
    start,
    end,
    progress,
    last_on_thread,
    gap,
    ready,
    cause,
    indegree,
    succ_ptr,
    succ_child,
    succ_order,  # type: ignore[no-untyped-def]
    succ_lag,
    thread,
    prio,
    k1,
    k2,
    k3,
    sq,
    tk,
    size,
    queue,
    qtail,
    seq,
):
    """Task i runs from s to e: its thread moves on, its children's ready times and counts follow, and those whose
    last parent it was enter the frontier (the Python loop inlines this, its hot path; compiled, a call costs nothing).
    """
    t = thread[i]
    start[i] = s
    end[i] = e
    progress[t] = e + gap[i]
    last_on_thread[t] = i
    for x in range(succ_ptr[i], succ_ptr[i + 1]):
        c = succ_child[x]
        rc = e + (gap[i] if succ_order[x] else succ_lag[x])
        if rc > ready[c]:
            ready[c] = rc
            cause[c] = i
        indegree[c] -= 1
        if indegree[c] == 0:
            size, qtail, seq = _push(
                c, mode, ready, progress, thread, prio, k1, k2, k3, sq, tk, size, queue, qtail, seq
            )
    return size, qtail, seq


@jit_without_runtime
def _swap(k1, k2, k3, sq, tk, a, b):  # type: ignore[no-untyped-def]
    """Swap two entries of the heap (its keys and task are parallel arrays)."""
    k1[a], k1[b] = k1[b], k1[a]
    k2[a], k2[b] = k2[b], k2[a]
    k3[a], k3[b] = k3[b], k3[a]
    sq[a], sq[b] = sq[b], sq[a]
    tk[a], tk[b] = tk[b], tk[a]


@jit_without_runtime
def _sift_up(k1, k2, k3, sq, tk, pos):  # type: ignore[no-untyped-def]
    while pos > 0:
        parent = (pos - 1) >> 1
        if _less(k1, k2, k3, sq, pos, parent):
            _swap(k1, k2, k3, sq, tk, pos, parent)
            pos = parent
        else:
            break


@jit_without_runtime
def _sift_down(k1, k2, k3, sq, tk, pos, size):  # type: ignore[no-untyped-def]
    while True:
        child = 2 * pos + 1
        if child >= size:
            break
        if child + 1 < size and _less(k1, k2, k3, sq, child + 1, child):
            child += 1
        if _less(k1, k2, k3, sq, child, pos):
            _swap(k1, k2, k3, sq, tk, pos, child)
            pos = child
        else:
            break
