"""CPU overheads T1..T5 and the single-GPU E2E estimate (Lin et al., HiPC 2022) on hand-built traces whose every
gap is known, and on the shared real traces."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from synth import make_trace, write_trace

from daydream.errors import DaydreamError
from daydream.graph import GPU_KINDS, build_graph
from daydream.perf.accuracy_report import trace_files
from daydream.perf.cpu.overheads import (
    DEFAULT_LAUNCH_US,
    Item,
    Kernel,
    Launch,
    Overheads,
    Stat,
    accuracy,
    check_iterations,
    extract_overheads,
    graph_items,
    launch_us,
    op_overhead_us,
    predict_e2e,
    run_algorithm,
    summarize,
    top_level_items,
    whole_iterations,
)
from daydream.trace import Trace, load_trace
from daydream.trace.runtime_calls import call_role, copy_waits, host_waits
from daydream.trace.schema import Event, EventArgs
from daydream.trace.steps import Step, profiler_steps


def _ev(cat: str, name: str, ts: float, dur: float, tid: int = 1, corr: int | None = None) -> Event:
    return Event(ph="X", cat=cat, name=name, pid=1, tid=tid, ts=ts, dur=dur, args=EventArgs(correlation=corr))


def _gpu(name: str, ts: float, dur: float, corr: int, cat: str = "kernel") -> Event:
    return Event(
        ph="X", cat=cat, name=name, pid=0, tid=7, ts=ts, dur=dur, args=EventArgs(correlation=corr, stream=7, device=0)
    )


def _trace(events: list[Event]) -> Trace:
    """A Trace sorted into families as the loader does (each family by start, longest first)."""
    t = Trace(path="synthetic")
    for e in events:
        family = {"cpu_op": t.cpu_ops, "cuda_runtime": t.runtime, "user_annotation": t.annotations}.get(e.cat, t.gpu)  # type: ignore[arg-type]
        family.append(e)
    for fam in (t.cpu_ops, t.runtime, t.annotations, t.gpu):
        fam.sort(key=lambda e: (e.ts, -e.dur))  # type: ignore[operator]
    return t


def hand_trace() -> Trace:
    """One thread (times in us):

    A aten::linear [0,100): aten::addmm [10,90); launch [20,30) -> K1 [35,135); cudaStreamIsCapturing [40,41)
                            (no GPU work); launch [50,58) -> K2 [136,156)
    B aten::relu   [120,150): launch [130,140) -> K3 [157,167)
      Optimizer.zero_grad annotation [152,158), in the B -> C gap
    C aten::zeros  [160,190): aten::empty [165,170), aten::zero_ [172,180); no launch
    D aten::item   [200,300): cudaMemcpyAsync [210,280) -> DtoH pageable copy [260,270) (a blocking copy);
                              cudaStreamSynchronize [285,290)
    data loading [320,400) with aten::stack [330,350) inside; runs on to E's start (420)
    E aten::add_   [420,440): launch [425,433) -> K4 [440,450)
    and a watchdog thread that only polls (cudaEventQuery [105,106)): not the training loop.
    """
    rt, op = "cuda_runtime", "cpu_op"
    return _trace(
        [
            _ev(op, "aten::linear", 0, 100),
            _ev(op, "aten::addmm", 10, 80),
            _ev(rt, "cudaLaunchKernel", 20, 10, corr=1),
            _gpu("K1", 35, 100, 1),
            _ev(rt, "cudaStreamIsCapturing", 40, 1, corr=2),
            _ev(rt, "cudaLaunchKernel", 50, 8, corr=3),
            _gpu("K2", 136, 20, 3),
            _ev(op, "aten::relu", 120, 30),
            _ev(rt, "cudaLaunchKernel", 130, 10, corr=4),
            _gpu("K3", 157, 10, 4),
            _ev("user_annotation", "Optimizer.zero_grad#SGD.zero_grad", 152, 6),
            _ev(op, "aten::zeros", 160, 30),
            _ev(op, "aten::empty", 165, 5),
            _ev(op, "aten::zero_", 172, 8),
            _ev(op, "aten::item", 200, 100),
            _ev(rt, "cudaMemcpyAsync", 210, 70, corr=5),
            _gpu("Memcpy DtoH (Device -> Pageable)", 260, 10, 5, cat="gpu_memcpy"),
            _ev(rt, "cudaStreamSynchronize", 285, 5, corr=6),
            _ev("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 320, 80),
            _ev(op, "aten::stack", 330, 20),
            _ev(op, "aten::add_", 420, 20),
            _ev(rt, "cudaLaunchKernel", 425, 8, corr=7),
            _gpu("K4", 440, 10, 7),
            _ev(rt, "cudaEventQuery", 105, 1, tid=3, corr=8),
        ]
    )


def test_top_level_units() -> None:
    items, outside = top_level_items(hand_trace())
    assert [(it.kind, it.name) for it in items] == [
        ("op", "aten::linear"),
        ("op", "aten::relu"),
        ("op", "aten::zeros"),
        ("op", "aten::item"),
        ("dataloader", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"),
        ("op", "aten::add_"),
    ]
    assert outside == [152]  # the annotation; the watchdog thread is not swept
    linear, _, _, item, loading, _ = items
    assert [ln.ts for ln in linear.launches] == [20, 50]  # cudaStreamIsCapturing issued nothing: not a launch
    assert linear.inner == (10, 20, 40, 50)
    k1 = linear.launches[0].kernels[0]
    assert (k1.name, k1.op, k1.stream, k1.duration_us) == ("K1", "aten::addmm", "7", 100.0)
    assert [(ln.name, ln.waits) for ln in item.launches] == [("cudaMemcpyAsync", True), ("cudaStreamSynchronize", True)]
    assert (loading.ts, loading.end) == (320, 420)  # data loading runs on to the next op


def test_extract_overheads_by_hand() -> None:
    ov = extract_overheads(hand_trace())  # 2 us per CPU event, 4 us per GPU event inside each interval
    t2 = {k: v.mean_us for k, v in ov.t2.items()}
    assert t2 == {"aten::linear": 20 - 2, "aten::relu": 10, "aten::item": 10, "aten::add_": 5}  # addmm starts in A's T2
    assert {k: v.mean_us for k, v in ov.t3.items()} == {
        "aten::linear": 42,
        "aten::relu": 10,
        "aten::item": 10,
        "aten::add_": 7,
    }
    # cudaStreamIsCapturing starts between A's launches; D's copy and sync are boundaries with 5 us between them
    assert {k: v.mean_us for k, v in ov.t5.items()} == {"aten::linear": 20 - 2, "aten::item": 5}
    # launch durations 10, 8, 10, 8 less one GPU event each; the blocking copy and the sync give no T4
    assert ov.t4 == {"cudaLaunchKernel": Stat(5.0, 4, 5.0, 4)}
    assert ov.cpu_only == {"aten::zeros": Stat(30 - 2 * 2, 1, 26, 1)}
    # T1: A->B 20, B->C 10 less the annotation inside, C->D 10; gaps next to data loading are not op overhead
    assert ov.t1 == Stat(pytest.approx((20 + 8 + 10) / 3), 3, 10, 3)  # type: ignore[arg-type]
    assert ov.t1_us == pytest.approx(38 / 3)
    assert ov.launches == {"aten::linear": 2, "aten::relu": 1, "aten::item": 1, "aten::add_": 1}


def test_extract_without_correction() -> None:
    ov = extract_overheads(hand_trace(), profiler_correction=False)
    assert ov.t2["aten::linear"].mean_us == 20
    assert ov.t5["aten::linear"].mean_us == 20
    assert ov.t4["cudaLaunchKernel"].mean_us == 9  # (10 + 8 + 10 + 8) / 4
    assert ov.cpu_only["aten::zeros"].mean_us == 30
    assert ov.t1_us == pytest.approx(40 / 3)
    custom = extract_overheads(hand_trace(), cpu_event_us=1.0, gpu_event_us=3.0)  # platform-dependent constants
    assert (custom.t2["aten::linear"].mean_us, custom.t4["cudaLaunchKernel"].mean_us) == (19, 6)


def test_correction_never_goes_negative() -> None:
    rt, op = "cuda_runtime", "cpu_op"
    crowded = _trace(
        [
            _ev(op, "aten::crowded", 0, 12),
            *[_ev(op, "aten::view", t, 0) for t in (1, 2, 3)],  # three events in a 4 us T2: 6 us of correction
            _ev(rt, "cudaLaunchKernel", 4, 3, corr=1),  # 3 us long, one GPU event (4 us)
            _gpu("K", 10, 5, 1),
            _ev(op, "aten::noop", 20, 1),
            _ev(op, "aten::view", 20, 0),
            _ev(op, "aten::view", 20.5, 0),  # 1 us op with two nested events
        ]
    )
    ov = extract_overheads(crowded)
    assert ov.t2["aten::crowded"].mean_us == 0
    assert ov.t4["cudaLaunchKernel"].mean_us == 0
    assert ov.cpu_only["aten::noop"].mean_us == 0
    assert ov.t3["aten::crowded"].mean_us == 5  # 12 - 7, nothing inside
    assert ov.t1_us == 8  # 20 - 12


def test_outlier_removal() -> None:
    # Q1 = 11, Q3 = 13 (linear interpolation), whiskers [8, 16]: 100 goes, the rest stays
    assert summarize([10, 11, 12, 13, 100]) == Stat(11.5, 4, 12, 5)
    assert summarize([1, 2, 1000]) == Stat(pytest.approx(1003 / 3), 3, 2, 3)  # type: ignore[arg-type]  # too few for quartiles
    assert summarize([]).count == 0
    low = summarize([0.0] + [50.0] * 4 + [51.0] * 4)  # a low outlier goes too
    assert (low.count, low.raw_count, low.mean_us) == (8, 9, 50.5)


def _table() -> Overheads:
    return Overheads(
        t1=Stat(5, 10, 5, 10),
        t2={"A": Stat(10, 3, 10, 3), "B": Stat(2, 3, 2, 3), "D": Stat(3, 3, 3, 3), "E": Stat(1, 3, 1, 3)},
        t3={"A": Stat(4, 3, 4, 3), "B": Stat(2, 3, 2, 3), "D": Stat(1, 3, 1, 3), "E": Stat(1, 3, 1, 3)},
        t4={"cudaLaunchKernel": Stat(6, 9, 6, 9), "cudaMemcpyAsync": Stat(8, 9, 8, 9)},
        t5={"A": Stat(3, 3, 3, 3), "D": Stat(2, 3, 2, 3)},
        cpu_only={"C": Stat(20, 3, 20, 3)},
        launches={"A": 2, "B": 1},
    )


def test_lookups_and_fallbacks() -> None:
    ov = _table()
    assert launch_us(ov) == 6
    assert launch_us(ov, "hipLaunchKernel") == 6  # the same call on the other vendor's runtime
    assert launch_us(ov, "cudaMemsetAsync") == 7  # never measured: median over the measured functions (6, 8)
    assert launch_us(Overheads()) == DEFAULT_LAUNCH_US  # nothing measured: the paper's 10 us
    assert op_overhead_us(ov, "A", 2) == 10 + 4 + 3 + 2 * 6  # T2 + T3 + (n-1) T5 + n T4
    assert op_overhead_us(ov, "A") == 29  # n from the trace: A made 2 launches
    assert op_overhead_us(ov, "A", 1, "cudaMemcpyAsync") == 10 + 4 + 8
    assert op_overhead_us(ov, "C", 0) == 20  # no kernels: its whole CPU time
    # Never seen: pooled medians over the ops, T2 of (10, 2, 3, 1) = 2.5, T3 of (4, 2, 1, 1) = 1.5, T5 of (3, 2) = 2.5
    assert op_overhead_us(ov, "X", 1) == 2.5 + 1.5 + 6
    assert op_overhead_us(ov, "X", 2) == 2.5 + 1.5 + 2.5 + 2 * 6
    assert op_overhead_us(ov, "X") == 20  # no launches known: cpu-only median
    with pytest.raises(DaydreamError):
        op_overhead_us(ov, "A", -1)


def test_json_round_trip() -> None:
    ov = extract_overheads(hand_trace())
    back = Overheads.from_dict(json.loads(json.dumps(ov.to_dict())))
    assert back == ov
    assert back.to_dict()["t4"]["cudaLaunchKernel"] == {
        "mean_us": 5.0,
        "count": 4,
        "raw_median_us": 5.0,
        "raw_count": 4,
    }
    for bad in (
        {},
        {"t1": {"mean_us": "fast"}},
        {"t1": Stat(1, 1, 1, 1).to_dict(), "t2": {"A": {"mean_us": 1}}},
        {"t1": 3},
    ):
        with pytest.raises(DaydreamError, match="malformed overhead table"):
            Overheads.from_dict(bad)


def test_e2e_by_hand() -> None:
    """Algorithm 1 over the hand trace with the table of ``_table`` (ops renamed A..E to match it)."""
    names = {"aten::linear": "A", "aten::relu": "B", "aten::zeros": "C", "aten::item": "D", "aten::add_": "E"}
    items = [
        Item(it.kind, names.get(it.name, it.name), it.ts, it.end, it.launches, it.inner)
        for it in top_level_items(hand_trace())[0]
    ]
    e = run_algorithm(items, _table())
    # A: cpu 5+10=15; K1 starts max(0+1, 15+6/2)=18, ends 118; cpu 21, +T5 24; K2 max(119, 27)=119 -> 139; cpu 30, +T3
    # 34
    # B: cpu 41; K3 max(140, 44)=140 -> 150; cpu 47, +T3 49.   C: cpu 49+5+20 = 74
    # D: cpu 82; copy max(151, 86)=151 -> 161; cpu 90, waits for it: 161; +T5 163; the sync: 163; +T3 164
    # data loading: +100 -> 264.   E: cpu 270; K4 max(162, 273)=273 -> 283; cpu 276, +T3 277
    assert (e.cpu_us, e.gpu_us, e.predicted_us) == (277, 283, 283)
    assert (e.gpu_active_us, e.ops, e.kernels) == (150, 5, 5)
    # Repeated: the next pass starts at cpu 277 with the GPU busy until 283 and advances both by 277
    assert e.period_us == pytest.approx(277)
    paper = run_algorithm(items, _table(), model_waits=False)
    # Without waits D ends at cpu 93, data loading 193, E: cpu 199, K4 max(162, 202)=202 -> 212, cpu 206
    assert (paper.cpu_us, paper.gpu_us, paper.predicted_us) == (206, 212, 212)


def _op(name: str, *kernel_us: float, ts: float = 0) -> Item:
    kernels = [
        Launch("cudaLaunchKernel", ts, ts + 1, (Kernel("k", "gpu", "other", "7", ts, t, name),), False, 1)
        for t in kernel_us
    ]
    return Item("op", name, ts, ts + 1, tuple(kernels))


def test_period_of_a_gpu_bound_iteration() -> None:
    ov = _table()
    items = [_op("A", 100, 20), Item("op", "C", 10, 20)]
    e = run_algorithm(items, ov)
    # pass 1 as in test_e2e_by_hand up to A's end (cpu 34, GPU until 139), then C: cpu 59
    assert (e.cpu_us, e.gpu_us, e.predicted_us) == (59, 139, 139)
    # repeated, the GPU is the bottleneck: 100 + 20 + the 1 us gap before each kernel
    assert e.period_us == pytest.approx(122)
    cpu_bound = run_algorithm([_op("A", 1, 1), Item("op", "C", 10, 20)], ov)
    # K1 at max(1, 18) -> 19, K2 at max(20, 27) -> 28: the CPU (59) decides, once or repeated
    assert (cpu_bound.predicted_us, cpu_bound.period_us) == (59, pytest.approx(59))


def test_kernel_model_replaces_traced_times() -> None:
    seen: list[Kernel] = []

    def doubled(k: Kernel) -> float:
        seen.append(k)
        return 2 * k.duration_us

    trace = hand_trace()
    e = predict_e2e(trace, _table(), kernel_us=doubled, step=Step("all", 0, 1000))
    assert e.gpu_active_us == 300
    assert [(k.name, k.op) for k in seen] == [
        ("K1", "aten::addmm"),
        ("K2", "aten::addmm"),
        ("K3", "aten::relu"),
        ("Memcpy DtoH (Device -> Pageable)", "aten::item"),
        ("K4", "aten::add_"),
    ]
    assert (e.measured_us, e.step) == (1000, "all")


def test_graph_input_matches_trace_input(tmp_path: Path) -> None:
    trace = load_trace(write_trace(tmp_path / "t.json", make_trace(steps=4)))
    ov = extract_overheads(trace, profiler_correction=False)
    for step in profiler_steps(trace)[:3]:
        from_trace = predict_e2e(trace, ov, step=step)
        from_graph = predict_e2e(build_graph(trace, step.name, context=False), ov)  # the step alone, as the sweep
        assert from_graph.predicted_us == pytest.approx(from_trace.predicted_us)
        assert from_graph.period_us == pytest.approx(from_trace.period_us)
        assert (from_graph.ops, from_graph.kernels) == (from_trace.ops, from_trace.kernels) == (6, 5)
    # The graph after a transform: a faster GEMM shortens what the GPU does
    g = build_graph(trace, "2", context=False)
    for n, a in g.nodes(data=True):
        if "sgemm_128x64" in a["name"]:
            g.nodes[n]["duration"] = 20.0
    assert predict_e2e(g, ov).gpu_active_us == predict_e2e(trace, ov, step=profiler_steps(trace)[1]).gpu_active_us - 180


def test_graph_splits_back_to_back_ops() -> None:
    """A row of one op name is one run in a graph; gaps near T3 + T1 + T2 cut it, gaps near T5 do not."""
    import networkx as nx

    g = nx.DiGraph()
    starts = [0, 5, 60, 65]  # A's two launches, 5 us apart (T5 = 3); then 55 us (T3 + T1 + T2 = 19): a new A
    for i, t in enumerate(starts):
        g.add_node(i, kind="cpu", name="cudaLaunchKernel", thread="cpu:1/1", start=t, duration=1.0, top_op="A", op="A")
        g.add_node(10 + i, kind="gpu", name=f"k{i}", thread="gpu:0/7", start=t + 2, duration=10.0, op="A")
        g.add_edge(i, 10 + i, kind="launch", lag=1.0)
    e = predict_e2e(g, _table())
    assert (e.ops, e.kernels) == (2, 4)
    assert [len(it.launches) for it in graph_items(g)] == [4]  # without overheads to tell, the run stays one op
    # A graph from the builder numbers each top-level op call (top_op_id): its runs are the ops, nothing to guess
    for i, op_id in enumerate([0, 0, 0, 1]):
        g.nodes[i]["top_op_id"] = op_id
    assert [len(it.launches) for it in graph_items(g)] == [3, 1]
    assert [len(it.launches) for it in graph_items(g, _table())] == [3, 1]


def test_graph_input_matches_trace_input_on_a_real_trace(shared_traces: Path) -> None:
    """The graph of one step gives the ops, launches and waits of the trace sweep: the same estimate. (loss.backward()
    waiting for the autograd thread, a `sync` edge between CPU threads in the graph, is no wait for the device.)"""
    trace = load_trace(shared_traces / "hta/nccl_parser_config_nccl_data.json.gz")
    ov = extract_overheads(trace, profiler_correction=False)
    for step in profiler_steps(trace):
        from_trace = predict_e2e(trace, ov, step=step)
        from_graph = predict_e2e(build_graph(trace, step.name, context=False), ov)
        assert (from_graph.ops, from_graph.kernels) == (from_trace.ops, from_trace.kernels)
        assert from_graph.period_us == pytest.approx(from_trace.period_us)


# (call, copy it issues or None, copy start, copy end, whether the call waits). The call runs [30, 120), after a
# kernel [20, 100) on the same stream: a synchronize has pending work to wait for.
WAIT_CASES = [
    ("cudaLaunchKernel", None, 0, 0, False),
    ("cudaMemsetAsync", None, 0, 0, False),
    ("cudaEventQuery", None, 0, 0, False),
    ("cudaStreamWaitEvent", None, 0, 0, False),  # the stream waits, not the host
    ("cudaEventRecord", None, 0, 0, False),
    ("cudaStreamSynchronize", None, 0, 0, True),
    ("cudaStreamQuery_blocking", None, 0, 0, True),  # spins until the stream drains
    ("cudaEventSynchronize", None, 0, 0, True),
    ("cudaDeviceSynchronize", None, 0, 0, True),
    ("hipDeviceSynchronize", None, 0, 0, True),
    ("cudaFree", None, 0, 0, True),
    ("cudaMemcpy", "Memcpy HtoD (Pinned -> Device)", 100, 110, True),
    ("hipMemcpyWithStream", "Memcpy DtoH (Device -> Pinned)", 100, 110, True),
    ("cuMemcpyDtoH_v2", "Memcpy DtoH (Device -> Pinned)", 100, 110, True),
    # pageable host memory makes an async copy synchronous, in both directions, even where the call returns first
    ("cudaMemcpyAsync", "Memcpy HtoD (Pageable -> Device)", 150, 160, True),
    ("cudaMemcpyAsync", "Memcpy DtoH (Device -> Pageable)", 100, 110, True),
    ("hipMemcpyAsync", "Memcpy HtoD (Pageable -> Device)", 150, 160, True),
    ("cudaMemcpyAsync", "Memcpy HtoD (Pinned -> Device)", 150, 160, False),  # pinned, returned before it ran
    ("cudaMemcpyAsync", "Memcpy DtoH (Device -> Pinned)", 100, 110, True),  # returned only once it had ended
]


def _split_calls(graph: Any) -> set[Any]:
    """The CPU calls the builder split into the issue and a `NAME [wait]` task (which starts where the issue ends)."""
    waits = {
        (a["thread"], a["name"], round(a["start"], 3))
        for _, a in graph.nodes(data=True)
        if a["name"].endswith(" [wait]")
    }
    return {
        n
        for n, a in graph.nodes(data=True)
        if a["kind"] == "cpu" and (a["thread"], a["name"] + " [wait]", round(a["start"] + a["duration"], 3)) in waits
    }


def _queue_waited_calls(graph: Any) -> set[Any]:
    """The launch calls the builder found waiting for room in the launch queue: a `sync` edge from a GPU task into a
    call that issues work (trace.runtime_calls.LaunchQueue)."""
    return {
        v
        for u, v, kind in graph.edges(data="kind")
        if kind == "sync" and graph.nodes[u]["kind"] in GPU_KINDS and call_role(graph.nodes[v]["name"]) is None
    }


def _graph_waits(graph: Any, task: Any) -> bool:
    """Whether the graph makes a CPU call wait for the device: the builder split it into the issue and a
    `NAME [wait]` task, or it waits for GPU work (a `sync` edge)."""
    synced = any(
        e["kind"] == "sync" and graph.nodes[u]["kind"] in GPU_KINDS for u, _, e in graph.in_edges(task, data=True)
    )
    return task in _split_calls(graph) or synced


@pytest.mark.parametrize(("call", "copy", "copy_ts", "copy_end", "waits"), WAIT_CASES)
def test_waits_as_in_the_graph(call: str, copy: str | None, copy_ts: float, copy_end: float, waits: bool) -> None:
    """A runtime call waits in the overhead model exactly when it waits in the graph: both read
    daydream.trace.runtime_calls."""
    rt = "cuda_runtime"
    events = [
        _ev("cpu_op", "aten::op", 0, 300),
        _ev(rt, "cudaLaunchKernel", 10, 5, corr=1),
        _gpu("K", 20, 80, 1),
        _ev(rt, call, 30, 90, corr=2),
        _ev(rt, "cudaLaunchKernel", 200, 5, corr=3),
        _gpu("K2", 210, 10, 3),
    ]
    if copy is not None:
        events.append(_gpu(copy, copy_ts, copy_end - copy_ts, 2, cat="gpu_memcpy"))
    trace = _trace(events)
    table = host_waits(call) or (copy is not None and copy_waits(call, copy, 30, 120, copy_ts, copy_end))
    assert table == waits
    (op,) = top_level_items(trace)[0]
    swept = {ln.name: ln.waits for ln in op.launches}
    assert swept.get(call, False) == waits  # a call that neither waits nor issues work is no launch
    g = build_graph(trace)
    (task,) = [n for n, a in g.nodes(data=True) if a["name"] == call and a["start"] + g.graph["origin_us"] == 30]
    assert _graph_waits(g, task) == waits
    (item,) = graph_items(g)
    assert {ln.name: ln.waits for ln in item.launches}.get(call, False) == waits


def test_waits_as_in_the_graph_on_real_traces(shared_traces: Path) -> None:
    """Every runtime call of every shared trace that the trace sweep and the graph both see waits in both or in
    neither, as the table says (a synchronous call, or a copy call the builder split into the issue and its wait),
    or the launch queue (a launch that waited for room in it)."""
    seen: set[str] = set()
    for path in trace_files([shared_traces]):
        trace = load_trace(path)
        if not trace.runtime or not trace.cpu_ops:
            continue
        g = build_graph(trace, "all")
        origin = g.graph["origin_us"]
        swept = {
            (ln.name, round(ln.ts - origin, 3)): ln.waits for it in top_level_items(trace)[0] for ln in it.launches
        }
        from_graph = {(ln.name, round(ln.ts, 3)): ln.waits for it in graph_items(g) for ln in it.launches}
        split = _split_calls(g) | _queue_waited_calls(g)
        for n, a in g.nodes(data=True):
            if a["kind"] != "cpu" or a["name"].endswith(" [wait]") or a["name"] == a.get("op"):
                continue
            key = (a["name"], round(a["start"], 3))
            table = host_waits(a["name"]) or n in split
            if key in swept:
                assert swept[key] == table, (path.name, key)
                assert from_graph.get(key, False) == table, (path.name, key)
                if table:
                    seen.add(a["name"])
            elif table:  # a call that waited is always a launch, wherever the sweep looked
                assert key in from_graph and from_graph[key], (path.name, key)
    # what the shared traces exercise: synchronizes, synchronous copies, async copies that blocked, and launches
    # that waited for the launch queue (param/resnet_kineto's first iteration)
    waiting = {"cudaStreamSynchronize", "cudaEventSynchronize", "cudaDeviceSynchronize", "cudaFree", "cudaMemcpy"}
    assert waiting | {"cudaMemcpyAsync", "hipMemcpyWithStream", "cudaLaunchKernel"} <= seen


def test_iterations_between_optimizer_steps(tmp_path: Path) -> None:
    doc = make_trace(steps=4)
    doc["traceEvents"] = [e for e in doc["traceEvents"] if not str(e.get("name", "")).startswith("ProfilerStep#")]
    trace = load_trace(write_trace(tmp_path / "t.json", doc))
    steps = whole_iterations(trace)
    # from the end of one optimizer step (at 1000k + 600) to the next; the window from the trace's start is dropped
    assert [(s.name, s.start, s.end) for s in steps] == [
        (f"iteration#{k}", 1000.0 * k + 600, 1000.0 * (k + 1) + 600) for k in (1, 2, 3)
    ]
    checks = check_iterations(trace)
    assert [c.step for c in checks] == ["iteration#1", "iteration#2", "iteration#3"]
    assert all(c.measured_us == 1000 for c in checks)


def test_check_needs_two_iterations(tmp_path: Path) -> None:
    trace = load_trace(write_trace(tmp_path / "t.json", make_trace(steps=1)))
    with pytest.raises(DaydreamError, match="needs two"):
        check_iterations(trace)


# Measured on the shared traces (traced kernel times, overheads from the other half of the iterations, no profiler
# correction): linear_kineto 10.59% (n=39), nccl_parser 8.08% (n=3), resnet_kineto 2.06% (n=29).
MEASURED_GMAE = {
    "param/linear_kineto.json.gz": (10.59, 39),
    "hta/nccl_parser_config_nccl_data.json.gz": (8.08, 3),
    "param/resnet_kineto.json.gz": (2.06, 29),
}


def test_e2e_accuracy_on_real_traces(shared_traces: Path) -> None:
    results = accuracy([shared_traces / p for p in MEASURED_GMAE])
    for (path, (measured, n)), acc in zip(MEASURED_GMAE.items(), results):
        assert acc.name == "e2e-overheads/" + Path(path).name.removesuffix(".json.gz")
        assert acc.n == n
        assert acc.gmae_pct < measured + 2.0, (path, acc.gmae_pct)


def test_real_trace_overheads(shared_traces: Path) -> None:
    trace = load_trace(shared_traces / "hta/nccl_parser_config_nccl_data.json.gz")
    raw = extract_overheads(trace, profiler_correction=False)
    corrected = extract_overheads(trace)
    assert 15 < raw.t1_us < 30 and raw.t1.count > 3000  # ~22 us between ops on this A100 host
    assert set(raw.t4) == {"cudaLaunchKernel", "cudaLaunchKernelExC", "cudaMemcpyAsync", "cudaMemsetAsync"}
    # one GPU event per launch: the corrected launch is the raw one less about 4 us (less where that would go below 0)
    assert 0 < raw.t4["cudaLaunchKernel"].mean_us - corrected.t4["cudaLaunchKernel"].mean_us <= 4 + 1e-9
    # every ResNet convolution layer launches kernels, and the table prices it by name
    assert raw.launches["aten::conv2d"] >= 1
    assert op_overhead_us(raw, "aten::conv2d") > op_overhead_us(raw, "aten::conv2d", 0) > 0
    for c in check_iterations(trace):
        assert c.predicted_active_us == pytest.approx(
            c.measured_active_us
        )  # every kernel placed once, at its traced time
