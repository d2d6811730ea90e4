"""The builder holds the dependencies it finds as arrays (graph.build.table.Dependencies): the delays and the cut read
them a column at a time. Each must do what a loop over the tasks, each with its list of dependencies, does: checked
here against such loops (what the builder ran before) on the shared traces, and on made-up cases where order and
ties decide."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from daydream import load_trace
from daydream.graph import build
from daydream.graph.adjacency import EdgeArrays
from daydream.graph.build import delays as build_delays
from daydream.graph.build.table import Dependencies, TaskTable
from daydream.graph.schema import CPU_KINDS, EDGE_KIND_NUMBER, EDGE_KINDS, ORDER_KINDS, Causality

TRACES = (
    "hta/nccl_parser_config_nccl_data.json.gz",  # collectives, copies, syncs
    "param/resnet_kineto.json.gz",  # a CPU that runs ahead of its GPU
    "param/dlrm8/rank0.json.gz",
    "tracelens/mi300_train_resnet18.json.gz",  # AMD
    "hta/amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "hta/critical_path_alexnet_benchmark_result_2869224_1695835535_trace.json.gz",
    "validation/traces/accumulate2/run1/rank0.json.xz",  # micro-batches: forward passes after a backward pass
    "validation/traces/loader2/run1/rank0.json.xz",  # waits for the data loader's workers
)
ROOT = Path(__file__).resolve().parents[1]


def test_a_tasks_dependencies_stay_in_the_order_found() -> None:
    rng = np.random.default_rng(7)
    child = rng.integers(0, 6, 40).tolist()
    parent = rng.integers(0, 6, 40).tolist()
    kind = rng.integers(0, len(EDGE_KINDS), 40).tolist()
    deps = Dependencies.of(6, parent, child, kind)
    for v in range(6):
        found = [(u, k) for u, c, k in zip(parent, child, kind) if c == v]
        assert (
            list(
                zip(
                    deps.parent[deps.ptr[v] : deps.ptr[v + 1]].tolist(),
                    deps.kind[deps.ptr[v] : deps.ptr[v + 1]].tolist(),
                )
            )
            == found
        )
    # those added later come after each task's others, where the returned positions say
    deps.lag[:] = np.arange(40)
    more, place = deps.with_added([3, 0, 3], [5, 4, 1], [0, 1, 2])
    at = place[40:]
    for v in range(6):
        mine = more.ptr[v], more.ptr[v + 1]
        old = deps.ptr[v], deps.ptr[v + 1]
        n = old[1] - old[0]
        assert more.parent[mine[0] : mine[0] + n].tolist() == deps.parent[old[0] : old[1]].tolist()
        assert more.lag[mine[0] : mine[0] + n].tolist() == deps.lag[old[0] : old[1]].tolist()
    assert more.child()[at].tolist() == [3, 0, 3] and more.parent[at].tolist() == [5, 4, 1]
    assert more.ptr[4] - more.ptr[3] == deps.ptr[4] - deps.ptr[3] + 2


def test_a_parent_met_twice_keeps_its_first_place_and_its_last_dependency() -> None:
    # what a dict per task does (build._first_met): the first place, the last value; a weak edge only where absent
    rng = np.random.default_rng(11)
    for _ in range(200):
        m, tasks = int(rng.integers(0, 30)), int(rng.integers(1, 6))
        child = np.sort(rng.integers(0, tasks, m))
        parent = rng.integers(0, tasks, m)
        kind = rng.integers(0, len(EDGE_KINDS), m)
        lag = rng.random(m)
        has_lag = rng.random(m) < 0.5
        weak = rng.random(m) < 0.3
        got = build._first_met(tasks, child, parent, kind, lag, has_lag, weak)
        parents: list[dict[int, tuple[str, float | None]]] = [{} for _ in range(tasks)]
        for c, p, k, x, h, w in zip(
            child.tolist(), parent.tolist(), kind.tolist(), lag.tolist(), has_lag.tolist(), weak.tolist()
        ):
            if not w or p not in parents[c]:
                parents[c][p] = (EDGE_KINDS[k], x if h else None)
        _assert_same_edges(got, EdgeArrays.of_parents(parents))


def _assert_same_edges(got: EdgeArrays, expected: EdgeArrays) -> None:
    for name in ("ptr", "parent", "kind", "lag", "has_lag"):
        assert getattr(got, name).tolist() == getattr(expected, name).tolist(), name


@pytest.mark.parametrize("name", TRACES)
@pytest.mark.parametrize("step", [None, "all"])
def test_the_delays_and_the_cut_are_those_a_loop_over_the_tasks_finds(
    name: str, step: str | None, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked: list[str] = []
    measure, window_edges = build_delays.measure_delays, build._window_edges

    def delays_spy(table: TaskTable, threads: dict[str, list[int]], infer_waits: bool) -> tuple[float, float]:
        before = _edge_lists(table)
        durations = list(table.column("duration"))
        out = measure(table, threads, infer_waits)
        expected = _delays_by_loop(table, before, durations, threads, infer_waits)
        assert out == expected[0]
        assert table.gap is not None and table.gap.tolist() == expected[1]
        assert _held(table.dependencies) == expected[2]
        assert table.column("duration") == expected[3]
        checked.append("delays")
        return out

    def cut_spy(
        table: TaskTable, selected: np.ndarray, window: np.ndarray, origin: float, threads: dict[str, list[int]]
    ) -> tuple[EdgeArrays, Causality]:
        gap = table.gap.copy()  # type: ignore[union-attr]
        edges, causality = window_edges(table, selected, window, origin, threads)
        expected = _cut_by_loop(table, gap, selected.tolist(), window.tolist(), origin)
        _assert_same_edges(edges, expected[0])
        assert causality == expected[1]
        assert table.gap.tolist() == expected[2]  # type: ignore[union-attr]
        checked.append("cut")
        return edges, causality

    order = build.order_edges

    def order_spy(table: TaskTable) -> dict[str, list[int]]:
        found = len(table.edge_parent)
        threads = order(table)
        expected = _threads_by_loop(table)
        assert threads == expected and list(threads) == list(expected)
        edges = [(u, v, EDGE_KINDS[k]) for u, v, k in zip(table.edge_parent, table.edge_child, table.edge_kind)]
        assert edges[found:] == [
            (u, v, "stream" if thread.startswith("gpu:") else "thread")
            for thread, tasks in expected.items()
            for u, v in zip(tasks, tasks[1:])
        ]
        checked.append("order")
        return threads

    monkeypatch.setattr(build, "order_edges", order_spy)
    monkeypatch.setattr(build, "measure_delays", delays_spy)
    monkeypatch.setattr(build, "_window_edges", cut_spy)
    folder = ROOT if name.startswith("validation/") else request.getfixturevalue("shared_traces")  # (skips if absent)
    build.build_graph(load_trace(folder / name), step)
    assert checked == ["order", "delays", "cut"]


def _threads_by_loop(table: TaskTable) -> dict[str, list[int]]:
    """build.edges.order_edges as a loop: each thread's tasks in order of start (ties in task order), the threads in
    order of their first task."""
    threads: dict[str, list[int]] = {}
    for task, thread in enumerate(table.column("thread")):
        threads.setdefault(thread, []).append(task)
    for tasks in threads.values():
        tasks.sort(key=table.ts.__getitem__)
    return threads


def _edge_lists(table: TaskTable) -> list[list[list[Any]]]:
    """Each task's dependencies as the builder once held them: [parent, kind, lag], in order."""
    out: list[list[list[Any]]] = [[] for _ in range(len(table))]
    for u, v, k in zip(table.edge_parent, table.edge_child, table.edge_kind):
        out[v].append([u, EDGE_KINDS[k], 0.0])
    return out


def _held(deps: Dependencies | None) -> list[list[list[Any]]]:
    assert deps is not None
    out: list[list[list[Any]]] = []
    for v in range(len(deps.ptr) - 1):
        out.append([[int(deps.parent[e]), EDGE_KINDS[deps.kind[e]], float(deps.lag[e])] for e in deps.held(v)])
    return out


def _delays_by_loop(
    table: TaskTable,
    in_edges: list[list[list[Any]]],
    durations: list[float],
    threads: dict[str, list[int]],
    infer_waits: bool,
) -> tuple[Any, ...]:
    """build_delays.measure_delays as a loop over the tasks and their lists of dependencies."""
    kinds, ts, end = table.column("kind"), table.ts, table.end
    durations = list(durations)
    launch, queued = [], []
    for v, launcher in enumerate(table.launcher):
        if launcher < 0:
            continue
        pred = None
        for u, kind, _ in in_edges[v]:
            if kind == "stream":
                pred = u
        if pred is None or end[pred] < ts[launcher]:
            launch.append(ts[v] - end[launcher])
        elif end[launcher] < end[pred]:
            queued.append(ts[v] - end[pred])
    l0 = statistics.median(launch) if launch else build_delays.DEFAULT_LAUNCH_LATENCY_US
    g0 = max(0.0, statistics.median(queued)) if queued else build_delays.DEFAULT_STREAM_GAP_US
    typical = {"launch": l0, "stream": g0, "thread": 0.0, "sync": 0.0, "comm": 0.0}
    gap = [0.0] * len(table)
    stream_ends = build_delays._StreamEnds(table, threads) if infer_waits else None
    unexplained = build_delays.UNEXPLAINED_DELAY_US + max(l0, g0, 0.0)
    for v, edges in enumerate(in_edges):
        if not edges:
            continue
        s = ts[v]
        if kinds[v] in CPU_KINDS:
            waited = [u for u, kind, _ in edges if kind == "sync"]
            if waited:
                te = max(end[u] for u in waited)
                if te > end[v]:
                    edges[:] = [e for e in edges if e[1] != "sync" or end[e[0]] <= end[v]]
                    te = max((end[u] for u, kind, _ in edges if kind == "sync"), default=s)
                if te > s:
                    durations[v] = end[v] - te
            for e in edges:
                if e[1] == "thread":
                    gap[e[0]] = s - end[e[0]]
                else:
                    e[2] = 0.0
            continue
        binding = min(edges, key=lambda e: s - end[e[0]])
        if stream_ends is not None and s - end[binding[0]] > unexplained:
            source = build_delays._cross_stream_source(table, v, stream_ends)
            if source is not None:
                binding = [source, "comm" if "comm" in (kinds[v], kinds[source]) else "sync", 0.0]
                edges.append(binding)
        for e in edges:
            slack = s - end[e[0]]
            value = slack if e is binding else min(slack, typical[e[1]])
            if e[1] == "stream":
                gap[e[0]] = value
            else:
                e[2] = value
    return (l0, g0), gap, in_edges, durations


def _cut_by_loop(
    table: TaskTable, gap_in: np.ndarray, selected: list[int], index: list[int], origin: float
) -> tuple[EdgeArrays, Causality, list[float]]:
    """build._window_edges as a loop over the selected tasks and their dependencies."""
    thread_of, op, kind, end, ts = table.column("thread"), table.column("op"), table.column("kind"), table.end, table.ts
    gap = gap_in.tolist()
    in_edges = _held(table.dependencies)
    out: list[dict[int, tuple[str, float | None]]] = []
    cut_edges: dict[str, int] = {}
    held_back_us, unanchored, lead_us, bridged = 0.0, 0, 0.0, 0
    last_on: dict[str, int] = {}
    working = {thread_of[t] for t in selected if op[t] is not None or kind[t] not in CPU_KINDS}
    for t in selected:
        parents: dict[int, tuple[str, float | None]] = {}
        out.append(parents)
        inside = 0
        thread = thread_of[t]
        for u, kind, lag in in_edges[t]:
            iu = index[u]
            if iu >= 0:
                parents[iu] = (kind, None if kind in ORDER_KINDS else lag)
                inside += 1
                continue
            cut_edges[kind] = cut_edges.get(kind, 0) + 1
            before = last_on.get(thread) if kind in ORDER_KINDS else None
            if before is not None:
                gap[before] = ts[t] - end[before]
                iu = index[before]
                if iu not in parents:
                    parents[iu] = (kind, None)
                inside += 1
                bridged += 1
            elif thread in working:
                ready = end[u] + (gap[u] if kind in ORDER_KINDS else lag)
                held_back_us = max(held_back_us, ready - origin)
        last_on[thread] = t
        fallback = table.fallback_edges.get(t)
        if not inside and fallback is not None and (iu := index[fallback.parent]) >= 0:
            parents[iu] = (fallback.kind, fallback.lag)
            inside = 1
        if not inside and ts[t] - origin > build.UNANCHORED_TOLERANCE_US and thread in working:
            unanchored += 1
            lead_us += ts[t] - origin
    causality = Causality(
        unanchored_tasks=unanchored,
        unanchored_lead_us=lead_us,
        cut_edges=cut_edges,
        held_back_us=held_back_us,
        bridged_orders=bridged,
    )
    return EdgeArrays.of_parents(out), causality, gap


def test_a_later_gap_wins_and_a_call_that_returned_first_did_not_wait() -> None:
    # three CPU tasks on one thread, a kernel on a stream; task 2 has a sync parent (the kernel) that ended after it
    table = TaskTable()
    for ts, dur, kind, thread in (
        (0.0, 1.0, "cpu", "cpu:1/1"),
        (2.0, 1.0, "cpu", "cpu:1/1"),
        (4.0, 1.0, "cpu", "cpu:1/1"),
        (1.5, 10.0, "gpu", "gpu:0/7"),
    ):
        table.add_task({"kind": kind, "thread": thread, "duration": dur}, ts, dur)
    table.launcher[3] = 0
    table.add_edge(0, 3, "launch")
    table.add_edge(0, 1, "thread")
    table.add_edge(1, 2, "thread")
    table.add_edge(3, 2, "sync")  # ended at 11.5, after the call's end at 5: not a wait
    table.add_edge(0, 2, "thread")  # a second child of 0 on the thread: its gap is this one's
    build_delays.measure_delays(table, {"cpu:1/1": [0, 1, 2], "gpu:0/7": [3]}, False)
    assert table.gap is not None and table.dependencies is not None
    assert table.gap.tolist() == [3.0, 1.0, 0.0, 0.0]  # task 0: its later child's (4 - 1), not the first's (2 - 1)
    assert [EDGE_KINDS[k] for k in table.dependencies.kind[table.dependencies.held(2)]] == ["thread", "thread"]
    assert table.column("duration")[2] == 1.0
    assert EDGE_KIND_NUMBER["sync"] in table.dependencies.kind.tolist()  # kept in the arrays, marked as not holding


def test_of_dependencies_that_ended_together_the_first_released_the_task() -> None:
    # a kernel launched by call 0 and waiting on call 1 too, both ended at 5: the launch (found first) released it
    table = TaskTable()
    for ts, dur, kind, thread in (
        (4.0, 1.0, "cpu", "cpu:1/1"),
        (3.0, 2.0, "cpu", "cpu:1/2"),
        (20.0, 1.0, "gpu", "gpu:0/7"),
    ):
        table.add_task({"kind": kind, "thread": thread, "duration": dur}, ts, dur)
    table.launcher[2] = 0
    table.add_edge(0, 2, "launch")
    table.add_edge(1, 2, "sync")
    build_delays.measure_delays(table, {"cpu:1/1": [0], "cpu:1/2": [1], "gpu:0/7": [2]}, False)
    assert table.dependencies is not None
    assert table.dependencies.lag.tolist() == [15.0, 0.0]  # the other keeps its mechanism's typical delay (0)


def test_a_task_no_range_gave_a_phase_takes_it_from_when_it_was_issued() -> None:
    from daydream.trace.steps import Step

    table = TaskTable()
    tasks = [  # (phase, kind, thread, start, end); step S: [0, 100), no optimizer; step T: [100, 200)
        ("backward", "cpu", "cpu:1/1", 10.0, 20.0),  # 0
        (None, "cpu", "cpu:1/2", 12.0, 13.0),  # 1: a later micro-batch's forward op (its node evaluated by 0's pass)
        (None, "gpu", "gpu:0/7", 30.0, 31.0),  # 2: launched by 1
        (None, "cpu", "cpu:1/1", 25.0, 26.0),  # 3: after S's backward pass, which has no optimizer step
        (None, "cpu", "cpu:1/1", 5.0, 6.0),  # 4: before the backward pass
        (None, "cpu", "cpu:1/1", 15.0, 16.0),  # 5: during it, on a thread with no later pass
        ("backward", "cpu", "cpu:1/1", 110.0, 120.0),  # 6
        ("optimizer", "cpu", "cpu:1/1", 130.0, 140.0),  # 7
        (None, "cpu", "cpu:1/1", 125.0, 126.0),  # 8: between T's backward pass and its optimizer step
    ]
    for phase, kind, thread, t0, t1 in tasks:
        table.add_task({"kind": kind, "phase": phase, "thread": thread}, t0, t1 - t0)
    table.launcher[2], table.launch_ts[2] = 1, 12.0
    threads: dict[str, list[int]] = {}
    for task, (_, _, thread, _, _) in enumerate(tasks):
        threads.setdefault(thread, []).append(task)
    task_steps = build.assign_steps(table, [Step("S", 0.0, 100.0), Step("T", 100.0, 200.0)])
    build.finish_phases(table, task_steps.of, threads, {1: 9}, {0: 9})
    assert table.column("phase") == [
        "backward",
        "forward",
        "forward",
        "other",
        "forward",
        "other",
        "backward",
        "optimizer",
        "optimizer",
    ]


def test_the_releasing_dependency_is_the_first_with_the_least_slack() -> None:
    # found without a sort where the dependencies are held by child (as built), with one otherwise: the same picks
    from types import SimpleNamespace

    from daydream.graph.build.delays import _releasing

    rng = np.random.default_rng(5)
    for trial in range(400):
        n, m = int(rng.integers(1, 60)), int(rng.integers(0, 200))
        child = np.sort(rng.integers(0, n, m)) if trial % 5 else rng.integers(0, n, m)
        parent = rng.integers(0, n, m)
        ts, end = rng.integers(0, 5, n).astype(float), rng.integers(0, 5, n).astype(float)  # slacks that tie
        ts[rng.integers(0, n, 2)] = -0.0
        among = rng.random(m) < 0.7
        e = np.flatnonzero(among)
        want = [
            min(e[child[e] == c], key=lambda k: (ts[c] - end[parent[k]], k)) for c in sorted(set(child[e].tolist()))
        ]
        assert _releasing(SimpleNamespace(parent=parent), child, ts, end, among).tolist() == want, trial  # type: ignore[arg-type]
