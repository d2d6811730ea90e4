"""What a dependency graph holds per top-level op: the graph's runtime calls grouped back into the units
:func:`daydream.perf.cpu.top_level_ops.top_level_items` sweeps from a trace (see :mod:`daydream.perf.cpu.overheads`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from daydream.graph.schema import GPU_KINDS
from daydream.perf.cpu.overhead_lookup import per_op
from daydream.perf.cpu.overhead_table import Overheads
from daydream.perf.cpu.top_level_ops import Item, Kernel, Launch, extend_data_loading
from daydream.trace.runtime_calls import copy_waits, host_waits


def graph_items(graph: nx.DiGraph, overheads: Overheads | None = None) -> list[Item]:
    """The top-level units of a dependency graph, in start order.

    The graph keeps no op boundaries, only each runtime call's ``top_op`` and, where the builder made the graph, the
    ``top_op_id`` that tells two calls of one name apart: one op is a run of consecutive runtime calls of a thread
    under the same top-level op. Without ``top_op_id`` (a graph built by hand) back-to-back ops of one name (a row of
    ``AccumulateGrad``) come as one run; given ``overheads``, such a run is cut between two launches whose traced CPU
    gap is nearer to what separates two ops of that name (T3 + T1 + T2) than to what separates two launches of one
    op (T5)."""
    per_thread: dict[str, list[int]] = {}
    for n, a in graph.nodes(data=True):
        if a["kind"] in ("cpu", "dataloader"):
            per_thread.setdefault(a["thread"], []).append(n)
    items: list[Item] = []
    for tasks in per_thread.values():
        # the wait half of a split call right after its issue, before a call that starts when it does (a wait of 0 us)
        tasks.sort(key=lambda n: (graph.nodes[n]["start"], not graph.nodes[n]["name"].endswith(" [wait]")))
        items += _graph_thread_items(graph, tasks, overheads)
    items.sort(key=lambda it: it.ts)
    return extend_data_loading(items)


def _split_run(run: Item, overheads: Overheads) -> list[Item]:
    between_ops = per_op(overheads.t3, run.name) + overheads.t1_us + per_op(overheads.t2, run.name)
    within_op = per_op(overheads.t5, run.name)
    parts: list[list[Launch]] = [[run.launches[0]]]
    for prev, ln in zip(run.launches, run.launches[1:]):
        gap = ln.ts - prev.end
        if abs(gap - between_ops) < abs(gap - within_op):
            parts.append([])
        parts[-1].append(ln)
    if len(parts) == 1:
        return [run]
    return [Item("op", run.name, p[0].ts if i else run.ts, p[-1].end, tuple(p)) for i, p in enumerate(parts)]


@dataclass
class _OpRun:
    """Consecutive runtime calls of one thread under one top-level op (``op_id``: its ``top_op_id``, None where
    the graph has none)."""

    name: str
    op_id: Any
    ts: float
    end: float
    launches: list[Launch] = field(default_factory=list)


def _graph_thread_items(graph: nx.DiGraph, tasks: list[int], overheads: Overheads | None = None) -> list[Item]:
    items: list[Item] = []
    run: _OpRun | None = None

    def close() -> None:
        nonlocal run
        if run is not None:
            it = Item("op", run.name, run.ts, run.end, tuple(run.launches))
            exact = run.op_id is not None  # the run is one op call: nothing to guess
            items.extend(
                _split_run(it, overheads) if overheads is not None and not exact and len(it.launches) > 1 else [it]
            )
            run = None

    for n in tasks:
        a = graph.nodes[n]
        start, end = float(a["start"]), float(a["start"]) + float(a["duration"])
        if a["kind"] == "dataloader":
            close()
            items.append(Item("dataloader", a["name"], start, end))
            continue
        if a["name"].endswith(" [wait]"):  # the builder splits a blocking call in two: the issue, then the wait
            if run is not None and run.launches and a["name"] == run.launches[-1].name + " [wait]":
                run.launches[-1] = _waited(run.launches[-1], end)
                run.end = max(run.end, end)
            elif run is None and items and items[-1].kind == "call" and a["name"] == items[-1].name + " [wait]":
                last = items[-1]
                items[-1] = Item("call", last.name, last.ts, end, (_waited(last.launches[0], end),))
            continue
        launch = _graph_launch(graph, n)
        if a.get("top_op") is None:
            if launch is not None:
                close()
                items.append(Item("call", a["name"], start, end, (launch,)))
            elif a.get("op") == a["name"]:  # an op that launched nothing is one task
                close()
                items.append(Item("op", a["name"], start, end))
            continue
        op_id = a.get("top_op_id")
        if run is None or run.name != a["top_op"] or run.op_id != op_id:
            close()
            run = _OpRun(a["top_op"], op_id, start, end)
        run.end = end
        if launch is not None:
            run.launches.append(launch)
    close()
    return items


def _waited(ln: Launch, end: float) -> Launch:
    return Launch(ln.name, ln.ts, end, ln.kernels, True, ln.gpu_events)


def _graph_launch(graph: nx.DiGraph, n: int) -> Launch | None:
    a = graph.nodes[n]
    kernels = []
    for _, child, e in graph.out_edges(n, data=True):
        if e.get("kind") != "launch":
            continue
        k = graph.nodes[child]
        kernels.append(
            Kernel(
                k["name"],
                k["kind"] if k["kind"] in ("memcpy", "memset") else "gpu",
                k.get("class", "other"),
                str(k["thread"]),
                float(k["start"]),
                float(k["duration"]),
                k.get("op"),
                k.get("shapes"),
            )
        )
    start = float(a["start"])
    end = start + float(a["duration"])
    name = a["name"]
    # As in the trace sweep (_launch), by the one table (daydream.trace.runtime_calls); a copy call the builder split
    # waits again in its `NAME [wait]` task (_graph_thread_items). Beyond the table: a wait a transform added (a
    # `sync` edge from GPU work); a `sync` edge from another CPU thread (loss.backward() waiting for the autograd
    # engine) is no wait for the device.
    waits = (
        host_waits(name)
        or any(
            k.kind == "memcpy" and copy_waits(name, k.name, start, end, k.start_us, k.start_us + k.duration_us)
            for k in kernels
        )
        or any(
            e.get("kind") == "sync" and graph.nodes[u].get("kind") in GPU_KINDS
            for u, _, e in graph.in_edges(n, data=True)
        )
    )
    if not kernels and not waits:
        return None
    kernels.sort(key=lambda k: k.start_us)
    return Launch(name, start, end, tuple(kernels), waits, len(kernels))
