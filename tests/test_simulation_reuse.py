"""A what-if session's predictions reuse the graph as the simulation read it (``simulate(reuse=True)``): only the
durations are read again while nothing else changed, and every other change through the edit functions reads the
graph afresh. Each prediction is held to a fresh simulation of the same graph, to the bit."""

from __future__ import annotations

from collections.abc import Iterator

import networkx as nx
import pytest

import daydream.simulation.engine as engine
from daydream import build_graph, load_trace
from daydream.api.demo import bundled_example
from daydream.dsl import Session
from daydream.graph import derived
from daydream.graph.adjacency import copy_graph
from daydream.simulation import Timeline, simulate

pytest.importorskip("daydream.simulation.compiled")


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The compiled loop for every graph (the bundled example is small), and a count of the graph's full reads."""
    monkeypatch.setattr(engine, "COMPILED_MIN_TASKS", 0)
    count = [0]
    read = engine.read_arrays

    def counted(graph: nx.DiGraph) -> engine.GraphArrays:
        count[0] += 1
        return read(graph)

    monkeypatch.setattr(engine, "read_arrays", counted)
    yield count


@pytest.fixture(scope="module")
def built() -> nx.DiGraph:
    return build_graph(load_trace(bundled_example()), "all")


@pytest.fixture
def graph(built: nx.DiGraph) -> nx.DiGraph:
    return copy_graph(built)  # a copy keeps none of the derived values a test before kept on its graph


def assert_same(a: Timeline, b: Timeline) -> None:
    assert a.start.tobytes() == b.start.tobytes()
    assert a.end.tobytes() == b.end.tobytes()
    assert a.cause.tolist() == b.cause.tolist()
    assert a.threads == b.threads


# each change a script makes, with whether the graph must be read again for the prediction after it
CHANGES = [
    ("scale (select cpu where duration > 50us) by 0.5", False),
    ("set (select cpu where duration > 20us).duration = 40us", False),
    ("set (select cpu where duration > 20us).gap = 100us", True),
    ('set (select cpu where duration > 30us).tag = "x"', True),  # any other attribute: read again (what it feeds)
    ("set first(select cpu, 1).release = 5ms", True),
    ("scale cpu by 1.1", False),
    ('insert cpu "extra" after first(select cpu where duration > 30us, 1) duration 300us', True),
    ("remove first(select cpu where duration > 30us and duration < 200us, 3)", True),
    ("wait last(select cpu, 2) for first(select cpu, 1)", True),
    ("schedule priority duration", False),
    ("scale cpu by 0.8", False),
]


def test_each_prediction_is_a_fresh_simulation_of_the_graph_changed(graph: nx.DiGraph, reads: list[int]) -> None:
    session = Session(graph)
    base = session.baseline
    assert_same(base, simulate(graph))
    for statement, read_again in CHANGES:
        before = reads[0]
        session.execute(statement)
        predicted = session.predict()
        assert reads[0] - before == (1 if read_again else 0), statement
        assert_same(predicted, simulate(session.graph, session.state.policy))  # without reuse: read afresh
        assert predicted.makespan() != base.makespan() or statement.startswith("schedule"), statement


def test_the_copy_of_a_session_starts_from_the_baseline_s_arrays(graph: nx.DiGraph, reads: list[int]) -> None:
    session = Session(graph)
    session.baseline  # noqa: B018 - reads the baseline graph
    assert reads[0] == 1
    session.execute("scale (select cpu where duration > 50us) by 0.5")
    session.predict()
    assert reads[0] == 1  # the copy was the baseline's graph: only its durations were read
    kept = derived.cached(session.graph, engine._ARRAYS, engine._ARRAYS_DEPEND_ON)
    assert kept is not None and kept.attrs[0] is next(iter(session.graph.nodes.values()))  # the copy's own dicts


def test_a_baseline_simulated_after_a_change_is_not_carried(graph: nx.DiGraph, reads: list[int]) -> None:
    session = Session(graph)
    session.execute("set (select cpu where duration > 20us).gap = 100us")
    session.baseline  # noqa: B018 - the copy changed already: nothing carried
    predicted = session.predict()
    assert reads[0] == 2
    assert_same(predicted, simulate(session.graph))


def test_without_reuse_nothing_is_kept(graph: nx.DiGraph, reads: list[int]) -> None:
    g = nx.DiGraph(graph)
    simulate(g)
    simulate(g)
    assert reads[0] == 2
    assert derived.cached(g, engine._ARRAYS, engine._ARRAYS_DEPEND_ON) is None


def test_a_job_s_predictions_with_collectives_are_fresh_simulations(reads: list[int]) -> None:
    from test_multirank import job, rank_graph

    graph = job([rank_graph([100.0, 80.0]), rank_graph([140.0, 60.0]), rank_graph([90.0, 120.0])])
    session = Session(graph)
    base = session.baseline
    assert base.arrival is not None  # collectives across ranks: the gangs are part of the arrays kept
    for statement in [
        "scale (select kernel where rank == 1) by 2",
        "scale comm by 0.5",
        "set (select comm).gap = 3us",
        "scale kernel by 0.7",
    ]:
        session.execute(statement)
        predicted = session.predict()
        fresh = simulate(session.graph, session.state.policy)
        assert_same(predicted, fresh)
        assert predicted.arrival is not None and fresh.arrival is not None
        assert predicted.arrival.tobytes() == fresh.arrival.tobytes()
    assert reads[0] == 1 + 4 + 1  # the baseline, the four fresh simulations, the prediction after the gap was set
