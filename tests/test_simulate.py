"""The frontier scheduler on hand-built graphs whose times are worked out by hand."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from daydream import DaydreamError, breakdown, critical_path, simulate
from daydream.graph import add_dependency, add_task
from daydream.simulation import FIFO, Policy, Timeline, critical_path_indices, critical_path_segments, parse_policy

CPU, GPU, GPU2 = "cpu:1/1", "gpu:0/7", "gpu:0/20"


def times(g: nx.DiGraph, policy: Policy | None = None) -> dict[int, tuple[float, float]]:
    tl = simulate(g) if policy is None else simulate(g, policy)
    return {n: (float(tl.start[i]), float(tl.end[i])) for i, n in enumerate(tl.nodes)}


def test_cpu_thread_order_keeps_gaps() -> None:
    g = nx.DiGraph()
    a = add_task(g, "a", "cpu", CPU, 10, gap=5)
    b = add_task(g, "b", "cpu", CPU, 20)
    add_dependency(g, a, b, "thread")
    t = times(g)
    assert t[a] == (0, 10)
    assert t[b] == (15, 35)  # 10 + gap 5


def test_launch_lag_and_stream_order() -> None:
    g = nx.DiGraph()
    a = add_task(g, "launch1", "cpu", CPU, 10)
    b = add_task(g, "launch2", "cpu", CPU, 10)
    k1 = add_task(g, "k1", "gpu", GPU, 50, gap=1)
    k2 = add_task(g, "k2", "gpu", GPU, 5)
    add_dependency(g, a, b, "thread")
    add_dependency(g, a, k1, "launch", lag=2)
    add_dependency(g, b, k2, "launch", lag=2)
    add_dependency(g, k1, k2, "stream")
    t = times(g)
    assert t[k1] == (12, 62)  # launch ends at 10, +2
    assert t[b] == (10, 20)  # the CPU runs ahead of the GPU
    assert t[k2] == (63, 68)  # queued: k1 ends 62, +gap 1 (its launch was ready at 22)


def test_negative_launch_lag_starts_kernel_before_call_returns() -> None:
    g = nx.DiGraph()
    a = add_task(g, "launch", "cpu", CPU, 10)
    k = add_task(g, "k", "gpu", GPU, 5)
    add_dependency(g, a, k, "launch", lag=-3)
    assert times(g)[k] == (7, 12)


def test_sync_waits_for_gpu_then_runs_its_own_cost() -> None:
    g = nx.DiGraph()
    a = add_task(g, "launch", "cpu", CPU, 10)
    k = add_task(g, "k", "gpu", GPU, 100)
    s = add_task(g, "cudaDeviceSynchronize", "cpu", CPU, 3)
    add_dependency(g, a, k, "launch", lag=2)
    add_dependency(g, a, s, "thread")
    add_dependency(g, k, s, "sync")
    t = times(g)
    assert t[k] == (12, 112)
    assert t[s] == (112, 115)


def test_cross_stream_wait_and_parallel_streams() -> None:
    g = nx.DiGraph()
    a = add_task(g, "launch", "cpu", CPU, 4)
    k1 = add_task(g, "compute", "gpu", GPU, 40)
    k2 = add_task(g, "other", "gpu", GPU2, 10)
    c = add_task(g, "allreduce", "comm", GPU2, 30)
    add_dependency(g, a, k1, "launch")
    add_dependency(g, a, k2, "launch")
    add_dependency(g, k2, c, "stream")
    add_dependency(g, k1, c, "comm")  # the all-reduce waits on the gradient kernel on the other stream
    t = times(g)
    assert t[k1] == (4, 44) and t[k2] == (4, 14)  # both streams run at once
    assert t[c] == (44, 74)


def test_release_time_holds_a_root_back() -> None:
    g = nx.DiGraph()
    a = add_task(g, "a", "cpu", CPU, 10, release=100)
    assert times(g)[a] == (100, 110)


@pytest.mark.parametrize(
    ("policy", "x_span", "y_span"),
    [
        (None, (10, 20), (0, 10)),  # earliest start: y (ready at 0) before x (ready at 5)
        (FIFO, (5, 15), (15, 25)),  # x became ready first
        # work-conserving: the thread does not idle from 0 to 5 for x's better priority
        (parse_policy("priority:prio"), (10, 20), (0, 10)),
        (parse_policy("priority:-prio"), (10, 20), (0, 10)),
    ],
)
def test_policies_order_unordered_tasks_on_a_thread(
    policy: Policy | None, x_span: tuple[int, int], y_span: tuple[int, int]
) -> None:
    g = nx.DiGraph()
    x = add_task(g, "x", "cpu", CPU, 10, release=5, prio=0)
    y = add_task(g, "y", "cpu", CPU, 10, release=0, prio=1)
    t = times(g, policy)
    assert t[x] == x_span and t[y] == y_span


@pytest.mark.parametrize(("attribute", "order"), [("prio", ["x", "y", "z"]), ("-prio", ["z", "y", "x"])])
def test_priority_picks_among_tasks_waiting_for_their_thread(attribute: str, order: list[str]) -> None:
    g = nx.DiGraph()
    busy = add_task(g, "busy", "cpu", CPU, 10, prio=-100)
    x = add_task(g, "x", "cpu", CPU, 5, release=3, prio=0)
    y = add_task(g, "y", "cpu", CPU, 5, release=1, prio=1)
    z = add_task(g, "z", "cpu", CPU, 5, release=2, prio=2)
    t = times(g, parse_policy(f"priority:{attribute}"))
    assert t[busy] == (0, 10)  # ready first, runs first whatever its priority
    # x, y and z all wait for the thread to free at 10: the priority orders them, back to back
    names = {x: "x", y: "y", z: "z"}
    assert [names[n] for n in sorted(names, key=lambda n: t[n][0])] == order
    assert sorted(t[n] for n in names) == [(10, 15), (15, 20), (20, 25)]


def test_tasks_waiting_for_one_thread_run_first_ready_first() -> None:
    # busy holds the thread to 10; z (ready 1), x (ready 2) and y (ready 3) wait for it, added in the order x y z,
    # with equal priorities: the one ready first runs first under every policy that orders waiting tasks
    g = nx.DiGraph()
    busy = add_task(g, "busy", "cpu", CPU, 10, prio=0)
    x = add_task(g, "x", "cpu", CPU, 5, release=2, prio=1)
    y = add_task(g, "y", "cpu", CPU, 5, release=3, prio=1)
    z = add_task(g, "z", "cpu", CPU, 5, release=1, prio=1)
    for policy in (None, parse_policy("priority:prio")):
        t = times(g, policy)
        assert t[busy] == (0, 10) and (t[z], t[x], t[y]) == ((10, 15), (15, 20), (20, 25))


def test_step_periods_run_from_the_end_of_the_step_before() -> None:
    # s1: a CPU task [0, 10] launching a kernel [10, 40]; s2: a CPU task [10, 15] launching a kernel [40, 50], and a
    # transfer of s1 on another stream after s1's kernel [40, 70]: s1 ends at 70, s2 at 50 (steps end in that order)
    g = nx.DiGraph()
    c1 = add_task(g, "c1", "cpu", CPU, 10, step="s1")
    k1 = add_task(g, "k1", "gpu", GPU, 30, step="s1")
    c2 = add_task(g, "c2", "cpu", CPU, 5, step="s2")
    k2 = add_task(g, "k2", "gpu", GPU, 10, step="s2")
    x = add_task(g, "x", "comm", GPU2, 30, step="s1")
    for u, v, kind in [(c1, k1, "launch"), (c1, c2, "thread"), (c2, k2, "launch"), (k1, k2, "stream"), (k1, x, "sync")]:
        add_dependency(g, u, v, kind)
    tl = simulate(g)
    assert tl.step_times() == {"s1": 70, "s2": 40}  # first start to last end of each step's own tasks
    assert tl.step_periods() == {"s2": 50, "s1": 20}  # s2 ends first, at 50; s1 20 later; together the makespan
    assert sum(tl.step_periods().values()) == tl.makespan() == 70


def test_unknown_policy_is_a_user_error() -> None:
    with pytest.raises(DaydreamError, match="unknown schedule policy"):
        parse_policy("random")


def test_cycle_is_reported() -> None:
    g = nx.DiGraph()
    a = add_task(g, "a", "cpu", CPU, 1)
    b = add_task(g, "b", "cpu", CPU, 1)
    add_dependency(g, a, b, "thread")
    add_dependency(g, b, a, "sync")
    with pytest.raises(DaydreamError, match="cycle"):
        simulate(g)


def test_breakdown_and_critical_path() -> None:
    g = nx.DiGraph()
    a = add_task(g, "launch", "cpu", CPU, 10)
    k = add_task(g, "k", "gpu", GPU, 50)
    b = add_task(g, "after", "cpu", CPU, 5)
    add_dependency(g, a, k, "launch", lag=2)
    add_dependency(g, a, b, "thread")
    tl = simulate(g)
    bd = breakdown(tl)
    # CPU busy [0, 15], GPU busy [12, 62]: overlap 3, CPU only 12, GPU only 47, nothing idle.
    assert bd == {"total_us": 62.0, "cpu_only_us": 12.0, "gpu_only_us": 47.0, "cpu_gpu_overlap_us": 3.0, "idle_us": 0.0}
    path = critical_path(tl)
    assert [t.node for t in path] == [a, k] and [t.name for t in path] == ["launch", "k"]
    # the launch holds the path until the kernel starts (10 us of call, then the 2 us lag), the kernel its 50 us
    assert [(t.kind, t.start_us, t.duration_us, t.holds_us) for t in path] == [
        ("cpu", 0.0, 10.0, 12.0),
        ("gpu", 12.0, 50.0, 50.0),
    ]
    assert path[0].thread == CPU and path[1].thread == GPU and sum(t.holds_us for t in path) == bd["total_us"]
    assert len(repr(path)) < 1000  # a notebook shows it as it is


def test_add_dependency_rejects_unknown_kind_and_task() -> None:
    g = nx.DiGraph()
    a = add_task(g, "a", "cpu", CPU, 1)
    with pytest.raises(DaydreamError, match="unknown dependency kind"):
        add_dependency(g, a, a, "magic")
    with pytest.raises(DaydreamError, match="no task 99"):
        add_dependency(g, a, 99, "thread")


def test_written_files_get_the_usual_permissions(tmp_path: Path) -> None:
    import os

    from daydream.files import write_atomically

    mask = os.umask(0o022)
    try:
        write_atomically(tmp_path / "out.json", b"{}")
    finally:
        os.umask(mask)
    assert (tmp_path / "out.json").stat().st_mode & 0o777 == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]  # no temporary file left


def test_the_critical_path_follows_causes_and_stops_where_they_loop() -> None:
    """The path is the chain of causes back from the last task to end, first to last, and each task holds it until
    the next one starts (the last: its run); causes that loop (a timeline built by hand) end the path where it first
    comes back, not a hang."""
    g = nx.DiGraph()
    g.add_nodes_from(range(4))
    start, end = np.array([0.0, 1.0, 3.5, 2.0]), np.array([1.0, 3.0, 6.0, 2.5])
    chain = Timeline(g, list(range(4)), start, end, np.array([-1, 0, 1, 0]), [])
    assert critical_path_indices(chain) == [0, 1, 2]
    assert critical_path_segments(chain, [0, 1, 2]) == [1.0, 2.5, 2.5]
    looped = Timeline(g, list(range(4)), start, end, np.array([-1, 2, 3, 1]), [])
    assert critical_path_indices(looped) == [1, 3, 2]  # 2 <- 3 <- 1 <- 2: back at 2
    assert critical_path_segments(looped, []) == []
