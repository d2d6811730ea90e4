"""Trace -> kernel-level dependency graph (a ``networkx.DiGraph``), as in the Daydream paper, section 4.

Nodes are tasks, numbered in order of their traced start; each carries plain attributes:

=============  ==========================================================================
``kind``       cpu, dataloader, gpu, memcpy, memset or comm
``name``       runtime call, op or kernel name
``thread``     execution thread: ``cpu:<pid>/<tid>`` or ``gpu:<device>/<stream>``; ``cpu:<pid>/DataLoader workers``
               stands for the worker processes a DataLoader's calls wait for
``duration``   microseconds the task occupies its thread
``gap``        microseconds its thread stays busy after it before the next task may start
               (CPU: the non-CUDA CPU time until the next task; GPU: the stream's
               inter-kernel latency)
``release``    earliest start: none from a trace (a step starts with the work before it finished); scripts may set one
``start``      traced start, microseconds from the graph's origin (read-only reference)
``op``         innermost CPU op around the launching call (``aten::addmm``), ``shapes``
``layer``      module path, ``phase`` forward/backward/optimizer/dataloader/other
``region``     the range that set the phase (``Optimizer.step#SGD.step``, ``Optimizer.zero_grad#...``)
``top_op_id``  which call of ``top_op`` the task belongs to (tasks of one call share it)
``step``       the ProfilerStep the task belongs to
``class``      kernel class (gemm, conv, elementwise, ... see ``kernel_class``)
=============  ==========================================================================

Edges carry ``kind`` (thread, stream, launch, sync, comm) and, except for the order kinds
(thread, stream, whose delay is the parent's ``gap``), a ``lag``: the child may start ``lag``
microseconds after the parent ends (negative: a kernel may start before its launch call returns).

Delays are measured from the trace so that simulating the unmodified graph reproduces it: for
each task the dependency that released it (the parent that ended last) keeps the delay it had in
the trace, and every other dependency gets its mechanism's typical delay (median over the trace),
never more than it had. When a transform changes the work, the typical delays take over.
"""

from __future__ import annotations

import bisect
import math
import re
import statistics
from dataclasses import dataclass
from typing import Any

import networkx as nx

from daydream._gc import paused_gc
from daydream.errors import TraceError
from daydream.graph.context import fed_by_workers, op_shapes, range_role
from daydream.graph.kernel_class import classify_kernel, collective_of, is_comm_kernel
from daydream.trace.intra_op import runs_across_threads, threading_kind
from daydream.trace.model import MEMCPY_CATS, MEMSET_CATS, Trace
from daydream.trace.runtime_calls import call_role, copy_waits
from daydream.trace.schema import Event
from daydream.trace.sizes import message_bytes
from daydream.trace.steps import Step, default_step, select_steps

EDGE_KINDS = ("thread", "stream", "launch", "sync", "comm")
ORDER_KINDS = frozenset({"thread", "stream"})
CPU_KINDS = frozenset({"cpu", "dataloader"})
GPU_KINDS = frozenset({"gpu", "memcpy", "memset", "comm"})

# Defaults where a trace has no sample of a mechanism (typical of CUDA 11/12 on current GPUs).
DEFAULT_LAUNCH_LATENCY_US = 2.0
DEFAULT_STREAM_GAP_US = 1.0
# What a runtime call costs the CPU to issue work, where the trace has no call that only issued work.
DEFAULT_ISSUE_US = 5.0
# A GPU task that starts this long after everything known to hold it back waited on another stream.
UNEXPLAINED_DELAY_US = 5.0
CROSS_STREAM_WINDOW_US = 10.0
# A task with no dependency in the graph that started this long after the window did has an unexplained start.
UNANCHORED_TOLERANCE_US = 1.0


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


@dataclass(slots=True)
class _Frame:
    end: float
    family: int  # 0 annotation, 1 op
    op: str | None
    op_ev: Event | None
    top_op: str | None
    layer: str | None
    phase: str | None
    region: str | None  # the range that set ``phase``
    bwd_seq: int | None
    comm_ev: Event | None
    has_runtime: bool
    mark: int
    ev: Event
    dataloader: bool
    inner_shapes: Any = None  # the first nested op's input dims (an autograd wrapper's are its op's)
    top_op_id: int | None = None  # which call of top_op: numbered per graph build
    inner_layer: str | None = None  # a recorder module range inside an op (AccumulateGrad of a module's parameter)
    nested_op_us: float = 0.0  # time of the ops called inside this frame (outermost ones), for an op's own time
    parallel_us: float = 0.0  # own time of the ops in this frame that ran across the intra-op threads


class _Builder:
    """Collects tasks as parallel columns, then edges, then measures the delays."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.attrs: list[dict[str, Any]] = []
        self.ts: list[float] = []
        self.end: list[float] = []
        self.launch_ts: list[float] = []  # when the work was issued (launch call start for GPU tasks)
        self.in_edges: list[list[list[Any]]] = []  # per child: [parent, kind, lag]
        self.corr_task: dict[int, int] = {}
        self.bwd_seq: dict[int, int] = {}
        self.comm_ev: dict[int, Event] = {}
        self.seq_layer: dict[int, str | None] = {}
        # Execution-trace ops linked to Kineto ops: shapes and tensor ids that Kineto may lack.
        self.et_of = {id(trace.cpu_ops[i]): op for i, op in trace.et_ops.items()}
        self.top_op_calls = 0
        self.copy_waits: list[tuple[int, int]] = []  # (the wait half of a blocking copy call, its copy)
        self.loader_ranges: list[tuple[str, float, float, str]] = []  # outermost data-loading ranges: thread, ts, end, name
        # per task, an edge that holds it only where the window cut all its other parents
        self.fallback_edges: dict[int, list[Any]] = {}

    def add_task(self, attrs: dict[str, Any], ts: float, dur: float) -> int:
        tid = len(self.attrs)
        self.attrs.append(attrs)
        self.ts.append(ts)
        self.end.append(ts + dur)
        self.launch_ts.append(ts)
        self.in_edges.append([])
        return tid

    def add_edge(self, u: int, v: int, kind: str, lag: float = 0.0) -> None:
        self.in_edges[v].append([u, kind, lag])

    # ---- CPU side -------------------------------------------------------------------------------------------

    def cpu_tasks(self) -> None:
        trace = self.trace
        per_thread: dict[tuple[Any, Any], list[tuple[Event, int]]] = {}
        for family, events in ((0, trace.annotations), (1, trace.cpu_ops), (2, trace.runtime)):
            for ev in events:
                per_thread.setdefault((ev.pid, ev.tid), []).append((ev, family))
        rank = trace.rank
        for (pid, tid), items in per_thread.items():
            items.sort(key=lambda it: (it[0].ts, -it[0].dur, it[1]))  # type: ignore[operator]
            self._sweep_thread(f"cpu:{pid}/{tid}", items, rank)
        for task, seq in self.bwd_seq.items():
            layer = self.seq_layer.get(seq)
            if layer is not None:
                self.attrs[task]["layer"] = layer

    def _sweep_thread(self, thread: str, items: list[tuple[Event, int]], rank: int) -> None:
        stack: list[_Frame] = []
        pending: list[tuple[float, dict[str, Any], float, int | None]] = []  # CPU-only op tasks, in pop order
        call_end, call_task = -math.inf, -1  # the last runtime call: calls starting inside it are nested in it
        for ev, family in items:
            ts: float = ev.ts  # type: ignore[assignment]
            end = ts + ev.dur  # type: ignore[operator]
            while stack and stack[-1].end <= ts:
                self._pop(stack, pending, thread, rank)
            parent = stack[-1] if stack else None
            if parent is not None and family == 0 and end > parent.end:
                # An annotation that outlives the range it starts in is not part of it: the recorder's ProfilerStep
                # starts inside the Optimizer.step range (in its post-hook) and holds the whole next step.
                parent = None
            if family == 2:
                corr = ev.args.correlation if ev.args is not None else None
                if ts < call_end:
                    # A driver call inside a runtime call (cuLaunchKernel in cudaLaunchKernel): one CPU task.
                    if corr is not None:
                        self.corr_task[corr] = call_task
                    continue
                attrs = self._cpu_attrs("cpu", ev.name, thread, rank, parent)
                task = self.add_task(attrs, ts, ev.dur)  # type: ignore[arg-type]
                if corr is not None:
                    self.corr_task[corr] = task
                if parent is not None:
                    if parent.bwd_seq is not None:
                        self.bwd_seq[task] = parent.bwd_seq
                    if parent.comm_ev is not None:
                        self.comm_ev[task] = parent.comm_ev
                for frame in reversed(stack):
                    if frame.has_runtime:
                        break
                    frame.has_runtime = True
                call_end, call_task = end, task
                continue
            name = ev.name
            phase, layer_part = range_role(name, ev.cat)
            is_op = family == 1
            if parent is None:
                frame = _Frame(end, family, None, None, None, None, None, None, None, None, False, len(pending), ev, False)
                frame.layer = layer_part.path(None)
                frame.phase = phase
                frame.region = name if phase is not None else None
            else:
                frame = _Frame(
                    end, family, parent.op, parent.op_ev, parent.top_op, layer_part.path(parent.layer),
                    phase or parent.phase,
                    # an autograd node inside `evaluate_function: <node>` keeps the wrapper as its region
                    name if phase is not None and not (phase == parent.phase == "backward") else parent.region,
                    parent.bwd_seq, parent.comm_ev,
                    False, len(pending), ev,
                    parent.dataloader, None, parent.top_op_id,
                )  # fmt: skip
            if phase == "dataloader" and family == 0:
                frame.dataloader = True
            args = ev.args
            if is_op:
                frame.op = name
                frame.op_ev = ev
                if frame.top_op is None:
                    frame.top_op = name
                    frame.top_op_id = self.top_op_calls
                    self.top_op_calls += 1
                if args is not None:
                    seq = args.sequence_number
                    if seq is not None:
                        if phase == "backward":  # `evaluate_function: <node>`, or the node itself in 2021-era traces
                            frame.bwd_seq = seq
                        elif frame.phase != "backward" and seq not in self.seq_layer:
                            self.seq_layer[seq] = frame.layer
                    if args.collective_name is not None:
                        frame.comm_ev = ev
            if name.startswith("nccl:"):
                # Older PyTorch names the collective in a `nccl:<name>` range holding its tensor's dims.
                frame.comm_ev = ev
            stack.append(frame)
        while stack:
            self._pop(stack, pending, thread, rank)
        for ts, attrs, dur, seq in pending:
            task = self.add_task(attrs, ts, dur)
            if seq is not None:
                self.bwd_seq[task] = seq

    def _pop(self, stack: list[_Frame], pending: list[Any], thread: str, rank: int) -> None:
        frame = stack.pop()
        ev = frame.ev
        parent = stack[-1] if stack else None
        # threading_kind first (cached): most ops are never threaded, and their shapes need not be read
        if frame.family == 1 and threading_kind(ev.name) and runs_across_threads(ev.name, self._shapes(ev)):
            frame.parallel_us += max(0.0, ev.dur - frame.nested_op_us)  # type: ignore[operator]
        if parent is not None:
            # an annotation between two ops passes its ops' time through: the outer op's own time excludes it
            parent.nested_op_us += ev.dur if frame.family == 1 else frame.nested_op_us  # type: ignore[operator]
            parent.parallel_us += frame.parallel_us
        if parent is not None and parent.inner_shapes is None:
            # through annotations too: the recorder's range sits between evaluate_function and AccumulateGrad
            parent.inner_shapes = (self._shapes(ev) if frame.family == 1 else None) or frame.inner_shapes
        if parent is not None and parent.inner_layer is None:
            parent.inner_layer = frame.inner_layer or (frame.layer if frame.family == 0 and frame.layer != parent.layer else None)
        outermost_loader = frame.dataloader and frame.family == 0 and (parent is None or not parent.dataloader)
        if outermost_loader:
            self.loader_ranges.append((thread, ev.ts, ev.ts + ev.dur, ev.name))  # type: ignore[operator]
        if frame.has_runtime:
            return
        if outermost_loader:
            # Data loading without CUDA work is one task, whatever ops it ran inside.
            del pending[frame.mark :]
            attrs = self._cpu_attrs("dataloader", ev.name, thread, rank, parent)
            attrs["phase"] = "dataloader"
            attrs["region"] = ev.name
            attrs["parallel_us"] = frame.parallel_us
            pending.append((ev.ts, attrs, ev.dur, None))
        elif frame.family == 1 and (parent is None or parent.top_op is None) and not frame.dataloader:
            # A CPU op called from Python that launches nothing: its CPU time is a task of its own.
            attrs = self._cpu_attrs("cpu", ev.name, thread, rank, parent)
            attrs["op"] = ev.name
            # `evaluate_function: AccumulateGrad` records no dims; the AccumulateGrad op inside it holds the gradient's.
            own = self._shapes(ev)
            attrs["shapes"] = own if _has_dims(own) or not frame.inner_shapes else frame.inner_shapes
            attrs["top_op_id"] = frame.top_op_id
            attrs["parallel_us"] = frame.parallel_us
            # The op's own phase: `evaluate_function: ...` declares the backward pass itself.
            attrs["phase"], attrs["region"] = frame.phase, frame.region
            if attrs["layer"] is None:
                attrs["layer"] = frame.inner_layer
            pending.append((ev.ts, attrs, ev.dur, frame.bwd_seq))

    def _cpu_attrs(self, kind: str, name: str, thread: str, rank: int, parent: _Frame | None) -> dict[str, Any]:
        if parent is None:
            return {"kind": kind, "name": name, "thread": thread, "rank": rank, "op": None, "shapes": None,
                    "top_op": None, "top_op_id": None, "layer": None, "phase": None, "region": None,
                    "parallel_us": 0.0}  # fmt: skip
        attrs = {
            "kind": kind, "name": name, "thread": thread, "rank": rank, "op": parent.op,
            "shapes": self._shapes(parent.op_ev), "top_op": parent.top_op, "layer": parent.layer, "phase": parent.phase,
            "region": parent.region, "top_op_id": parent.top_op_id, "parallel_us": 0.0,
        }  # fmt: skip
        if self.et_of and parent.op_ev is not None and (et := self.et_of.get(id(parent.op_ev))) is not None:
            attrs["tensors_in"] = et.input_tensors
            attrs["tensors_out"] = et.output_tensors
        return attrs

    def _shapes(self, ev: Event | None) -> Any:
        if ev is None:
            return None
        shapes = op_shapes(ev)
        if shapes is None and self.et_of and (et := self.et_of.get(id(ev))) is not None:
            return [list(x) if isinstance(x, tuple) else x for x in et.input_shapes]
        return shapes

    # ---- GPU side -------------------------------------------------------------------------------------------

    def gpu_tasks(self) -> None:
        rank = self.trace.rank
        n_cpu = len(self.attrs)
        blocking: list[tuple[int, int]] = []  # (call, copy) pairs where the call returned only when the copy ended
        for ev in self.trace.gpu:
            args = ev.args
            stream = args.stream if args is not None and isinstance(args.stream, int) else ev.tid
            device = args.device if args is not None and args.device is not None else ev.pid
            cat = ev.cat
            kind = "memcpy" if cat in MEMCPY_CATS else "memset" if cat in MEMSET_CATS else "gpu"
            if kind == "gpu" and is_comm_kernel(ev.name):
                kind = "comm"
            corr = args.correlation if args is not None else None
            launcher = self.corr_task.get(corr) if corr is not None else None
            if launcher is not None and launcher >= n_cpu:
                launcher = None
            src = self.attrs[launcher] if launcher is not None else None
            attrs = {
                "kind": kind, "name": ev.name, "thread": f"gpu:{device}/{stream}", "rank": rank,
                "op": src["op"] if src else None, "shapes": src["shapes"] if src else None,
                "top_op": src["top_op"] if src else None, "layer": src["layer"] if src else None,
                "phase": src["phase"] if src else None, "region": src["region"] if src else None,
                "top_op_id": src["top_op_id"] if src else None, "class": classify_kernel(ev.name, kind),
                "device": device, "stream": stream,
            }  # fmt: skip
            if args is not None and kind in ("memcpy", "memset") and isinstance(args.bytes, (int, float)):
                attrs["bytes"] = int(args.bytes)
            if kind == "comm":
                around = self.comm_ev.get(launcher) if launcher is not None else None
                named = collective_of(re.sub(r"[^0-9A-Za-z]", "", around.name[5:])) if around and around.name.startswith("nccl:") else None
                # all-to-all runs as SendRecv kernels: the range that launched them says what it was
                attrs["collective"] = named or collective_of(ev.name)
                nbytes = message_bytes(args) or (message_bytes(around.args) if around is not None else None)
                if nbytes is not None:
                    attrs["bytes"] = nbytes
            task = self.add_task(attrs, ev.ts, ev.dur)  # type: ignore[arg-type]
            if launcher is not None:
                self.add_edge(launcher, task, "launch")
                self.launch_ts[task] = self.ts[launcher]
                if kind == "memcpy" and self._blocking_copy(launcher, task):
                    blocking.append((launcher, task))
            if corr is not None:
                self.corr_task.setdefault(corr, task)
        if blocking:
            issue_us = self._typical_issue_us({call for call, _ in blocking})
            for call, copy in blocking:
                self.split_blocking_call(call, copy, issue_us)

    # ---- edges ----------------------------------------------------------------------------------------------

    def order_edges(self) -> dict[str, list[int]]:
        threads: dict[str, list[int]] = {}
        attrs = self.attrs
        for task in range(len(attrs)):
            threads.setdefault(attrs[task]["thread"], []).append(task)
        ts, in_edges = self.ts, self.in_edges
        for thread, tasks in threads.items():
            tasks.sort(key=ts.__getitem__)
            kind = "stream" if thread.startswith("gpu:") else "thread"
            for u, v in zip(tasks, tasks[1:]):
                in_edges[v].append([u, kind, 0.0])  # add_edge, inlined: the most frequent edge by far
        return threads

    def sync_edges(self, threads: dict[str, list[int]]) -> None:
        """CPU calls that block on GPU work, and GPU work that waits on another stream."""
        trace = self.trace
        attrs = self.attrs
        streams = {t: tasks for t, tasks in threads.items() if t.startswith("gpu:")}
        # Per stream, tasks in issue order, to find "the last work issued before time t".
        issued = {t: (sorted(tasks, key=self.launch_ts.__getitem__)) for t, tasks in streams.items()}
        issued_ts = {t: [self.launch_ts[x] for x in tasks] for t, tasks in issued.items()}
        explicit = {ev.args.correlation: ev for ev in trace.syncs if ev.args is not None and ev.args.correlation is not None}
        by_stream_id: dict[Any, list[str]] = {}
        for t in streams:
            by_stream_id.setdefault(t.rsplit("/", 1)[1], []).append(t)

        def last_issued_before(stream: str, t: float) -> int | None:
            i = bisect.bisect_left(issued_ts[stream], t)
            return issued[stream][i - 1] if i else None

        runtime_by_corr: dict[int, int] = {}
        for ev in trace.runtime:
            if ev.args is not None and ev.args.correlation is not None:
                task = self.corr_task.get(ev.args.correlation)
                if task is not None and attrs[task]["kind"] == "cpu":
                    runtime_by_corr[ev.args.correlation] = task
        for corr, task in runtime_by_corr.items():
            name = attrs[task]["name"]
            call_ts, call_end = self.ts[task], self.end[task]
            sync = explicit.get(corr)
            targets: list[int] = []
            if sync is not None and sync.args is not None:
                kind = sync.args.cuda_sync_kind or sync.name
                if "Wait Event" in kind:
                    self._explicit_wait(sync, task, streams, by_stream_id, issued, issued_ts, runtime_by_corr)
                    continue
                if "Stream" in kind or "Event" in kind:
                    sid = (
                        sync.args.wait_on_stream if "Event" in kind and sync.args.wait_on_stream is not None else sync.args.stream
                    )
                    for stream in by_stream_id.get(str(sid), []):
                        last = last_issued_before(stream, call_ts)
                        if last is not None:
                            targets.append(last)
                else:  # context / device sync
                    targets = [x for s in streams if (x := last_issued_before(s, call_ts)) is not None]
            elif (role := call_role(name)) == "device":
                targets = [x for s in streams if (x := last_issued_before(s, call_ts)) is not None]
            elif role == "stream":
                # The stream is not recorded: it is the one whose pending work ended last within the call.
                best = None
                for s in streams:
                    last = last_issued_before(s, call_ts)
                    if (
                        last is not None
                        and call_ts < self.end[last] <= call_end
                        and (best is None or self.end[last] > self.end[best])
                    ):
                        best = last
                if best is not None:
                    targets = [best]
            for target in targets:
                self.add_edge(target, task, "sync")

    def _blocking_copy(self, call: int, copy: int) -> bool:
        return copy_waits(
            self.attrs[call]["name"], self.attrs[copy]["name"], self.ts[call], self.end[call], self.ts[copy], self.end[copy]
        )

    def _typical_issue_us(self, blocking: set[int]) -> float:
        """How long a call takes to issue GPU work: the median duration of the calls that launched work and did not
        wait for it (cudaLaunchKernel, cudaMemcpyAsync...)."""
        durations = [
            self.end[u] - self.ts[u]
            for edges in self.in_edges
            for u, kind, _ in edges
            if kind == "launch" and u not in blocking and call_role(self.attrs[u]["name"]) is None
        ]
        return statistics.median(durations) if durations else DEFAULT_ISSUE_US

    def split_blocking_call(self, call: int, copy: int, issue_us: float) -> None:
        """A call that issues a copy and waits for it becomes two CPU tasks: the issue (the call's own cost of
        issuing work, typical of the trace's launch calls), and the wait, released by the copy's end. The copy itself
        waits in its stream behind the work queued before it, so faster GPU work starts the copy, and returns the
        call, sooner; the time the call spent waiting is nobody's CPU time."""
        issue_end = min(self.ts[call] + issue_us, self.ts[copy], self.end[call])
        issue_end = max(issue_end, self.ts[call])
        call_end = self.end[call]
        self.end[call] = issue_end
        wait_attrs = dict(self.attrs[call])
        wait_attrs["name"] = self.attrs[call]["name"] + " [wait]"
        wait = self.add_task(wait_attrs, issue_end, call_end - issue_end)
        self.copy_waits.append((wait, copy))

    def copy_wait_edges(self, threads: dict[str, list[int]]) -> None:
        """What each blocking copy call waited for: the copy's end where the copy ended inside the call; else (a
        copy from pageable host memory, which CUDA starts by draining the stream and returns from once the data is
        staged, before the last transfer ends) the end of the work queued before the copy on its stream."""
        position = {}
        for wait, copy in self.copy_waits:
            if self.end[copy] <= self.end[wait]:
                self.add_edge(copy, wait, "sync")
                continue
            stream = threads[self.attrs[copy]["thread"]]
            if not position:
                position = {x: i for tasks in threads.values() for i, x in enumerate(tasks)}
            i = position[copy]
            if i > 0 and self.end[stream[i - 1]] <= self.end[wait]:
                self.add_edge(stream[i - 1], wait, "sync")

    def _explicit_wait(self, sync: Event, wait_task: int, streams: Any, by_stream_id: Any, issued: Any,
                       issued_ts: Any, runtime_by_corr: dict[int, int]) -> None:  # fmt: skip
        args = sync.args
        assert args is not None
        record = runtime_by_corr.get(args.wait_on_cuda_event_record_corr_id)  # type: ignore[arg-type]
        if record is None:
            return
        for src_stream in by_stream_id.get(str(args.wait_on_stream), []):
            i = bisect.bisect_left(issued_ts[src_stream], self.ts[record])
            if not i:
                continue
            source = issued[src_stream][i - 1]
            for dst_stream in by_stream_id.get(str(args.stream), []):
                j = bisect.bisect_right(issued_ts[dst_stream], self.ts[wait_task])
                if j < len(issued[dst_stream]):
                    dest = issued[dst_stream][j]
                    self.add_edge(
                        source, dest, "comm" if "comm" in (self.attrs[source]["kind"], self.attrs[dest]["kind"]) else "sync"
                    )

    # ---- delays ---------------------------------------------------------------------------------------------

    def typical_delays(self) -> tuple[float, float]:
        """Median launch latency (idle stream) and median inter-kernel gap (queued work), measured."""
        launch, gap = [], []
        for v, edges in enumerate(self.in_edges):
            kinds = {kind: u for u, kind, _ in edges}
            if "launch" not in kinds:
                continue
            launcher = kinds["launch"]
            pred = kinds.get("stream")
            if pred is None or self.end[pred] < self.ts[launcher]:
                launch.append(self.ts[v] - self.end[launcher])
            elif self.end[launcher] < self.end[pred]:
                gap.append(self.ts[v] - self.end[pred])
        l0 = statistics.median(launch) if launch else DEFAULT_LAUNCH_LATENCY_US
        g0 = max(0.0, statistics.median(gap)) if gap else DEFAULT_STREAM_GAP_US
        return l0, g0

    def measure_delays(self, threads: dict[str, list[int]], infer_waits: bool) -> tuple[float, float]:
        l0, g0 = self.typical_delays()
        typical = {"launch": l0, "stream": g0, "thread": 0.0, "sync": 0.0, "comm": 0.0}
        attrs, ts, end = self.attrs, self.ts, self.end
        for a in attrs:
            a["gap"] = 0.0
            a["release"] = None
        streams_of_device: dict[Any, list[str]] = {}
        for t in threads:
            if t.startswith("gpu:"):
                streams_of_device.setdefault(t.split("/")[0], []).append(t)
        ends_sorted = {t: sorted((end[x], x) for x in tasks) for t, tasks in threads.items() if t.startswith("gpu:")}
        ends_only = {t: [e for e, _ in pairs] for t, pairs in ends_sorted.items()}
        for v, edges in enumerate(self.in_edges):
            s = ts[v]
            if not edges:
                continue  # nothing known holds it: it starts with the window (see _cut: the unanchored starts)
            a = attrs[v]
            if a["kind"] in CPU_KINDS:
                waited = [u for u, kind, _ in edges if kind == "sync"]
                if waited:
                    te = max(end[u] for u in waited)
                    if te > end[v]:  # the trace says the call returned first: not a wait on these
                        edges[:] = [e for e in edges if e[1] != "sync" or end[e[0]] <= end[v]]
                        waited = [u for u, kind, _ in edges if kind == "sync"]
                        te = max((end[u] for u in waited), default=s)
                    if te > s:
                        a["duration"] = end[v] - te  # the part of the call after the wait: its own cost
                for e in edges:
                    u, kind = e[0], e[1]
                    if kind == "thread":
                        attrs[u]["gap"] = s - end[u]
                    else:
                        e[2] = 0.0
                continue
            binding = min(edges, key=lambda e: s - end[e[0]])
            slack_b = s - end[binding[0]]
            if infer_waits and slack_b > UNEXPLAINED_DELAY_US + max(l0, g0, 0.0):
                source = self._cross_stream_source(v, s, streams_of_device, ends_sorted, ends_only)
                if source is not None:
                    kind = "comm" if "comm" in (a["kind"], attrs[source]["kind"]) else "sync"
                    binding = [source, kind, 0.0]
                    edges.append(binding)
            for e in edges:
                u, kind = e[0], e[1]
                slack = s - end[u]
                value = slack if e is binding else min(slack, typical[kind])
                if kind == "stream":
                    attrs[u]["gap"] = value
                else:
                    e[2] = value
        return l0, g0

    def backward_waits(self, threads: dict[str, list[int]]) -> list[tuple[int, int, int, int]]:
        """`loss.backward()` blocks its thread while the autograd engine's thread runs the backward pass: where a CPU
        thread is idle across a stretch of the engine thread's backward tasks, the task after the idle stretch waits
        for the last of them (a `sync` edge), and the first of them waits for the task before the stretch (the call).
        Returns (task before the stretch, task after, last backward task, first backward start) for
        :meth:`split_backward_gaps`."""
        attrs, ts, end = self.attrs, self.ts, self.end
        backward: dict[str, list[int]] = {}
        for t, tasks in threads.items():
            if not t.startswith("gpu:"):
                bwd = [x for x in tasks if attrs[x]["phase"] == "backward" and attrs[x]["kind"] in CPU_KINDS]
                # The engine's thread runs the backward pass and little else; a thread that merely holds a
                # `## backward ##` range around its loss computation is the caller, not the engine.
                if bwd and len(bwd) >= ENGINE_THREAD_SHARE * len(tasks):
                    backward[t] = bwd
        found = []
        for t, tasks in threads.items():
            # the caller runs framework ops; a polling thread (NCCL's watchdog querying events) runs none
            if t.startswith("gpu:") or all(attrs[x]["op"] is None for x in tasks):
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
                        self.in_edges[n].append([last, "sync", 0.0])
                        self.in_edges[inside[0]].append([p, "sync", 0.0])  # and the backward began when called
                        found.append((p, n, last, inside[0]))
                        break
        return found

    def loader_waits(self, threads: dict[str, list[int]]) -> list[tuple[int, int, int | None, float]]:
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
        (``fallback_edges``: used by :func:`_cut` only where the task has no other parent in the window).

        A call's own cost is its shortest idle stretch among the trace's calls of the same range (a batch that was
        ready; where nothing traced runs inside the range, the range is one task and the stretch is all of it); a call
        waited where it idled longer than that by at least as much again, by LOADER_WAIT_SHARE of the time since the
        previous call, and by LOADER_WAIT_MIN_US (a shorter wait is within the call's jitter). Returns (workers' task,
        the task that waited, the task before the wait, the own cost) for :meth:`split_loader_gaps`."""
        attrs, ts, end = self.attrs, self.ts, self.end
        ranges = sorted((r for r in self.loader_ranges if fed_by_workers(r[3])), key=lambda r: r[1])
        starts = {t: [ts[x] for x in threads[t]] for t in {r[0] for r in ranges}}
        ends = {t: [end[x] for x in threads[t]] for t in starts}  # a thread's tasks do not overlap: ends sorted too
        calls = []  # (thread, range start, name, whole, idle, task after the idle, task before it)
        for thread, t0, t1, name in ranges:
            tasks = threads[thread]
            i = bisect.bisect_left(starts[thread], t0)
            whole = next((x for x in tasks[i : i + 2] if ts[x] == t0 and end[x] == t1 and attrs[x]["kind"] == "dataloader"), None)
            if whole is not None:
                calls.append((thread, t0, name, True, t1 - t0, whole, None))
                continue
            best = None
            for j in range(max(i, 1), len(tasks)):
                n = tasks[j]
                if ts[n] > t1:
                    break
                idle = ts[n] - max(end[tasks[j - 1]], t0)
                if best is None or idle > best[4]:
                    best = (thread, t0, name, False, idle, n, tasks[j - 1])
            if best is not None:
                calls.append(best)
        ready_cost: dict[tuple[str, str, bool], float] = {}
        for thread, _, name, whole, idle, _, _ in calls:
            key = (thread, name, whole)
            ready_cost[key] = min(ready_cost.get(key, math.inf), idle)
        waits: list[tuple[int, int, int | None, float]] = []
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
            a = self._cpu_attrs("dataloader", "DataLoader workers: batch", workers, self.trace.rank, None)
            a.update(phase="dataloader", region=name, duration=ready_at - t0)
            worker = self.add_task(a, t0, ready_at - t0)
            threads.setdefault(a["thread"], []).append(worker)
            self.add_edge(worker, consumer, "sync")
            if thread in previous_waited:
                self.add_edge(previous_waited[thread], worker, "thread")
            k = bisect.bisect_right(ends[thread], t0) - 1
            if k >= 0:
                self.fallback_edges[worker] = [threads[thread][k], "sync", t0 - ends[thread][k]]
            previous_waited[thread] = worker
            waits.append((worker, consumer, before, 0.0 if whole else own))
        return waits

    def split_loader_gaps(self, waits: list[tuple[int, int, int | None, float]]) -> None:
        """Of the idle stretch before the task that waited for a batch, the part a ready batch also takes (taking it
        from the workers' queue) stays the thread's, and follows the batch too (the edge's delay); the rest was the
        wait. A one-task range keeps that part as its duration (measure_delays cut it at the batch's arrival)."""
        attrs = self.attrs
        for worker, consumer, before, own in waits:
            if before is not None:
                attrs[before]["gap"] = own
            for e in self.in_edges[consumer]:
                if e[0] == worker:
                    e[2] = own

    def split_backward_gaps(self, waits: list[tuple[int, int, int, int]]) -> None:
        """The idle stretches were waits: the calling thread's from the call to the backward's start, then until the
        backward ended; the autograd thread's before it, for the call. Each becomes the delay of its edge (the call
        -> the first backward task, the last backward task -> the caller's next task), the threads keep no gap there,
        and replay stays exact."""
        attrs, ts, end = self.attrs, self.ts, self.end
        for p, n, last, first in waits:
            attrs[p]["gap"] = 0.0
            for x, source, lag in ((n, last, ts[n] - end[last]), (first, p, ts[first] - end[p])):
                for e in self.in_edges[x]:
                    if e[0] == source and e[1] == "sync":
                        e[2] = lag
                    elif e[1] == "thread" and x == first:
                        attrs[e[0]]["gap"] = 0.0  # the autograd thread was idle, waiting for the call

    def _cross_stream_source(self, v: int, s: float, streams_of_device: Any, ends_sorted: Any, ends_only: Any) -> int | None:  # fmt: skip
        thread = self.attrs[v]["thread"]
        best = None
        for other in streams_of_device.get(thread.split("/")[0], ()):
            if other == thread:
                continue
            i = bisect.bisect_right(ends_only[other], s) - 1
            if i >= 0:
                e, x = ends_sorted[other][i]
                if (
                    s - e <= CROSS_STREAM_WINDOW_US
                    and self.launch_ts[x] <= self.launch_ts[v]
                    and (best is None or e > self.end[best])
                ):
                    best = x
        return best

    # ---- phases ---------------------------------------------------------------------------------------------

    def finish_phases(self, steps: list[Step], step_of: list[str | None]) -> None:
        first_bwd: dict[str | None, float] = {}
        for task, a in enumerate(self.attrs):
            if a["phase"] == "backward" and a["kind"] in CPU_KINDS:
                key = step_of[task]
                if key not in first_bwd or self.ts[task] < first_bwd[key]:
                    first_bwd[key] = self.ts[task]
        for task, a in enumerate(self.attrs):
            if a["phase"] is None:
                limit = first_bwd.get(step_of[task])
                # a kernel is in the phase its launch call was in: when the CPU issued it, not when it ran
                issued = self.launch_ts[task]
                a["phase"] = "forward" if limit is None or issued < limit else "other"


def _device_properties(trace: Trace) -> dict[str, Any]:
    """What the trace says of its first GPU beyond the name (ROCm names every GPU alike; the SM count and memory
    tell them apart)."""
    if not trace.devices:
        return {}
    d = trace.devices[0]
    return {k: v for k, v in (("numSms", d.numSms), ("totalGlobalMem", d.totalGlobalMem)) if v is not None}


def _has_dims(shapes: Any) -> bool:
    """Whether recorded input dims name any tensor dimension (``[[]]``, a lone scalar, does not)."""
    return isinstance(shapes, list) and any(isinstance(d, list) and d for d in shapes)


@paused_gc()
def build_graph(trace: Trace, step: str | int | None = None) -> nx.DiGraph:
    """The dependency graph of the selected step(s) of ``trace``.

    ``step``: ``None`` picks a steady-state step; ``"all"`` every ProfilerStep in one graph;
    ``N`` or ``"ProfilerStep#N"`` that step; any other string names an annotation whose range is the window.
    """
    steps = select_steps(trace, "all" if step is None else step)
    b = _Builder(trace)
    b.cpu_tasks()
    b.gpu_tasks()
    if not b.attrs:
        raise TraceError(f"{trace.path}: the trace holds no CPU runtime calls, CPU ops or GPU activity to simulate")
    for a, t0, t1 in zip(b.attrs, b.ts, b.end):
        a["duration"] = t1 - t0
    threads = b.order_edges()
    b.copy_wait_edges(threads)
    b.sync_edges(threads)
    infer_waits = not any((e.args is not None and "Wait Event" in (e.args.cuda_sync_kind or "")) for e in trace.syncs) and any(
        call_role(e.name) == "wait_event" for e in trace.runtime
    )
    backward_waits = b.backward_waits(threads)
    loader_waits = b.loader_waits(threads)
    l0, g0 = b.measure_delays(threads, infer_waits)
    b.split_backward_gaps(backward_waits)
    b.split_loader_gaps(loader_waits)
    step_of = _assign_steps(b, steps)
    b.finish_phases(steps, step_of)
    if step is None:
        steps = _choose_default(b, steps, step_of)
    return _cut(b, steps, step_of, {"launch_latency_us": l0, "stream_gap_us": g0, "inferred_stream_waits": infer_waits})


def _choose_default(b: _Builder, steps: list[Step], step_of: list[str | None]) -> list[Step]:
    """The steady-state step among the steps that hold work."""
    busy = set(step_of)
    candidates = [s for s in steps if s.name in busy]
    return [default_step(candidates)] if candidates else steps[-1:]


def _assign_steps(b: _Builder, steps: list[Step]) -> list[str | None]:
    starts = [s.start for s in steps]
    step_of: list[str | None] = [None] * len(b.attrs)
    for task, a in enumerate(b.attrs):
        if a["kind"] in GPU_KINDS:
            continue
        i = bisect.bisect_right(starts, b.ts[task]) - 1
        if i >= 0 and b.ts[task] < steps[i].end:
            step_of[task] = steps[i].name
    for v, edges in enumerate(b.in_edges):
        if b.attrs[v]["kind"] not in GPU_KINDS:
            continue
        launcher = next((u for u, kind, _ in edges if kind == "launch"), None)
        if launcher is not None:
            step_of[v] = step_of[launcher]
        else:
            i = bisect.bisect_right(starts, b.ts[v]) - 1
            if i >= 0 and b.ts[v] < steps[i].end:
                step_of[v] = steps[i].name
    return step_of


def _cut(b: _Builder, steps: list[Step], step_of: list[str | None], delays: dict[str, Any]) -> nx.DiGraph:
    """The graph of the selected steps' tasks, with the work outside them finished before they start.

    Dependencies on tasks outside the window are dropped rather than turned into absolute release times: a task's
    start is explained by the graph alone (its parents, its thread, the delays measured on them), so a change to the
    step moves all of it. What held the window back in the trace (the previous step's kernels still queued, a
    thread idle since the step before) is reported in ``graph.graph["causality"]``, with the tasks whose start nothing
    in the graph explains."""
    chosen = {s.name for s in steps}
    selected = sorted((t for t in range(len(b.attrs)) if step_of[t] in chosen), key=b.ts.__getitem__)
    if not selected:
        names = ", ".join(sorted(chosen))
        raise TraceError(f"{b.trace.path}: no tasks in the selected step ({names})")
    origin = min(b.ts[t] for t in selected)
    index = {t: i for i, t in enumerate(selected)}
    g = nx.DiGraph()
    # Filled through networkx's adjacency dicts directly: add_nodes_from/add_edges_from copy every attribute
    # dict, which is a third of the build time on a 300k-task graph. The structure is the same.
    node_attrs, succ, pred = g._node, g._succ, g._pred
    for t in selected:
        a = b.attrs[t]
        a["start"] = b.ts[t] - origin
        a["step"] = step_of[t]
        release = a["release"]
        a["release"] = None if release is None else release - origin
        v = index[t]
        node_attrs[v] = a
        succ[v] = {}
        pred[v] = {}
    attrs, end = b.attrs, b.end
    cut_edges: dict[str, int] = {}
    held_back_us = 0.0  # how long the work outside the window held tasks back, in the trace
    unanchored, lead_us = 0, 0.0
    # a thread that runs no op only polls (NCCL's watchdog querying events): when it starts holds nothing back
    working = {attrs[t]["thread"] for t in selected if attrs[t]["op"] is not None or attrs[t]["kind"] not in CPU_KINDS}
    for t in selected:
        v = index[t]
        inside = 0
        for u, kind, lag in b.in_edges[t]:
            iu = index.get(u)
            if iu is not None:
                d = {"kind": kind} if kind in ORDER_KINDS else {"kind": kind, "lag": lag}
                succ[iu][v] = d
                pred[v][iu] = d
                inside += 1
            else:
                cut_edges[kind] = cut_edges.get(kind, 0) + 1
                ready = end[u] + (attrs[u]["gap"] if kind in ORDER_KINDS else lag)
                if attrs[t]["thread"] in working:
                    held_back_us = max(held_back_us, ready - origin)
        fallback = b.fallback_edges.get(t)
        if not inside and fallback is not None and (iu := index.get(fallback[0])) is not None:
            d = {"kind": fallback[1], "lag": fallback[2]}
            succ[iu][v] = d
            pred[v][iu] = d
            inside = 1
        if not inside and b.ts[t] - origin > UNANCHORED_TOLERANCE_US and attrs[t]["thread"] in working:
            unanchored += 1
            lead_us += b.ts[t] - origin
    first: dict[str | None, float] = {}
    last: dict[str | None, float] = {}
    for t in selected:
        key = step_of[t]
        if key not in first or b.ts[t] < first[key]:
            first[key] = b.ts[t]
        if key not in last or end[t] > last[key]:
            last[key] = end[t]
    step_info = _step_periods(b, steps, step_of, first, last)
    g.graph.update(
        trace=b.trace.path, rank=b.trace.rank, world_size=b.trace.world_size, device=b.trace.device_name,
        device_properties=_device_properties(b.trace),
        origin_us=origin, steps=step_info, delays=delays, warnings=list(b.trace.warnings),
        measured_us=sum(s["measured_us"] for s in step_info), recording=b.trace.recording,
        causality={
            "pinned_tasks": sum(1 for t in selected if attrs[t]["release"] is not None),
            "unanchored_tasks": unanchored, "unanchored_lead_us": lead_us,
            "cut_edges": cut_edges, "held_back_us": held_back_us,
        },
    )  # fmt: skip
    return g


def _step_periods(
    b: _Builder, steps: list[Step], step_of: list[str | None], first: dict[Any, float], last: dict[Any, float]
) -> list[dict[str, Any]]:
    """Each selected step's measured time as a period: from the end of the work issued before it (the step before)
    to its own end, or from its first start where that work had ended by then. Where the CPU runs ahead of the GPU a
    step's span (its first CPU task to its last kernel) holds several periods; the period is what a training run
    pays per step."""
    chosen = [s for s in steps if s.name in first]
    chosen.sort(key=lambda s: last[s.name])
    window = min(s.start for s in chosen)
    before = -math.inf
    for t in range(len(b.attrs)):
        if step_of[t] not in last and b.launch_ts[t] < window and b.end[t] > before:
            before = b.end[t]
    out = []
    begin = max(before, first[chosen[0].name])
    for s in chosen:
        out.append({"name": s.name, "measured_us": last[s.name] - begin, "span_us": last[s.name] - first[s.name]})
        begin = last[s.name]  # the next step's period counts the idle time between the two: the graph holds it
    return out
