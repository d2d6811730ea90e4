"""The timeline's summaries, read over columns of numbered values (``Timeline.codes``), against the same summaries
computed one task at a time: the same numbers to the bit and the same keys in the same order, on a real trace and on
tasks whose values are of every type (text, none, numbers that compare equal but show differently, lists)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pytest

from daydream import build_graph, load_trace
from daydream.api.replay import replay_graph
from daydream.graph import add_dependency, add_task
from daydream.graph.schema import CPU_KINDS, EDGE_KINDS, GPU_KINDS
from daydream.simulation import simulate
from daydream.simulation.timeline import (
    Timeline,
    breakdown,
    critical_path_indices,
    critical_path_segments,
    totals_by,
    union_intervals,
)


def _totals_one_by_one(
    timeline: Timeline, by: str, indices: list[int] | None, kinds: frozenset[str], times: list[float] | None
) -> dict[str, float]:
    attrs = timeline.task_attrs
    if indices is None:
        indices = [i for i, a in enumerate(attrs) if a["kind"] in kinds]
    else:
        keep = [k for k, i in enumerate(indices) if attrs[i]["kind"] in kinds]
        indices = [indices[k] for k in keep]
        times = None if times is None else [times[k] for k in keep]
    if times is None:
        times = [float(timeline.end[i]) - float(timeline.start[i]) for i in indices]
    sums: dict[str, float] = {}
    for i, t in zip(indices, times):
        k = attrs[i].get(by)
        key = k if type(k) is str else "-" if k is None else str(k)
        sums[key] = sums.get(key, 0.0) + t
    return dict(sorted(sums.items(), key=lambda kv: -kv[1]))


def _breakdown_one_by_one(timeline: Timeline) -> dict[str, float]:
    attrs = timeline.task_attrs
    working = {
        a["thread"] for a in attrs if a["kind"] == "dataloader" or (a["kind"] == "cpu" and a.get("op") == a["name"])
    }
    for i, a in enumerate(attrs):
        for child, e in timeline.graph.succ[timeline.nodes[i]].items():
            if e.get("kind") == "launch" and timeline.graph.nodes[child]["kind"] in GPU_KINDS:
                working.add(a["thread"])
    cpu_ix = [i for i, a in enumerate(attrs) if a["kind"] in CPU_KINDS and a["thread"] in working]
    gpu_ix = [i for i, a in enumerate(attrs) if a["kind"] in GPU_KINDS]
    gaps = np.fmax(np.asarray([attrs[i].get("gap", 0.0) for i in cpu_ix], dtype=float), 0.0)
    t0, t1, measured = timeline.step_window()  # after the context step, to the last measured step's end
    cpu = union_intervals(np.clip(np.stack([timeline.start[cpu_ix], timeline.end[cpu_ix] + gaps], axis=1), t0, t1))
    gpu_rows = np.stack([timeline.start[gpu_ix], timeline.end[gpu_ix]], axis=1)
    gpu = union_intervals(np.clip(gpu_rows, t0, t1) if measured else gpu_rows)
    both = union_intervals(np.concatenate([np.stack(cpu, axis=1), np.stack(gpu, axis=1)]))
    cpu_busy, gpu_busy = float((cpu[1] - cpu[0]).sum()), float((gpu[1] - gpu[0]).sum())
    overlap = cpu_busy + gpu_busy - float((both[1] - both[0]).sum())
    scale = timeline.step_us() / (t1 - t0) if measured > 1 else 1.0  # several steps: the median step's share
    return {
        "cpu_only_us": (cpu_busy - overlap) * scale,
        "gpu_only_us": (gpu_busy - overlap) * scale,
        "cpu_gpu_overlap_us": overlap * scale,
    }


def _assert_same_summaries(timeline: Timeline, bys: tuple[str, ...]) -> None:
    path = critical_path_indices(timeline)
    seg = critical_path_segments(timeline, path)
    for indices, kinds, times in [
        (None, GPU_KINDS, None),
        (None, CPU_KINDS, None),
        (path, GPU_KINDS | CPU_KINDS, seg),
        (path, GPU_KINDS, seg),
    ]:
        fresh = Timeline(
            timeline.graph,
            timeline.nodes,
            timeline.start,
            timeline.end,
            timeline.cause,
            timeline.threads,
            timeline.task_attrs,
        )
        got = totals_by(fresh, bys, indices, kinds, times)
        for by in bys:
            want = _totals_one_by_one(timeline, by, indices, kinds, times)
            assert list(got[by].items()) == list(want.items()), by  # the same sums to the bit, keys in the same order
    got_breakdown = breakdown(timeline)
    for part, value in _breakdown_one_by_one(timeline).items():
        assert got_breakdown[part] == pytest.approx(value, rel=1e-12, abs=1e-9), part
    steps: dict[str, list[int]] = {}
    for i, a in enumerate(timeline.task_attrs):
        steps.setdefault(a.get("step") or "inserted", []).append(i)
    got_steps = timeline.step_indices()
    assert list(got_steps) == list(steps)
    assert all(got_steps[k].tolist() == v for k, v in steps.items())


def test_the_summaries_of_a_real_trace_are_those_of_one_task_at_a_time(shared_traces: Path) -> None:
    graph = build_graph(load_trace(shared_traces / "hta" / "nccl_parser_config_nccl_data.json.gz"), "all")
    _assert_same_summaries(simulate(graph), ("phase", "class", "layer", "name", "op"))


def test_the_threads_numbered_by_the_compiled_simulation_are_the_timelines(
    shared_traces: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from daydream.simulation import engine

    monkeypatch.setattr(engine, "COMPILED_MIN_TASKS", 0)
    graph = build_graph(load_trace(shared_traces / "hta" / "nccl_parser_config_nccl_data.json.gz"), "all")
    timeline = simulate(graph)
    fresh = Timeline(graph, timeline.nodes, timeline.start, timeline.end, timeline.cause, timeline.threads)
    (codes, values), (want_codes, want_values) = timeline.codes("thread"), fresh.codes("thread")
    assert values == want_values and codes.dtype == want_codes.dtype and codes.tolist() == want_codes.tolist()
    assert len(set(values)) > 2 and values == [t for t in dict.fromkeys(fresh.values("thread"))]


@pytest.mark.parametrize(
    "values",
    [
        ["a", None, "b", "-", None, "a"],
        [1, 1.0, True, "1", None, 2],  # equal as numbers, different as text
        [[1, 2], [1, 2], "x", None, (1, 2), 3],  # lists: not hashable
        [float("nan"), float("nan"), "nan", 0, False, ""],
    ],
)
def test_values_of_every_type_are_summed_as_their_text(values: list[Any]) -> None:
    g = nx.DiGraph()
    prev = None
    for i, v in enumerate(values * 3):
        call = add_task(
            g,
            "cudaLaunchKernel",
            "cpu",
            "cpu:1/1",
            2.0 + i % 4,
            start=10.0 * i,
            step=v if i % 2 else None,
            op=None,
            tag=v,
        )
        kernel = add_task(g, f"k{i % 5}", "gpu", "gpu:0/7", 1.0 + (i * 7) % 5 / 3, start=10.0 * i + 1, tag=v, layer=v)
        add_dependency(g, call, kernel, "launch", lag=1.0)
        if prev is not None:
            add_dependency(g, prev[0], call, "thread")
            add_dependency(g, prev[1], kernel, "stream")
        prev = (call, kernel)
    timeline = simulate(g)
    try:
        hash(tuple(values))
    except TypeError:
        bys: tuple[str, ...] = ("tag", "layer", "name")
        _assert_same_totals_only(timeline, bys)
        return
    _assert_same_summaries(timeline, ("tag", "layer", "name"))


def _assert_same_totals_only(timeline: Timeline, bys: tuple[str, ...]) -> None:
    for kinds in (GPU_KINDS, CPU_KINDS):
        got = totals_by(timeline, bys, None, kinds, None)
        for by in bys:
            assert list(got[by].items()) == list(_totals_one_by_one(timeline, by, None, kinds, None).items())


def test_equal_sums_keep_the_order_their_keys_first_appear_in_among_the_tasks_summed() -> None:
    """The keys of a sum over GPU tasks in the order those tasks show them, not the order the CPU tasks before them
    (read into the same column) show them."""
    g = nx.DiGraph()
    calls = [
        add_task(g, "cudaLaunchKernel", "cpu", "cpu:1/1", 2.0, start=2.0 * i, layer=layer)
        for i, layer in enumerate(["x", "y"])
    ]
    kernels = [
        add_task(g, "k", "gpu", "gpu:0/7", 5.0, start=10.0 + i, layer=layer) for i, layer in enumerate(["y", "x"])
    ]
    add_dependency(g, calls[0], calls[1], "thread")
    add_dependency(g, kernels[0], kernels[1], "stream")
    for call, kernel in zip(calls, kernels):
        add_dependency(g, call, kernel, "launch")
    timeline = simulate(g)
    assert list(totals_by(timeline, ("layer",), None, CPU_KINDS)["layer"]) == ["x", "y"]
    assert list(totals_by(timeline, ("layer",), None, GPU_KINDS)["layer"]) == ["y", "x"]  # 5 us each: as they appear


def test_the_replay_report_counts_tasks_and_edges_as_one_at_a_time(shared_traces: Path) -> None:
    graph = build_graph(load_trace(shared_traces / "hta" / "nccl_parser_config_nccl_data.json.gz"), "all")
    edge = next(iter(graph.edges))
    graph.edges[edge]["kind"] = "made up"  # a kind the schema does not name: counted after those it does
    report = replay_graph(graph).report
    kinds: dict[str, int] = {}
    for a in graph.nodes.values():
        kinds[a["kind"]] = kinds.get(a["kind"], 0) + 1
    edges = dict.fromkeys(EDGE_KINDS, 0)
    for _, _, e in graph.edges(data=True):
        edges[e["kind"]] = edges.get(e["kind"], 0) + 1
    assert list(report.tasks_by_kind.items()) == list(kinds.items())
    assert list(report.edges_by_kind.items()) == list(edges.items()) and edges["made up"] == 1
    assert report.edges == graph.number_of_edges()


def _call_and_kernel_chain(tasks: int) -> nx.DiGraph:
    """Launch calls on one thread, each launching a kernel that the next call waits for: every task on the path."""
    g = nx.DiGraph()
    prev = None
    for i in range(tasks):
        call = add_task(g, "cudaLaunchKernel", "cpu", "cpu:1/1", 0.1 + i / 7, start=0.0)
        kernel = add_task(g, "k", "gpu", "gpu:0/7", 0.3 + i / 3, start=0.0)
        add_dependency(g, call, kernel, "launch", lag=0.01)
        if prev is not None:
            add_dependency(g, prev, call, "sync", lag=0.02)
        prev = kernel
    return g


@pytest.mark.parametrize("source", ["chain", "trace"])
def test_the_critical_path_times_are_those_of_one_task_at_a_time(shared_traces: Path, source: str) -> None:
    """The critical path's GPU and CPU time: each task's segment, summed in path order, by its kind (the chain's
    times differ in their last bits when summed in another order)."""
    if source == "chain":
        graph = _call_and_kernel_chain(500)
    else:
        graph = build_graph(load_trace(shared_traces / "hta" / "nccl_parser_config_nccl_data.json.gz"), "all")
    result = replay_graph(graph)
    timeline = simulate(graph)
    path = critical_path_indices(timeline)
    seg = critical_path_segments(timeline, path)
    t0, t1, measured = timeline.step_window()
    if measured:  # the path within the measured steps' window (after the context step), each task's time clipped to it
        held = [
            (i, min(float(timeline.start[i]) + t, t1) - max(float(timeline.start[i]), t0)) for i, t in zip(path, seg)
        ]
        path, seg = [i for i, h in held if h > 0], [h for _, h in held if h > 0]
    attrs = timeline.task_attrs
    scale = timeline.step_scale()  # several measured steps: one step's share
    gpu_us = sum(t for i, t in zip(path, seg) if attrs[i]["kind"] in GPU_KINDS) * scale
    cpu_us = sum(t for i, t in zip(path, seg) if attrs[i]["kind"] in CPU_KINDS) * scale
    report = result.report.critical_path
    assert (report.gpu_us, report.cpu_us) == (gpu_us, cpu_us)
    assert gpu_us > 0 and cpu_us > 0 and report.tasks == len(path)
    if source == "chain":
        assert (
            report.tasks == 1000
            and float(np.sum([t for i, t in zip(path, seg) if attrs[i]["kind"] in GPU_KINDS])) != gpu_us
        )
