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
def _simulate_arrays(mode, duration, gap, thread, ready, prio, indegree, succ_ptr, succ_child, succ_order, succ_lag,  # type: ignore[no-untyped-def]
              gang_of, gang_ptr, gang_members, n_threads):  # fmt: skip
    """Simulate over flat arrays; returns start, end, cause, arrival, arrived (per gang) and how many tasks ran.
    ``ready`` and ``indegree`` change in place: what is left in them tells which tasks never became ready."""
    n = duration.shape[0]
    n_gangs = gang_ptr.shape[0] - 1
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
    size = 0
    qhead = 0
    qtail = 0
    seq = 0
    done = 0
    for i in range(n):
        if indegree[i] == 0:
            size, qtail, seq = _push(i, mode, ready, progress, thread, prio, k1, k2, k3, sq, tk, size, queue, qtail, seq)
    while True:
        if mode == FIFO:
            if qhead == qtail:
                break
            i = queue[qhead % queue.shape[0]]
            qhead += 1
        else:
            if size == 0:
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
                last = gang_members[g0]  # the first member to arrive last, as max() picks it
                longest = duration[last]
                for q in range(g0 + 1, g1):
                    m = gang_members[q]
                    if arrival[m] > arrival[last]:
                        last = m
                    longest = max(longest, duration[m])
                s = arrival[last]
                e = s + longest
                for q in range(g0, g1):
                    m = gang_members[q]
                    tm = thread[m]
                    if arrival[m] < s:
                        cause[m] = last
                    if m != i:
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
                    size, qtail, seq = _run(m, s, e, mode, start, end, progress, last_on_thread, gap, ready, cause, indegree, succ_ptr,
                                            succ_child, succ_order, succ_lag, thread, prio, k1, k2, k3, sq, tk, size, queue, qtail, seq)  # fmt: skip
                    done += 1
                continue
        elif progress[t] > s:
            s = progress[t]
            cause[i] = last_on_thread[t]
        size, qtail, seq = _run(i, s, s + duration[i], mode, start, end, progress, last_on_thread, gap, ready, cause, indegree,
                                succ_ptr, succ_child, succ_order, succ_lag, thread, prio, k1, k2, k3, sq, tk, size, queue, qtail, seq)  # fmt: skip
        done += 1
    return start, end, cause, arrival, arrived, done


@jit_without_runtime
def _run(i, s, e, mode, start, end, progress, last_on_thread, gap, ready, cause, indegree, succ_ptr, succ_child, succ_order,  # type: ignore[no-untyped-def]
         succ_lag, thread, prio, k1, k2, k3, sq, tk, size, queue, qtail, seq):  # fmt: skip
    """Task i runs from s to e: its thread moves on, its children's ready times and counts follow, and those whose
    last parent it was enter the frontier (the Python loop inlines this, its hot path; compiled, a call costs nothing)."""
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
            size, qtail, seq = _push(c, mode, ready, progress, thread, prio, k1, k2, k3, sq, tk, size, queue, qtail, seq)
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
