"""What a graph keeps computed beside it (daydream.graph.derived) follows the edits: an inserted launch call costs
what the graph's launch calls cost now, whatever was inserted before."""

from __future__ import annotations

import math
import random
import statistics

import networkx as nx
import pytest
from whatif_graph import iteration

from daydream.dsl import Session
from daydream.errors import DaydreamError
from daydream.graph import add_dependency, add_task
from daydream.graph.edit import (
    Placement,
    insert_task,
    scale,
    scale_each,
    set_attribute,
    set_each,
    typical_launch_call_us,
)
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
    insert_task(g, "gpu", "a", 1.0, Placement(after=relu))
    assert typical_launch_call_us(g, "gpu") == 10.0  # an inserted call costs the median: it stays
    scale(g, select(g, "cpu"), 0.5)
    assert typical_launch_call_us(g, "gpu") == 5.0
    set_attribute(g, select(g, "cpu", name="cudaLaunchKernel"), "duration", 3.0)
    assert typical_launch_call_us(g, "gpu") == 3.0
    new = insert_task(g, "gpu", "b", 1.0, Placement(after=relu))
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
    session.execute("scale cpu by 0.1 + 0 * duration")  # a factor per task (it reads an attribute)
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


def _launch_call_us_by_scan(graph: nx.DiGraph, kind: str) -> float:
    """The median launch-call cost from a pass over the whole graph."""
    from daydream.graph.edit import DEFAULT_LAUNCH_CALL_US

    durations = [
        graph.nodes[u]["duration"]
        for v, a in graph.nodes(data=True)
        if a["kind"] == kind
        for u in graph.predecessors(v)
        if graph.edges[u, v]["kind"] == "launch"
    ]
    return statistics.median(durations) if durations else DEFAULT_LAUNCH_CALL_US


class _LaunchCostAsKept:
    """The launch-call cost as the graph kept it before the cost was brought up to date without a pass: the whole
    graph again at the first request after any duration change, kept through inserts and removals."""

    def __init__(self) -> None:
        self.stamp: int | None = None
        self.costs: dict[str, float] = {}

    def __call__(self, graph: nx.DiGraph, kind: str) -> float:
        from daydream.graph import derived

        stamp = derived.indexes(graph).counters.get(derived.DURATIONS, 0)
        if stamp != self.stamp:
            self.stamp, self.costs = stamp, {}
        if kind not in self.costs:
            self.costs[kind] = _launch_call_us_by_scan(graph, kind)
        return self.costs[kind]


@pytest.mark.parametrize("seed", range(12))
def test_the_launch_call_cost_is_what_a_pass_over_the_graph_gives_after_any_edits(seed: int) -> None:
    """Inserts at the median and at other costs, kernels and host calls scaled and set, launches added between tasks
    already there (also from a GPU task), removals, in any order: the cost kept is the one a pass gives."""
    from daydream.graph.edit import remove

    rng = random.Random(seed)
    g = iteration()
    # launch calls of different costs: a median that moves with each edit
    for i, call in enumerate(u for u, a in g.nodes(data=True) if a["name"] == "cudaLaunchKernel"):
        g.nodes[call]["duration"] = [4.0, 10.0, 7.0, 25.0, 13.0][i]
    reference = _LaunchCostAsKept()
    inserted: list[int] = []
    for step in range(40):
        on_s7 = [n for n, a in g.nodes(data=True) if a["thread"] == "gpu:0/7"]
        cpu = [n for n, a in g.nodes(data=True) if a["kind"] == "cpu"]
        gpu = [n for n, a in g.nodes(data=True) if a["kind"] in ("gpu", "comm")]
        what = rng.choice(
            ["insert", "insert", "insert_priced", "scale_gpu", "scale_cpu", "set_cpu", "launch", "gpu_launch", "remove"]
        )
        try:
            if what in ("insert", "insert_priced"):
                launch_us = rng.choice([1.0, 10.0, 37.0]) if what == "insert_priced" else None
                inserted.append(
                    insert_task(
                        g,
                        rng.choice(["gpu", "comm"]),
                        f"k{step}",
                        1.0,
                        Placement(after=rng.choice(on_s7)),
                        launch_us=launch_us,
                    )[-1]
                )
            elif what == "scale_gpu":
                scale(g, select(g, "gpu"), rng.choice([0.5, 2.0]))
            elif what == "scale_cpu":
                scale(g, [rng.choice(cpu)], rng.choice([0.5, 3.0]))
            elif what == "set_cpu":
                set_attribute(g, [rng.choice(cpu)], "duration", rng.choice([2.0, 9.0, 50.0]))
            elif what == "launch":
                add_dependency(g, rng.choice(cpu), rng.choice(gpu), "launch")
            elif what == "gpu_launch":  # a launch from a GPU-side task: its duration changes with the kernels'
                add_dependency(g, rng.choice(gpu), rng.choice(gpu), "launch")
            elif inserted:
                remove(g, [inserted.pop(rng.randrange(len(inserted)))], with_launches=True)
        except DaydreamError:
            pass  # a cycle or a kernel left without its launch: refused, nothing changed
        for kind in ("gpu", "comm", "memcpy"):
            assert typical_launch_call_us(g, kind) == reference(g, kind), (seed, step, what, kind)


def _order_predecessor(graph: nx.DiGraph, node: int) -> int | None:
    found = [u for u in graph.predecessors(node) if graph.edges[u, node]["kind"] in ("thread", "stream")]
    return found[0] if found else None


@pytest.mark.parametrize(("seed", "odd_start"), [(s, [None, "task", "anchor"][s % 3]) for s in range(9)])
def test_a_task_inserted_on_another_thread_follows_the_latest_task_started_by_then(
    seed: int, odd_start: str | None
) -> None:
    """Placed by time on a stream that is not its anchor's: after the stream's task latest by (start, id) at or before
    its own (removed and queued tasks left out), as a pass over the stream finds it; with ties, tasks removed and
    queued ones, and (``odd_start``) a task or an anchor whose start is not a number."""
    from daydream.graph.edit import remove

    rng = random.Random(seed)
    g = iteration()
    side = "gpu:0/9"
    tasks = sorted(
        (rng.choice([0.0, 15.0, 112.0, 132.0, 200.0, 332.0]), add_task(g, "s9", "gpu", side, 3.0)) for _ in range(12)
    )
    for start, u in tasks:
        g.nodes[u]["start"] = start
    if odd_start == "task":
        g.nodes[tasks[5][1]]["start"] = math.nan
    if odd_start == "anchor":
        g.nodes[_kernel(g, "relu_kernel")]["start"] = math.nan  # an anchor at no time: after nothing
    for (_, u), (_, v) in zip(tasks, tasks[1:]):
        add_dependency(g, u, v, "stream")
    anchors = [n for n, a in g.nodes(data=True) if a["thread"] in ("gpu:0/7", "gpu:0/20")]
    placed = 0
    for step in range(30):
        on_side = [n for n, a in g.nodes(data=True) if a["thread"] == side]
        if step % 7 == 6 and len(on_side) > 2:
            remove(g, [rng.choice(on_side)])
            continue
        anchor, where = rng.choice(anchors), rng.choice(["after", "before"])
        a = g.nodes[anchor]
        key = a["start"] + a["duration"] if where == "after" else a["start"]
        queued = rng.random() < 0.15
        try:
            new = insert_task(g, "gpu", f"n{step}", 1.0, Placement(thread=side, queued=queued, **{where: anchor}))[-1]
        except DaydreamError:
            continue  # a wait that closes a cycle: refused
        if queued:
            continue
        placed += 1
        earlier = [
            (float(b["start"]), u)
            for u, b in g.nodes(data=True)
            if b["thread"] == side and u != new and not b.get("queued") and (float(b["start"]), u) <= (key, new)
        ]
        assert _order_predecessor(g, new) == (max(earlier)[1] if earlier else None), (seed, step)
    assert placed > 5


def test_a_call_inserted_at_another_cost_counts_once_durations_change_even_if_only_kernels_changed() -> None:
    g = iteration()
    for i, call in enumerate(u for u, a in g.nodes(data=True) if a["name"] == "cudaLaunchKernel"):
        g.nodes[call]["duration"] = [4.0, 10.0, 7.0, 25.0, 13.0][
            i
        ]  # the kernels' calls: 4, 10, 7, 13 (25: the all-reduce's)
    assert typical_launch_call_us(g, "gpu") == 8.5
    insert_task(g, "gpu", "x", 1.0, Placement(after=_kernel(g, "relu_kernel")), launch_us=37.0)
    assert typical_launch_call_us(g, "gpu") == 8.5  # kept through the insert
    insert_task(g, "gpu", "y", 1.0, Placement(after=_kernel(g, "relu_kernel")))  # at the median: changes no median
    scale(g, select(g, "gpu"), 2.0)  # no host task changed, but a call that does not cost the median came
    assert typical_launch_call_us(g, "gpu") == 8.5 + 1.5 / 2  # 4, 7, 8.5, 10, 13, 37
    scale(g, select(g, "gpu"), 2.0)
    assert typical_launch_call_us(g, "gpu") == 9.25
