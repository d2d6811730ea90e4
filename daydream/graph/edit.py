"""Adding tasks and dependencies to a graph by hand (tests, notebooks, and the transforms build on these)."""

from __future__ import annotations

from typing import Any

import networkx as nx

from daydream.errors import DaydreamError
from daydream.graph.build import CPU_KINDS, EDGE_KINDS, GPU_KINDS, ORDER_KINDS


def add_task(
    graph: nx.DiGraph, name: str, kind: str, thread: str, duration: float, gap: float = 0.0,
    release: float | None = None, **attrs: Any,
) -> int:  # fmt: skip
    """Add a task and return its node id (one past the largest integer id in use)."""
    if kind not in CPU_KINDS | GPU_KINDS:
        raise DaydreamError(f"unknown task kind {kind!r}: use one of {sorted(CPU_KINDS | GPU_KINDS)}")
    if duration < 0:
        raise DaydreamError(f"task {name!r}: duration must not be negative (got {duration})")
    node = max((n for n in graph.nodes if isinstance(n, int)), default=-1) + 1
    base = {"kind": kind, "name": name, "thread": thread, "duration": float(duration), "gap": float(gap), "release": release,
            "op": None, "shapes": None, "layer": None, "phase": None, "step": None, "rank": 0}  # fmt: skip
    base.update(attrs)
    graph.add_node(node, **base)
    return node


def add_dependency(graph: nx.DiGraph, parent: Any, child: Any, kind: str, lag: float = 0.0) -> None:
    """``child`` may start once ``parent`` has finished: after the parent's gap for the order kinds
    (thread, stream), after ``lag`` for the others."""
    if kind not in EDGE_KINDS:
        raise DaydreamError(f"unknown dependency kind {kind!r}: use one of {list(EDGE_KINDS)}")
    for n in (parent, child):
        if n not in graph:
            raise DaydreamError(f"no task {n!r} in the graph")
    graph.add_edge(parent, child, **({"kind": kind} if kind in ORDER_KINDS else {"kind": kind, "lag": float(lag)}))
