"""The incremental topological order (daydream.graph.order) agrees with a full search on random edits."""

from __future__ import annotations

import random

import networkx as nx

from daydream.graph.order import edited, find_back_edge_cycle, forget, place_new, topological_order


def random_dag(rng: random.Random, n: int = 60, p: float = 0.05) -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    ranks = list(range(n))
    rng.shuffle(ranks)
    g.add_edges_from((u, v) for u in range(n) for v in range(n) if ranks[u] < ranks[v] and rng.random() < p)
    return g


def is_valid(g: nx.DiGraph, order: dict[int, float]) -> bool:
    return all(order[u] < order[v] for u, v in g.edges)


def test_random_edges_are_refused_exactly_when_they_close_a_cycle() -> None:
    rng = random.Random(7)
    refused = accepted = 0
    for _ in range(20):
        g = random_dag(rng)
        for _ in range(80):
            u, v = rng.sample(list(g.nodes), 2)
            if g.has_edge(u, v):
                continue
            order = topological_order(g)
            assert order is not None and is_valid(g, order)
            g.add_edge(u, v)
            cyclic = not nx.is_directed_acyclic_graph(g)
            assert find_back_edge_cycle(g, order, [(u, v)]) == cyclic
            if cyclic:
                g.remove_edge(u, v)
                forget(g)
                refused += 1
            else:
                edited(g, order)
                assert is_valid(g, order)
                accepted += 1
    assert refused > 50 and accepted > 50


def test_new_tasks_get_a_place_between_their_parents_and_children() -> None:
    g = nx.DiGraph([(0, 1), (1, 2)])
    order = topological_order(g)
    assert order is not None
    g.add_edges_from([(0, "x"), ("x", 2), (2, "y")])
    place_new(g, order, ["x", "y"])
    assert order[0] < order["x"] < order[2] < order["y"]
    g.add_edge("y", 1)  # 1 -> 2 -> y -> 1
    assert find_back_edge_cycle(g, order, [("y", 1)])


def test_a_stale_order_is_recomputed() -> None:
    g = nx.DiGraph([(0, 1)])
    first = topological_order(g)
    g.add_edge(1, 2)  # made outside the module: a new task
    again = topological_order(g)
    assert again is not first and again is not None and is_valid(g, again)
    from daydream.graph import add_dependency

    add_dependency(g, 2, 0, "sync")  # drops the cached order
    assert topological_order(g) is None  # a cycle already


def test_check_links_finds_a_broken_chain_near_the_edit() -> None:
    import pytest

    from daydream.errors import DaydreamError
    from daydream.graph import add_dependency, add_task
    from daydream.graph.edit import check_links

    g = nx.DiGraph()
    a, b, c = (add_task(g, n, "cpu", "cpu:1/1", 1.0) for n in "abc")
    add_dependency(g, a, c, "thread")
    check_links(g, [c])
    add_dependency(g, b, c, "thread")  # two thread predecessors
    with pytest.raises(DaydreamError, match="more than one thread neighbour"):
        check_links(g, [a])
