"""What a graph keeps computed beside it (daydream.graph.derived) follows the edits: an inserted launch call costs
what the graph's launch calls cost now, whatever was inserted before."""

from __future__ import annotations

import networkx as nx
import pytest
from whatif_graph import iteration

from daydream.dsl import Session
from daydream.errors import DaydreamError
from daydream.graph import add_dependency, add_task
from daydream.graph.edit import insert_task, scale, scale_each, set_attribute, set_each, typical_launch_call_us
from daydream.graph.order import topological_order
from daydream.graph.select import select


def _launch_call(graph: nx.DiGraph, kernel: int) -> dict:
    (call,) = [u for u in graph.predecessors(kernel) if graph.edges[u, kernel]["kind"] == "launch"]
    return graph.nodes[call]


def _kernel(graph: nx.DiGraph, name: str) -> int:
    return next(n for n, a in graph.nodes(data=True) if a["name"] == name)


def test_an_inserted_launch_call_costs_the_same_whether_or_not_an_insert_ran_before_the_cpu_got_faster() -> None:
    insert = 'insert gpu "{}" after (select where name == "relu_kernel") duration 1us'
    early = Session(iteration())  # an insert before the CPU is 10x faster: the launch-call cost was measured then
    early.execute(insert.format("first"))
    early.execute("scale cpu by 0.1")
    early.execute(insert.format("second"))
    late = Session(iteration())
    late.execute("scale cpu by 0.1")
    late.execute(insert.format("second"))
    # the hand-built iteration's launch calls take 10 us: 1 us once the CPU is 10x faster
    assert _launch_call(late.graph, _kernel(late.graph, "second"))["duration"] == 1.0
    assert _launch_call(early.graph, _kernel(early.graph, "second"))["duration"] == 1.0
    assert _launch_call(early.graph, _kernel(early.graph, "first"))["duration"] == 1.0  # scaled with the CPU


def test_the_launch_call_cost_follows_durations_changed_by_scale_and_set() -> None:
    g = iteration()
    relu = _kernel(g, "relu_kernel")
    assert typical_launch_call_us(g, "gpu") == 10.0
    insert_task(g, "gpu", "a", 1.0, after=relu)
    assert typical_launch_call_us(g, "gpu") == 10.0  # an inserted call costs the median: it stays
    scale(g, select(g, "cpu"), 0.5)
    assert typical_launch_call_us(g, "gpu") == 5.0
    set_attribute(g, select(g, "cpu", name="cudaLaunchKernel"), "duration", 3.0)
    assert typical_launch_call_us(g, "gpu") == 3.0
    new = insert_task(g, "gpu", "b", 1.0, after=relu)
    assert g.nodes[new[0]]["duration"] == 3.0


def test_derived_indexes_are_not_shared_with_a_copy() -> None:
    g = iteration()
    assert typical_launch_call_us(g, "gpu") == 10.0
    copy = Session(g).graph
    scale(copy, select(copy, "cpu"), 0.1)
    assert typical_launch_call_us(copy, "gpu") == 1.0
    assert typical_launch_call_us(g, "gpu") == 10.0  # the original's durations did not change


def test_a_graph_without_launch_calls_takes_the_default() -> None:
    g = nx.DiGraph()
    add_task(g, "k", "gpu", "gpu:0/7", 5.0)
    assert typical_launch_call_us(g, "gpu") == 5.0


def test_per_task_scale_and_set_keep_the_launch_call_cost_current() -> None:
    g = iteration()
    assert typical_launch_call_us(g, "gpu") == 10.0
    scale_each(g, select(g, "cpu"), lambda a: 0.5 if a["name"] == "cudaLaunchKernel" else 1.0)
    assert typical_launch_call_us(g, "gpu") == 5.0
    set_each(g, select(g, "cpu"), "duration", lambda a: a["duration"] * 2)
    assert typical_launch_call_us(g, "gpu") == 10.0
    with pytest.raises(DaydreamError, match="duration must be a number"):
        set_each(g, select(g, "cpu"), "duration", lambda a: -1.0)


def test_a_scale_by_a_per_task_expression_in_a_script_keeps_the_launch_call_cost_current() -> None:
    session = Session(iteration())
    session.execute('insert gpu "first" after (select where name == "relu_kernel") duration 1us')
    session.execute('scale cpu by 0.1 + 0 * duration')  # a factor per task (it reads an attribute)
    session.execute('insert gpu "second" after (select where name == "relu_kernel") duration 1us')
    assert _launch_call(session.graph, _kernel(session.graph, "second"))["duration"] == 1.0


def test_an_edge_added_through_add_dependency_drops_the_cached_order() -> None:
    g = iteration()
    order = topological_order(g)
    assert order is not None and topological_order(g) is order  # kept
    sync = next(n for n, a in g.nodes(data=True) if a["name"] == "cudaDeviceSynchronize")
    add_dependency(g, sync, next(iter(g.nodes)), "sync")  # closes a cycle
    assert topological_order(g) is None


def test_the_thread_index_outlives_a_removal_and_places_the_next_insert_as_a_fresh_one_would() -> None:
    from daydream.graph import derived
    from daydream.graph.edit import remove

    insert = 'insert gpu "{}" after (select where name == "relu_kernel") duration 1us'
    kept = Session(iteration())
    kept.execute(insert.format("first"))
    index = derived.cached(kept.graph, "thread_members", ())
    assert index is not None
    kept.execute('remove (select where name == "first")')
    assert derived.cached(kept.graph, "thread_members", ())[0] == len(kept.graph)  # still up to date: not rebuilt
    kept.execute(insert.format("second"))
    assert derived.cached(kept.graph, "thread_members", ()) is index
    # the same edits with the index rebuilt before the last insert: the same graph and the same prediction
    fresh = Session(iteration())
    fresh.execute(insert.format("first"))
    remove(fresh.graph, select(fresh.graph, where=lambda a: a["name"] == "first"))
    derived.drop(fresh.graph, "thread_members")
    fresh.execute(insert.format("second"))
    assert sorted(kept.graph.edges) == sorted(fresh.graph.edges)
    assert kept.predicted_us == fresh.predicted_us
    assert dict(kept.graph.nodes(data=True)) == dict(fresh.graph.nodes(data=True))
