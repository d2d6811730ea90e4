"""The CPU sweep of :mod:`daydream.graph.build.cpu` compiled with numba, for large traces: the same sweep, statement
for statement, over arrays of the CPU events (their times, families, and codes for what each declares) instead of a
``Frame`` object per range.

The two give the same tasks, attributes and findings: ``tests/test_cpu_sweep.py`` holds them to that on every shared
trace and a trace of each validation program. Two compiled passes and one between them:

1. :func:`_nesting` finds the range each event opens in (the stack of open ranges per thread), and its depth;
2. the layer of each range is composed level by level from its parent's (:class:`~daydream.graph.context.LayerPart`
   on strings, once per distinct parent layer and part), and numbered so that two ranges of one layer path share a
   number (the sweep compares layers);
3. :func:`_sweep` runs the sweep itself: the stack, what each range declares and passes to its parent on closing,
   and the tasks in the order the Python sweep adds them, each with the context of the range around it (a row of
   ``contexts``, written once per range that holds a task).

Python then makes each task's attribute dict, as the Python sweep does (the dicts are the graph's), from those rows.
:func:`daydream.graph.build.cpu.cpu_tasks` runs this for traces of COMPILED_MIN_CPU_EVENTS or more CPU events that
the columnar loader read (their CPU ops kept as columns, never made as events: ``Trace.pending``), where numba
imports; the compiled code is cached on disk, as the simulator's.
"""

from __future__ import annotations

import math

import numpy as np

from daydream._jit import jit, jit_without_runtime

ANN, OP, RT = 0, 1, 2  # the families, as build_cpu.Family numbers them
# phases as codes: what range_role declares
PHASES = (None, "forward", "backward", "optimizer", "dataloader")
NO_PHASE, BACKWARD, OPTIMIZER, DATALOADER = 0, 2, 3, 4
NOT_THREADED, LIBRARY, ELEMENTWISE = 0, 1, 2  # threading_kind

# a frame on the stack: int64 fields (S) and float64 ones (SF)
(S_EV, S_FAM, S_MARK, S_OP_EV, S_TOP_OP_EV, S_TOP_OP_ID, S_LAYER, S_PHASE, S_REGION, S_BWD, S_FWD, S_COMM, S_FLAGS,
 S_TOP, S_INNER_SHAPES, S_INNER_LAYER, S_CTX) = range(17)
_S_FIELDS = 17
SF_END, SF_NESTED, SF_PARALLEL = 0, 1, 2
# S_FLAGS bits
F_HAS_BWD, F_HAS_FWD, F_LOADER, F_PARTS, F_HAS_RT = 1, 2, 4, 8, 16
# a context row: what a range gives the tasks inside it, its frame's fields S_OP_EV to S_FLAGS in their order
C_OP_EV, C_TOP_OP_EV, C_TOP_OP_ID, C_LAYER, C_PHASE, C_REGION, C_BWD, C_FWD, C_COMM, C_FLAGS = range(10)
_C_FIELDS = 10
# a task row, in the order the tasks are added
R_KIND, R_EV, R_PARENT_CTX, R_OWN_CTX, R_INNER_LAYER, R_INNER_SHAPES = range(6)
_R_FIELDS = 6
CALL, OP_TASK, LOADER_TASK = 0, 1, 2


@jit
def _nesting(bounds, ts, end, fam):  # type: ignore[no-untyped-def]
    """Each event's range (its index; -1 none) and depth, by the sweep's stack rules; and the deepest stack."""
    n = ts.shape[0]
    parent = np.full(n, -1, np.int64)
    depth = np.zeros(n, np.int64)
    stack = np.empty(n + 1, np.int64)
    deepest = 0
    for t in range(bounds.shape[0] - 1):
        sp = 0
        for i in range(bounds[t], bounds[t + 1]):
            while sp > 0 and end[stack[sp - 1]] <= ts[i]:
                sp -= 1
            p = stack[sp - 1] if sp > 0 else -1
            if p >= 0 and fam[i] == ANN and end[i] > end[p]:
                p = -1  # an annotation that outlives the range it starts in is not part of it
            parent[i] = p
            depth[i] = depth[p] + 1 if p >= 0 else 0
            if fam[i] != RT:
                stack[sp] = i
                sp += 1
                deepest = max(deepest, sp)
    return parent, depth, deepest


@jit_without_runtime
def _context(S, s, C, nctx):  # type: ignore[no-untyped-def]
    """The context row of the frame at stack slot ``s`` (written the first time a task asks); returns (row, nctx)."""
    if s < 0:
        return -1, nctx
    if S[s, S_CTX] < 0:
        for f in range(_C_FIELDS):  # a loop, not a slice: a slice is an array (counted, or copied)
            C[nctx, f] = S[s, S_OP_EV + f]
        S[s, S_CTX] = nctx
        nctx += 1
    return S[s, S_CTX], nctx


@jit
def _sweep(bounds, ts, end, dur, fam, phase_of, layer, layer_truthy, nccl, has_seq, seq, has_coll, has_corr, corr,  # type: ignore[no-untyped-def]
           threaded, across, shapes_truthy, dims_any, cpu_only, deepest):
    """build_cpu._sweep_thread over every thread (``bounds``), as arrays. Returns the task rows (R), the context rows
    (C), the correlation ids with their tasks, the (sequence number, layer) of forward ops in order, the outermost
    data-loading ranges, the nested ops' (outermost op, op, own time) and the optimizer's ops (CPU-only traces)."""
    S = np.empty((deepest + 1, _S_FIELDS), np.int64)
    SF = np.empty((deepest + 1, 3), np.float64)
    # the tables below have a row for every event they could hold, left unwritten (memory never written is never
    # held: their rows are a fraction of the events); what they hold is returned as views, not copied
    n = ts.shape[0]
    R = np.empty((n, _R_FIELDS), np.int64)
    RF = np.empty(n, np.float64)  # a task row's parallel_us (written for CPU-only tasks)
    P = np.empty((n, _R_FIELDS), np.int64)  # the CPU-only tasks pending in the thread being swept
    PF = np.empty(n, np.float64)
    C = np.empty((n, _C_FIELDS), np.int64)
    corr_ids = np.empty((n, 2), np.int64)
    seq_layer = np.empty((n, 2), np.int64)
    loaders = np.empty(n, np.int64)
    parts = np.empty((n, 2), np.int64)
    parts_own = np.empty(n, np.float64)
    optimizer_ops = np.empty(n, np.int64)
    nrec = nctx = ncorr = nseq = nload = nparts = nopt = 0
    top_op_calls = 0
    for t in range(bounds.shape[0] - 1):
        sp = 0
        npend = 0
        call_end = -math.inf
        call_task = -1
        for i in range(bounds[t], bounds[t + 1] + 1):
            last = i == bounds[t + 1]
            # close the frames that end before this event starts (all of them after the thread's last event)
            while sp > 0 and (last or SF[sp - 1, SF_END] <= ts[i]):
                sp -= 1
                s, p = sp, sp - 1
                j = S[s, S_EV]
                is_op = S[s, S_FAM] == OP
                if is_op and threaded[j] != NOT_THREADED and across[j]:
                    own = dur[j] - SF[s, SF_NESTED]
                    SF[s, SF_PARALLEL] += own if own > 0.0 else 0.0
                if is_op and S[s, S_TOP] >= 0 and threaded[j] != LIBRARY and dims_any[j]:
                    own = dur[j] - SF[s, SF_NESTED]
                    parts[nparts, 0] = S[s, S_TOP]
                    parts[nparts, 1] = j
                    parts_own[nparts] = own if own > 0.0 else 0.0
                    nparts += 1
                if p >= 0:
                    SF[p, SF_NESTED] += dur[j] if is_op else SF[s, SF_NESTED]
                    SF[p, SF_PARALLEL] += SF[s, SF_PARALLEL]
                    if S[p, S_INNER_SHAPES] < 0:
                        S[p, S_INNER_SHAPES] = j if is_op and shapes_truthy[j] else S[s, S_INNER_SHAPES]
                    if S[p, S_INNER_LAYER] == 0:
                        inner = S[s, S_INNER_LAYER]
                        if not layer_truthy[inner]:
                            inner = S[s, S_LAYER] if S[s, S_FAM] == ANN and S[s, S_LAYER] != S[p, S_LAYER] else 0
                        S[p, S_INNER_LAYER] = inner
                loading = (S[s, S_FLAGS] & F_LOADER) != 0
                outermost_loader = loading and S[s, S_FAM] == ANN and (p < 0 or (S[p, S_FLAGS] & F_LOADER) == 0)
                if outermost_loader:
                    loaders[nload] = j
                    nload += 1
                if S[s, S_FLAGS] & F_HAS_RT:
                    continue
                if outermost_loader:
                    npend = S[s, S_MARK]  # data loading without CUDA work is one task, whatever ran inside it
                    ctx, nctx = _context(S, p, C, nctx)
                    P[npend, R_KIND] = LOADER_TASK
                    P[npend, R_EV] = j
                    P[npend, R_PARENT_CTX] = ctx
                    P[npend, R_OWN_CTX] = -1
                    P[npend, R_INNER_LAYER] = 0
                    P[npend, R_INNER_SHAPES] = -1
                    PF[npend] = SF[s, SF_PARALLEL]
                    npend += 1
                elif is_op and (p < 0 or S[p, S_TOP_OP_EV] < 0) and not loading:
                    ctx, nctx = _context(S, p, C, nctx)
                    own_ctx, nctx = _context(S, s, C, nctx)
                    P[npend, R_KIND] = OP_TASK
                    P[npend, R_EV] = j
                    P[npend, R_PARENT_CTX] = ctx
                    P[npend, R_OWN_CTX] = own_ctx
                    P[npend, R_INNER_LAYER] = S[s, S_INNER_LAYER]
                    P[npend, R_INNER_SHAPES] = S[s, S_INNER_SHAPES]
                    PF[npend] = SF[s, SF_PARALLEL]
                    npend += 1
            if last:
                break
            p = sp - 1
            if p >= 0 and fam[i] == ANN and end[i] > SF[p, SF_END]:
                p = -1  # an annotation that outlives the range it starts in is not part of it
            if fam[i] == RT:
                if ts[i] < call_end:  # a driver call inside a runtime call: one CPU task
                    if has_corr[i]:
                        corr_ids[ncorr, 0] = corr[i]
                        corr_ids[ncorr, 1] = call_task
                        ncorr += 1
                    continue
                ctx, nctx = _context(S, p, C, nctx)
                R[nrec, R_KIND] = CALL
                R[nrec, R_EV] = i
                R[nrec, R_PARENT_CTX] = ctx
                R[nrec, R_OWN_CTX] = -1
                R[nrec, R_INNER_LAYER] = 0
                R[nrec, R_INNER_SHAPES] = -1
                call_task = nrec
                nrec += 1
                if has_corr[i]:
                    corr_ids[ncorr, 0] = corr[i]
                    corr_ids[ncorr, 1] = call_task
                    ncorr += 1
                for k in range(sp - 1, -1, -1):  # the ranges open around it hold CUDA work: none is a task itself
                    if S[k, S_FLAGS] & F_HAS_RT:
                        break
                    S[k, S_FLAGS] |= F_HAS_RT
                call_end = end[i]
                continue
            # open a frame: the parent's context, changed by what the range declares
            s = sp
            sp += 1
            S[s, S_EV] = i
            S[s, S_FAM] = fam[i]
            S[s, S_MARK] = npend
            SF[s, SF_END] = end[i]
            SF[s, SF_NESTED] = 0.0
            SF[s, SF_PARALLEL] = 0.0
            if p < 0:
                S[s, S_OP_EV] = S[s, S_TOP_OP_EV] = S[s, S_TOP_OP_ID] = -1
                S[s, S_PHASE] = NO_PHASE
                S[s, S_REGION] = S[s, S_COMM] = S[s, S_TOP] = -1
                S[s, S_BWD] = S[s, S_FWD] = 0
                S[s, S_FLAGS] = 0
            else:  # the parent's context (its layer too: the range's own is set below)
                for f in range(S_OP_EV, S_COMM + 1):  # a loop: a slice of S onto S is copied first
                    S[s, f] = S[p, f]
                S[s, S_FLAGS] = S[p, S_FLAGS] & (F_HAS_BWD | F_HAS_FWD | F_LOADER)
                if S[p, S_TOP] >= 0:
                    S[s, S_TOP] = S[p, S_TOP]
                else:
                    S[s, S_TOP] = S[p, S_EV] if S[p, S_FLAGS] & F_PARTS else -1
            S[s, S_LAYER] = layer[i]
            S[s, S_INNER_SHAPES] = -1
            S[s, S_INNER_LAYER] = 0
            S[s, S_CTX] = -1
            phase = phase_of[i]
            if phase != NO_PHASE and not (phase == BACKWARD and S[s, S_PHASE] == BACKWARD):
                S[s, S_REGION] = i  # an autograd node inside `evaluate_function: <node>` keeps the wrapper
            if phase != NO_PHASE:
                S[s, S_PHASE] = phase
            if phase == DATALOADER and fam[i] == ANN:
                S[s, S_FLAGS] |= F_LOADER
            if fam[i] == OP:
                S[s, S_OP_EV] = i
                if S[s, S_TOP_OP_EV] < 0:  # the outermost op: a new call of it
                    S[s, S_TOP_OP_EV] = i
                    S[s, S_TOP_OP_ID] = top_op_calls
                    top_op_calls += 1
                    if cpu_only:
                        S[s, S_FLAGS] |= F_PARTS
                if cpu_only and S[s, S_PHASE] == OPTIMIZER:
                    optimizer_ops[nopt] = i
                    nopt += 1
                if has_seq[i]:
                    if phase == BACKWARD:
                        S[s, S_BWD] = seq[i]
                        S[s, S_FLAGS] |= F_HAS_BWD
                    elif S[s, S_PHASE] != BACKWARD:
                        seq_layer[nseq, 0] = seq[i]
                        seq_layer[nseq, 1] = layer[i]
                        nseq += 1
                        if not S[s, S_FLAGS] & F_HAS_FWD:
                            S[s, S_FWD] = seq[i]
                            S[s, S_FLAGS] |= F_HAS_FWD
                if has_coll[i]:
                    S[s, S_COMM] = i
            if nccl[i]:
                S[s, S_COMM] = i
        for k in range(npend):
            R[nrec] = P[k]
            RF[nrec] = PF[k]
            nrec += 1
    return (R[:nrec], RF[:nrec], C[:nctx], corr_ids[:ncorr], seq_layer[:nseq], loaders[:nload], parts[:nparts],
            parts_own[:nparts], optimizer_ops[:nopt])
