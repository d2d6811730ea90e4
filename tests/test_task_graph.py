"""A built graph holds its tasks as columns and its dependencies as arrays until something reads them as dicts
(graph.adjacency.TaskGraph): a replay simulates and reports from the columns and arrays, and every other reader gets
the dicts the builder made before."""

from __future__ import annotations

import pickle
from pathlib import Path

import msgspec
import networkx as nx
import pytest

from daydream import build_graph, load_trace
from daydream.api.replay import replay, replay_graph
from daydream.graph.adjacency import TaskGraph, copy_graph, edge_arrays, task_columns
from daydream.simulation import engine

EXAMPLE = Path(__file__).resolve().parents[1] / "daydream" / "examples" / "mlp_cpu.json.gz"
GPU_TRACE = "hta/nccl_parser_config_nccl_data.json.gz"  # kernels, copies, collectives: every edge kind


def _edges(g: nx.DiGraph) -> list[tuple[int, int, dict]]:
    return [(u, v, dict(a)) for u, v, a in g.edges(data=True)]


@pytest.fixture
def gpu_trace(shared_traces: Path) -> Path:
    return shared_traces / GPU_TRACE


def test_a_replay_reads_the_dependencies_as_arrays(gpu_trace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "COMPILED_MIN_TASKS", 0)  # the compiled loop, which reads arrays, on a small graph
    r = replay(gpu_trace, step="all")
    assert isinstance(r.graph, TaskGraph) and edge_arrays(r.graph) is not None  # nothing made the dicts
    assert task_columns(r.graph) is not None
    # the same timeline and report as a replay of the graph with its dicts made first
    g = build_graph(load_trace(gpu_trace), "all")
    g.number_of_edges()
    assert g.nodes[0] and edge_arrays(g) is None and task_columns(g) is None
    again = replay_graph(g)
    assert msgspec.json.encode(again.report) == msgspec.json.encode(r.report)
    assert again.timeline.start.tolist() == r.timeline.start.tolist()
    assert again.timeline.end.tolist() == r.timeline.end.tolist()
    assert sum(r.report.edges_by_kind.values()) == g.number_of_edges() and r.report.edges_by_kind["launch"] > 0
    assert list(r.report.edges_by_kind.items()) == list(_kinds(g).items())


def _kinds(g: nx.DiGraph) -> dict[str, int]:
    counts = dict.fromkeys(("thread", "stream", "launch", "sync", "comm"), 0)
    for _, _, a in g.edges(data=True):
        counts[a["kind"]] += 1
    return counts


def test_the_dicts_made_from_the_arrays_are_a_graphs_dicts(gpu_trace: Path) -> None:
    g = build_graph(load_trace(gpu_trace), "all")
    assert edge_arrays(g) is not None
    succ, pred = g.succ, g.pred  # the first read makes them
    assert edge_arrays(g) is None
    assert all(succ[u][v] is pred[v][u] for u, v in g.edges)  # one dict per edge, as fill() shares it
    assert list(g.nodes) == list(range(len(g)))
    for _, _, a in g.edges(data=True):
        assert a["kind"] in ("thread", "stream", "launch", "sync", "comm")
        assert a["kind"] in ("thread", "stream") or "lag" in a  # (an order edge's delay is its parent's gap)
    # each task's children in the order of the tasks, as fill() adds them
    assert all(list(children) == sorted(children) for children in succ.values())
    assert nx.is_directed_acyclic_graph(g)


def test_the_task_dicts_are_made_when_first_read(gpu_trace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "COMPILED_MIN_TASKS", 0)
    g = build_graph(load_trace(gpu_trace), "all")
    n = len(g)
    assert n == g.number_of_nodes() > 0 and task_columns(g) is not None  # counted without making them
    copy, pickled = copy_graph(g), pickle.loads(pickle.dumps(g))
    assert task_columns(copy) is task_columns(g) and task_columns(pickled) is not None  # shared, kept
    timeline = engine.simulate(g)
    keys = (
        "kind",
        "name",
        "op",
        "thread",
        "duration",
        "gap",
        "release",
        "step",
        "start",
        "bytes",
        "collective",
        "nope",
    )
    # some tasks' values (read before their columns are gathered, then after), then every task's
    picked = list(range(n - 1, -1, -3))
    at = [
        {k: timeline.values(k, tasks=picked) for k in keys} | {"bytes0": timeline.values("bytes", 0, picked)}
        for _ in "12"
    ]
    from_columns = {k: list(timeline.values(k)) for k in keys} | {"gap0": list(timeline.values("bytes", 0))}
    nodes = dict(g.nodes(data=True))  # the first read makes them
    assert task_columns(g) is None and list(nodes) == list(range(n))
    from_dicts = {k: list(timeline.values(k)) for k in keys} | {"gap0": list(timeline.values("bytes", 0))}
    assert from_columns == from_dicts and any(b is not None for b in from_dicts["bytes"])
    at_dicts = {k: timeline.values(k, tasks=picked) for k in keys} | {"bytes0": timeline.values("bytes", 0, picked)}
    assert at[0] == at[1] == at_dicts and at_dicts["bytes0"] == [from_dicts["gap0"][t] for t in picked]
    assert 0 in at_dicts["bytes0"] and any(b is not None for b in at_dicts["bytes"])
    first = nodes[0]
    assert list(first)[:4] == ["kind", "name", "thread", "rank"]
    assert list(first)[-5:] == ["duration", "gap", "release", "start", "step"]
    # each graph's dicts are its own: a change lands in the copy alone
    copy.nodes[0]["duration"] = -1.0
    assert g.nodes[0]["duration"] != -1.0 and task_columns(pickled) is not None
    assert dict(pickled.nodes(data=True)) == nodes


def test_a_priority_policy_reads_the_columns_as_the_dicts(gpu_trace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from daydream.graph.adjacency import attrs_of
    from daydream.simulation.policies import Policy, parse_policy

    monkeypatch.setattr(engine, "COMPILED_MIN_TASKS", 0)
    read: list[list[float] | None] = []
    priorities = Policy.priorities
    monkeypatch.setattr(Policy, "priorities", lambda self, values: read.append(priorities(self, values)) or read[-1])
    policy = parse_policy("priority:-gap")
    g = build_graph(load_trace(gpu_trace), "all")
    from_columns = engine.simulate(g, policy)
    assert task_columns(g) is not None
    attrs_of(g)  # the dicts made: read from them
    from_dicts = engine.simulate(g, policy)
    assert len(read) == 2 and read[0] == read[1] and read[0] and any(x != 0.0 for x in read[0])
    assert (
        from_columns.start.tolist() == from_dicts.start.tolist()
        and from_columns.end.tolist() == from_dicts.end.tolist()
    )


def test_a_ranks_fingerprint_reads_the_columns_as_the_dicts(gpu_trace: Path) -> None:
    from daydream.graph.adjacency import attrs_of, predecessors_of
    from daydream.graph.job import rank_fingerprint

    for step in (None, "all"):
        g = build_graph(load_trace(gpu_trace), step)
        from_columns = rank_fingerprint(g)
        assert task_columns(g) is not None and edge_arrays(g) is not None  # read as held
        attrs_of(g), predecessors_of(g)  # the dicts made: read from them
        assert rank_fingerprint(g) == from_columns


def test_readers_of_a_built_graph_see_the_same_graph(gpu_trace: Path) -> None:
    trace = load_trace(gpu_trace)
    made = build_graph(trace, "all")
    made.number_of_edges()  # its dicts made
    edges = _edges(made)
    for read in (
        lambda g: _edges(g),
        lambda g: _edges(copy_graph(g)),
        lambda g: _edges(g.copy()),
        lambda g: _edges(pickle.loads(pickle.dumps(g))),
    ):
        assert read(build_graph(load_trace(gpu_trace), "all")) == edges
    # a change through networkx's API makes the dicts first and lands in them
    g = build_graph(load_trace(gpu_trace), "all")
    g.add_edge(0, len(g) - 1, kind="sync", lag=0.0)
    assert g.number_of_edges() == made.number_of_edges() + 1 and g.pred[len(g) - 1][0]["kind"] == "sync"
    g = build_graph(load_trace(gpu_trace), "all")
    g.remove_node(0)
    assert 0 not in g.succ and all(0 not in parents for parents in g.pred.values())


def test_a_pickled_built_graph_keeps_its_arrays(gpu_trace: Path) -> None:
    g = pickle.loads(pickle.dumps(build_graph(load_trace(gpu_trace), "all")))
    assert isinstance(g, TaskGraph) and edge_arrays(g) is not None
    assert g.number_of_edges() > 0 and edge_arrays(g) is None


def test_an_empty_task_graph_is_a_digraph() -> None:
    g = TaskGraph()
    g.add_edge("a", "b", kind="thread")
    assert list(g.edges) == [("a", "b")] and edge_arrays(g) is None
    assert build_graph(load_trace(EXAMPLE)).number_of_nodes() > 0


def test_the_breakdown_finds_the_threads_that_only_launch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the synthetic trace's launching thread runs no op of its own: its launches alone make its CPU time count
    from synth import make_trace, write_trace

    monkeypatch.setattr(engine, "COMPILED_MIN_TASKS", 0)
    path = write_trace(tmp_path / "t.json", make_trace())
    r = replay(path, step="all")
    assert edge_arrays(r.graph) is not None
    g = build_graph(load_trace(path), "all")
    g.number_of_edges()
    assert replay_graph(g).report.breakdown == r.report.breakdown
    assert r.report.breakdown["cpu_only_us"] + r.report.breakdown["cpu_gpu_overlap_us"] > 0


def test_a_copy_of_a_built_graph_holds_its_arrays_and_is_a_copy(gpu_trace: Path) -> None:
    g = build_graph(load_trace(gpu_trace), "all")
    copy = copy_graph(g)
    assert isinstance(copy, TaskGraph) and edge_arrays(copy) is not None and edge_arrays(g) is not None
    copy.add_edge(0, len(copy) - 1, kind="sync", lag=1.0)  # the copy's dicts made and changed; the original's not
    assert edge_arrays(g) is not None and not g.has_edge(0, len(g) - 1)
    copy.remove_edge(0, len(copy) - 1)
    # the same dicts, in the same order, as a copy of the graph with its dicts made first (each task's parents in
    # the order of the tasks, as copy_graph walks them)
    assert g.nodes[0] and task_columns(g) is None  # its task dicts made too
    of_dicts = copy_graph(g)
    assert type(of_dicts) is nx.DiGraph
    assert _edges(copy) == _edges(of_dicts)
    assert [(v, list(p.items())) for v, p in copy.pred.items()] == [
        (v, list(p.items())) for v, p in of_dicts.pred.items()
    ]
    assert list(copy.nodes(data=True)) == list(of_dicts.nodes(data=True))
