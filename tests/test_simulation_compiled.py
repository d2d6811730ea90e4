"""The compiled frontier loop (daydream.simulation.compiled) against the Python one: the same timeline to the bit on
every shared trace, every policy, multi-rank jobs with collectives, and the same messages where a graph cannot run."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from test_multirank import DLRM8, job, needs_dlrm8, rank_graph

import daydream.simulation.engine as engine
from daydream import build_graph, load_trace
from daydream.api.job import load_job
from daydream.errors import DaydreamError
from daydream.graph import add_dependency, add_task
from daydream.simulation import Timeline, simulate
from daydream.simulation.policies import EARLIEST, FIFO, Policy, parse_policy

compiled_loop = pytest.importorskip("daydream.simulation.compiled")

POLICIES = [EARLIEST, FIFO, parse_policy("priority:duration"), parse_policy("priority:-duration")]


def both(graph: nx.DiGraph, policy: Policy, monkeypatch: pytest.MonkeyPatch) -> tuple[Timeline, Timeline]:
    monkeypatch.setattr(engine, "COMPILED_MIN_TASKS", math.inf)
    python = simulate(graph, policy)
    monkeypatch.setattr(engine, "COMPILED_MIN_TASKS", 0)
    compiled = simulate(graph, policy)
    return python, compiled


def assert_same(python: Timeline, compiled: Timeline) -> None:
    # bit for bit: the same floats in the same order, not merely close
    assert python.start.tobytes() == compiled.start.tobytes()
    assert python.end.tobytes() == compiled.end.tobytes()
    assert python.cause.tolist() == compiled.cause.tolist()
    assert python.threads == compiled.threads
    if python.arrival is None:
        assert compiled.arrival is None
    else:
        assert compiled.arrival is not None
        np.testing.assert_array_equal(python.arrival, compiled.arrival)


def shared_trace_files(root: Path) -> list[Path]:
    return sorted(
        p for p in root.rglob("*.json*") if "_et" not in p.parent.name and ".et." not in p.name and "_et." not in p.name
    )


@pytest.mark.slow
def test_the_same_timeline_on_every_shared_trace_and_policy(
    shared_traces: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked = 0
    for path in shared_trace_files(shared_traces):
        try:
            trace = load_trace(path)
            graphs = [build_graph(trace, None), build_graph(trace, "all")]
        except DaydreamError:
            continue  # a trace the builder refuses has nothing to simulate
        for graph in graphs:
            for policy in POLICIES:
                assert_same(*both(graph, policy, monkeypatch))
                checked += 1
    assert checked >= 40


@needs_dlrm8
def test_the_same_timeline_on_a_joint_eight_rank_job(monkeypatch: pytest.MonkeyPatch) -> None:
    graph = load_job(DLRM8)
    for policy in POLICIES:
        python, compiled = both(graph, policy, monkeypatch)
        assert python.arrival is not None and not np.isnan(python.arrival).all()  # the collectives were met
        assert_same(python, compiled)


def random_job(seed: int) -> nx.DiGraph:
    """Ranks of random length whose kernels and collectives tie often (whole-microsecond durations): where the two
    loops could part, if they broke ties apart."""
    rng = random.Random(seed)
    steps = rng.randint(1, 6)
    return job(
        [
            rank_graph([float(rng.randint(1, 4) * 10) for _ in range(steps)], comm_us=float(rng.randint(1, 3) * 10))
            for _ in range(rng.randint(2, 5))
        ]
    )


@pytest.mark.parametrize("seed", range(20))
def test_the_same_timeline_on_jobs_with_ties(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    graph = random_job(seed)
    for a in graph.nodes.values():  # gaps and priorities, so that every term of the loop matters
        a["gap"] = float(seed % 3)
    for policy in POLICIES:
        assert_same(*both(graph, policy, monkeypatch))


def random_dag(seed: int) -> nx.DiGraph:
    """Tasks on a few threads with no order among them but random dependencies, whole-microsecond times and some
    release times: many tasks wait for one thread at once, and tie, so every tie-break of the loop is exercised."""
    rng = random.Random(seed)
    graph = nx.DiGraph()
    tasks = []
    for k in range(rng.randint(20, 150)):
        task = add_task(
            graph, f"t{k}", rng.choice(["cpu", "gpu"]), f"thread{rng.randint(0, 3)}", float(rng.randint(0, 5))
        )
        graph.nodes[task]["gap"] = float(rng.randint(0, 2))
        graph.nodes[task]["order"] = float(rng.randint(0, 3))
        if rng.random() < 0.1:
            graph.nodes[task]["release"] = float(rng.randint(0, 20))
        for parent in rng.sample(tasks, min(len(tasks), rng.randint(0, 3))):
            kind = rng.choice(["thread", "stream", "sync", "launch"])
            add_dependency(
                graph, parent, task, kind, **({} if kind in ("thread", "stream") else {"lag": float(rng.randint(0, 3))})
            )
        tasks.append(task)
    return graph


@pytest.mark.parametrize("seed", range(40))
def test_the_same_timeline_on_random_graphs_full_of_ties(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    graph = random_dag(seed)
    for policy in [*POLICIES, parse_policy("priority:order")]:
        assert_same(*both(graph, policy, monkeypatch))


def _message(run: Callable[[], object]) -> str:
    with pytest.raises(DaydreamError) as err:
        run()
    return str(err.value)


def test_the_same_messages_for_a_cycle_and_a_collective_that_never_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    cyclic = nx.DiGraph()
    a = add_task(cyclic, "a", "cpu", "cpu:1/1", 1)
    b = add_task(cyclic, "b", "cpu", "cpu:1/1", 1)
    add_dependency(cyclic, a, b, "thread")
    add_dependency(cyclic, b, a, "sync")
    crossed = job([rank_graph([100, 100], groups=["x", "y"]), rank_graph([100, 100], groups=["y", "x"])])
    for graph, expected in ((cyclic, "dependency cycle"), (crossed, "never starts")):
        monkeypatch.setattr(engine, "COMPILED_MIN_TASKS", math.inf)
        python = _message(lambda g=graph: simulate(g))
        monkeypatch.setattr(engine, "COMPILED_MIN_TASKS", 0)
        assert _message(lambda g=graph: simulate(g)) == python
        assert expected in python


def test_a_nan_goes_to_the_python_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    # a NaN priority: Python's tuple order with NaN is the reference, which the compiled loop does not imitate
    graph = random_job(3)
    for k, a in enumerate(graph.nodes.values()):
        a["rank_order"] = math.nan if k % 2 else float(k)
    python, compiled = both(graph, parse_policy("priority:rank_order"), monkeypatch)
    assert_same(python, compiled)
    monkeypatch.setattr(compiled_loop, "_simulate_arrays", lambda *args: pytest.fail("the compiled loop ran"))
    monkeypatch.setattr(engine, "COMPILED_MIN_TASKS", 0)
    graph = random_job(4)
    next(iter(graph.nodes.values()))["duration"] = math.nan
    simulate(graph)
