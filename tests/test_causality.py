"""The graph explains every start: halving all work halves the prediction, a change anywhere in the step moves it,
calls that wait on the GPU are dependencies on that GPU work, and every dependency kind is needed on real traces."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pytest
from test_real_traces import GPU_TRACES

from daydream import build_graph, load_trace, simulate
from daydream.api.replay import edges_by_kind, replay, replay_graph
from daydream.api.whatif import run_whatif
from daydream.commands.cli import main
from daydream.dsl import Session
from daydream.graph import GPU_KINDS

# Traces whose steps wait on the GPU through synchronize calls or blocking copies.
SYNCING_TRACES = [n for n in GPU_TRACES if "triton" not in n and "execution_trace" not in n and "simple_add" not in n]


def halved_ratio(graph: nx.DiGraph) -> float:
    """The prediction after halving every task's duration and gap and every dependency's delay, over the one
    before (../shared/tools/half_test.py): 0.5 for a graph whose timing comes from its own work and delays."""
    base = simulate(graph).makespan()
    for _, a in graph.nodes(data=True):
        a["duration"] *= 0.5
        a["gap"] = a.get("gap", 0.0) * 0.5
    for _, _, e in graph.edges(data=True):
        if e.get("lag"):
            e["lag"] *= 0.5
    return simulate(graph).makespan() / base


@pytest.mark.parametrize("step", [None, "all"])
@pytest.mark.parametrize("name", GPU_TRACES)
def test_half_test(shared_traces: Path, name: str, step: str | None) -> None:
    graph = build_graph(load_trace(shared_traces / name), step)
    assert halved_ratio(graph) == pytest.approx(0.5, rel=0.01)
    assert graph.graph["causality"].pinned_tasks == 0


def test_forward_pass_moves_the_prediction(shared_traces: Path) -> None:
    """The forward pass of the default step was pinned behind a 103 ms release time: removing it changed nothing."""
    graph = build_graph(load_trace(shared_traces / "hta/nccl_parser_config_nccl_data.json.gz"))
    session = Session(graph)
    baseline = session.baseline_us
    measured_step = graph.graph["steps"][-1].name  # after its context step, whose forward goes too
    forward_cpu = sum(
        a["duration"]
        for _, a in graph.nodes(data=True)
        if a["phase"] == "forward" and a["kind"] not in GPU_KINDS and a["step"] == measured_step
    )
    session.execute('scale (select where phase == "forward") by 0')
    predicted = session.predicted_us
    assert baseline == pytest.approx(219818.14, abs=1.0)  # ProfilerStep#5's period, as under --step all
    # The step is CPU-bound (Python time between the calls): the forward's calls, 28 ms, leave the critical path.
    assert forward_cpu == pytest.approx(28000, rel=0.01)
    assert baseline - predicted > 0.95 * forward_cpu


def _event(cat: str, name: str, tid: Any, ts: float, dur: float, pid: Any = 1, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _blocking_trace(tmp_path: Path, call: str, copy: str | None, sync: bool = False) -> Path:
    """A 1000 us kernel, then a call that waits behind it, then a last kernel. Times in us:

    launch K1 [0, 10] -> K1 [12, 1012]
    CALL [20, 1040]: a copy [1013, 1033] queued behind K1 (``copy``), or a stream synchronize (``sync``)
    launch K2 [1045, 1055] -> K2 [1057, 1157]
    """
    events = []
    corr = 0

    def launch(name: str, ts: float, dur: float, gpu_name: str, gts: float, gdur: float, cat: str = "kernel") -> None:
        nonlocal corr
        corr += 1
        events.append(_event("cuda_runtime", name, 1, ts, dur, correlation=corr))
        events.append(_event(cat, gpu_name, 7, gts, gdur, pid=0, device=0, stream=7, correlation=corr))

    launch("cudaLaunchKernel", 0, 10, "volta_sgemm_128x64_nn", 12, 1000)
    if copy is not None:
        launch(call, 20, 1020, copy, 1013, 20, cat="gpu_memcpy")
    else:
        corr += 1
        events.append(_event("cuda_runtime", call, 1, 20, 1020, correlation=corr))
        if sync:
            events.append(_event("cuda_sync", "Stream Sync", 7, 1012, 28, pid=0, correlation=corr, stream=7, device=0))
    launch("cudaLaunchKernel", 1045, 10, "void at::native::vectorized_elementwise_kernel<relu>", 1057, 100)
    path = tmp_path / "blocking.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


@pytest.mark.parametrize(
    ("call", "copy", "sync"),
    [
        ("cudaMemcpy", "Memcpy DtoH (Device -> Pinned)", False),  # a synchronous copy
        ("cudaMemcpyAsync", "Memcpy DtoH (Device -> Pageable)", False),  # .item(): a copy to pageable memory
        ("hipMemcpyWithStream", "Memcpy DtoH (Device -> Pinned)", False),  # its HIP form
        ("cudaStreamSynchronize", None, True),  # with the cuda_sync event naming the stream
        ("cudaStreamSynchronize", None, False),  # an older trace: the stream is inferred
        ("cudaDeviceSynchronize", None, False),
        ("hipDeviceSynchronize", None, False),
    ],
)
def test_a_call_that_waits_returns_when_the_gpu_work_ends(
    tmp_path: Path, call: str, copy: str | None, sync: bool
) -> None:
    graph = build_graph(load_trace(_blocking_trace(tmp_path, call, copy, sync)))
    tl = simulate(graph)
    names = [graph.nodes[n]["name"] for n in tl.nodes]
    returns = max(i for i, name in enumerate(names) if name.startswith(call))  # the call, or its wait half
    assert tl.end[returns] == pytest.approx(1040.0)
    assert tl.makespan() == pytest.approx(1157.0)
    session = Session(graph)
    session.execute('scale (select gpu where name ~ "sgemm") by 0.5')
    after = session.predict()
    # K1 ends 500 us sooner; so do the copy queued behind it, the call that waited for it, and everything after.
    assert after.end[returns] == pytest.approx(1040.0 - 500.0)
    assert after.makespan() == pytest.approx(1157.0 - 500.0)


def _launched(graph: nx.DiGraph) -> set[int]:
    """The GPU tasks launched by a call of the trace (dlrm8's first kernels were launched before it began)."""
    return {v for _, v, kind in graph.edges(data="kind") if kind == "launch"}


def _gpu_starts_off(graph: nx.DiGraph, tasks: set[int]) -> float:
    """The share of ``tasks`` whose simulated start differs from the traced one."""
    tl = simulate(graph)
    traced = np.array([graph.nodes[n]["start"] for n in tl.nodes])
    chosen = np.array([n in tasks for n in tl.nodes])
    return float((np.abs(tl.start - traced) > 0.01)[chosen].mean())


@pytest.mark.parametrize("name", GPU_TRACES)
def test_every_gpu_task_starts_when_it_did(shared_traces: Path, name: str) -> None:
    """All steps in one graph: nothing is pending before the first, and every kernel, copy and collective starts
    exactly when it did, held back only by its launch, its stream and the waits the graph holds."""
    trace = load_trace(shared_traces / name)
    graph = build_graph(trace, "all")
    calls = {e.args.correlation for e in trace.runtime if e.args is not None}
    in_trace = sum(1 for e in trace.gpu if e.args is not None and e.args.correlation in calls)
    assert edges_by_kind(graph)["launch"] >= 0.999 * in_trace > 0  # (resnet's last launch is after its last step)
    assert _gpu_starts_off(graph, _launched(graph)) == 0.0


@pytest.mark.parametrize("kind", ["launch", "sync"])
@pytest.mark.parametrize("name", SYNCING_TRACES)
def test_each_dependency_kind_is_needed(shared_traces: Path, name: str, kind: str) -> None:
    graph = build_graph(load_trace(shared_traces / name), "all")
    assert edges_by_kind(graph)[kind] > 0
    launched = _launched(graph)
    graph.remove_edges_from([(u, v) for u, v, k in graph.edges(data="kind") if k == kind])
    assert _gpu_starts_off(graph, launched) > 0.5


def test_simulate_reports_what_is_not_explained(shared_traces: Path) -> None:
    # resnet_kineto's CPU runs ahead of the GPU: its step's first copy waited 99 ms behind the previous step's
    # kernels, which the step's graph starts without.
    # kernels, which the step's graph starts without. Simulated after the step before it, its context (which starts
    # with nothing pending), the step's period is the measured one.
    d = replay(shared_traces / "param/resnet_kineto.json.gz").to_dict()
    assert d["causality"]["held_back_us"] == pytest.approx(87037.0)  # the first context step's, now the graph's first
    assert d["causality"]["pinned_tasks"] == 0
    assert d["edges_by_kind"]["sync"] >= 1
    # the measured figure is the step's period, not its span from first CPU task to last kernel
    *context, step = d["steps"]
    assert [s["context"] for s in context] == [True, True] and not step["context"]
    assert step["measured_us"] == pytest.approx(157979.0)
    assert d["measured_us"] == step["measured_us"] == pytest.approx(d["baseline_us"])
    alone = replay_graph(build_graph(load_trace(shared_traces / "param/resnet_kineto.json.gz"), context=False))
    assert alone.baseline_us > 1.1 * alone.measured_us  # simulated alone, the step took its span: +11%


def _steps_with_work_between(tmp_path: Path) -> Path:
    """Two steps on one thread with an op between them that neither holds (times in us): step 1 [0, 1000] runs
    aten::mm [0, 900]; aten::add [1100, 1200] is outside both; step 2 [1500, 2500] runs aten::mm [1500, 2400]."""
    events = [
        _event("user_annotation", "ProfilerStep#1", 1, 0, 1000),
        _event("cpu_op", "aten::mm", 1, 0, 900, **{"Input Dims": [[64, 64], [64, 64]]}),
        _event("cpu_op", "aten::add", 1, 1100, 100, **{"Input Dims": [[64], [64]]}),
        _event("user_annotation", "ProfilerStep#2", 1, 1500, 1000),
        _event("cpu_op", "aten::mm", 1, 1500, 900, **{"Input Dims": [[64, 64], [64, 64]]}),
    ]
    path = tmp_path / "between.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_a_thread_keeps_its_order_across_work_between_the_steps(tmp_path: Path) -> None:
    """The op between the steps is outside ``--step all``'s window; the thread still runs step 2 after step 1 and
    that stretch, not at the window's start beside step 1."""
    graph = build_graph(load_trace(_steps_with_work_between(tmp_path)), "all")
    first, second = sorted(graph, key=lambda n: graph.nodes[n]["start"])
    assert graph.edges[first, second]["kind"] == "thread"
    assert graph.nodes[first]["gap"] == pytest.approx(600.0)  # the stretch from step 1's op to step 2's, as traced
    causality = graph.graph["causality"]
    assert (causality.unanchored_tasks, causality.bridged_orders, causality.cut_edges) == (0, 1, {"thread": 1})
    assert causality.held_back_us == 0.0
    timeline = simulate(graph)
    assert timeline.makespan() == pytest.approx(2400.0)
    # a shorter step 1 moves step 2 with it: the stretch between them stays
    graph.nodes[first]["duration"] = 450.0
    assert simulate(graph).makespan() == pytest.approx(1950.0)


def test_simulate_says_which_stretches_it_kept(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(_steps_with_work_between(tmp_path)), "--step", "all"]) == 0
    assert "not explained: 1 stretch of work between the steps kept as traced on its thread" in capsys.readouterr().out


def test_two_recordings_back_to_back_replay_exactly(tmp_path: Path, shared_traces: Path) -> None:
    """A trace and its copy after it (bench/tile_trace.py): each copy's tasks before and after its steps are outside
    the window of every step; the threads keep their order across them, so all steps replay as traced, and the
    simulation stays linear (before, each copy's first tasks started with the window and waited on their threads
    in the frontier behind every other copy's: 25 copies pushed 31k tasks 25 times each)."""
    tiled = tmp_path / "two.json.gz"
    source = shared_traces / "hta/nccl_parser_config_nccl_data.json.gz"
    bench = Path(__file__).resolve().parent.parent / "bench" / "tile_trace.py"
    subprocess.run(
        [sys.executable, str(bench), str(source), str(tiled), "--events", "50000"], check=True, capture_output=True
    )
    d = replay(tiled, step="all").to_dict()
    assert d["causality"]["unanchored_tasks"] == 0 and d["causality"]["bridged_orders"] >= 2
    assert d["predicted_us"] == pytest.approx(d["measured_us"], rel=1e-9)
    assert len(d["steps"]) == 2 * len(replay(source, step="all").to_dict()["steps"])
    assert halved_ratio(build_graph(load_trace(tiled), "all")) == pytest.approx(0.5, rel=0.01)


LOADER = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"


def _loader_bound_trace(tmp_path: Path) -> Path:
    """A CPU training loop fed by DataLoader workers that make a batch every 1000 us; training takes 600 us. Step 1
    finds its batch ready (the call costs 50 us); from step 2 on each call waits for the workers, the batch arriving
    at 2000, 3000, 4000, 5000 and the call returning 50 us later."""
    events = []
    t = 1000.0
    for k in range(1, 6):
        get = 50.0 if k == 1 else 1000.0 * k + 50.0 - t
        events.append(_event("user_annotation", f"ProfilerStep#{k}", 1, t, get + 600))
        events.append(_event("user_annotation", LOADER, 1, t, get))
        events.append(_event("cpu_op", "aten::mm", 1, t + get, 600, **{"Input Dims": [[64, 64], [64, 64]]}))
        t += get + 600
    path = tmp_path / "loader.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def _steps(session: Session) -> list[float]:
    return list(session.predict().step_periods().values())


def test_a_step_waits_for_the_dataloader_workers(tmp_path: Path) -> None:
    """The workers' throughput holds the step, not the calling thread's own time: faster training leaves a
    loader-bound step as it was, a faster loader makes it training-bound."""
    graph = build_graph(load_trace(_loader_bound_trace(tmp_path)), "all")
    workers = [a for _, a in graph.nodes(data=True) if a["thread"].endswith("/DataLoader workers")]
    # from each call (1650, 2650, ...) to its batch (2000, 3000, ...); between two, the workers' time while training
    assert [a["duration"] for a in workers] == pytest.approx([350.0, 350.0, 350.0, 350.0])
    assert [a["gap"] for a in workers] == pytest.approx([650.0, 650.0, 650.0, 0.0])
    assert halved_ratio(graph.copy()) == pytest.approx(0.5)
    session = Session(graph)
    assert _steps(session) == pytest.approx([650.0, 1000.0, 1000.0, 1000.0, 1000.0])  # replay
    session.execute('scale (select where name == "aten::mm") by 0.5')
    assert _steps(session)[2:] == pytest.approx([1000.0, 1000.0, 1000.0])  # still one batch every 1000 us
    faster = run_whatif(build_graph(load_trace(_loader_bound_trace(tmp_path)), "all"), ["dataloader"], {"speedup": 4})
    # a batch every 250 us of the workers' time: the step is the call's own 50 us / 4 and the 600 us of training
    assert list(faster.timeline.step_periods().values())[2:] == pytest.approx([612.5, 612.5, 612.5])
