"""The builder's working data: the tasks found in a trace, as parallel columns, with the dependencies found on each.

Plain data that the builder's stages fill and read in turn (:mod:`~daydream.graph.build_cpu`,
:mod:`~daydream.graph.build_gpu`, :mod:`~daydream.graph.build_edges`, :mod:`~daydream.graph.build_delays`);
:func:`daydream.graph.build.build_graph` runs them and cuts the graph of the selected steps from the result.
Columns rather than a graph: most of the build is sweeps over every task, and lists indexed by task number are what
those sweeps read fastest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec


class InEdge(msgspec.Struct, gc=False):
    """A dependency as the builder holds it, on its child: the parent task, the edge kind (schema.EDGE_KINDS) and
    the delay. For the order kinds (thread, stream) the delay is the parent's ``gap``, and ``lag`` stays 0. A struct
    made in C: a 1M-event trace makes some 420k of them, at half a dataclass's cost each."""

    parent: int
    kind: str
    lag: float = 0.0


@dataclass(slots=True)
class TaskTable:
    """Tasks numbered in order of discovery (CPU tasks, GPU tasks, then those later stages add), as parallel columns."""

    attrs: list[dict[str, Any]] = field(default_factory=list)  # what becomes the task's attributes in the graph
    ts: list[float] = field(default_factory=list)  # traced start
    end: list[float] = field(default_factory=list)  # traced end (of a blocking call's issue: where its wait begins)
    launch_ts: list[float] = field(default_factory=list)  # when the work was issued: a GPU task's launch call's start
    # the runtime call that launched the task (its ``launch`` edge's parent; -1: none): what a GPU task takes its
    # step and phase from, read without a walk over its dependencies
    launcher: list[int] = field(default_factory=list)
    in_edges: list[list[InEdge]] = field(default_factory=list)  # per task, the dependencies that hold it
    # per task, a dependency that holds it only where the window cut all its others (see build._cut)
    fallback_edges: dict[int, InEdge] = field(default_factory=dict)

    def add_task(self, attrs: dict[str, Any], ts: float, dur: float) -> int:
        """A new task, issued when it starts; returns its number."""
        task = len(self.attrs)
        self.attrs.append(attrs)
        self.ts.append(ts)
        self.end.append(ts + dur)
        self.launch_ts.append(ts)
        self.launcher.append(-1)
        self.in_edges.append([])
        return task

    def add_edge(self, u: int, v: int, kind: str, lag: float = 0.0) -> None:
        """``v`` depends on ``u``."""
        self.in_edges[v].append(InEdge(u, kind, lag))
