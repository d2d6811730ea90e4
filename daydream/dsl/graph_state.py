"""The graph a session changes: the copy it works on, the baseline it is compared with, the schedule policy, the
prediction (simulated again only after a change), and the samples a step processes relative to the trace."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import networkx as nx

from daydream.dsl.evaluate import Expression
from daydream.dsl.values import format_value
from daydream.graph import derived
from daydream.graph.adjacency import attrs_of, copy_graph
from daydream.simulation import Policy, Timeline, carry_arrays, simulate

PRIORITY_ATTRIBUTE = "schedule_priority"


class GraphState:
    """``graph`` is a copy of the graph given (``copy=False``: that graph itself, its baseline simulated first);
    ``version`` counts the changes, so ``predict`` simulates once per version. ``error`` makes the ScriptError
    for a priority that is not a number."""

    def __init__(self, graph: nx.DiGraph, policy: Policy, copy: bool, error: Callable[[str, Any], Exception]) -> None:
        self.baseline_graph: nx.DiGraph | None = graph if copy else None
        self.base_policy = policy
        self._baseline: Timeline | None = None
        if not copy:
            self._baseline = simulate(graph, policy, reuse=True)
            self._baseline_us = self._baseline.step_us()
        self.graph = copy_graph(graph) if copy else graph
        self.policy = policy
        self.policy_text = (
            policy.kind
            if policy.kind != "priority"
            else f"priority {'-' if policy.descending else ''}{policy.attribute}"
        )
        self.priority: Expression | None = None
        self.version = 0
        # samples per step over the trace's (`scale samples by F`): throughput after / before = samples x speedup
        self.samples = 1.0
        self._timeline: tuple[int, Timeline] | None = None
        self._predicted_us: tuple[int, float] | None = None
        self._error = error

    def changed(self) -> None:
        """The graph or the policy changed: the next prediction simulates again."""
        self.version += 1

    def schedule(self, policy: Policy, text: str, priority: Expression | None = None) -> None:
        """Predict with ``policy`` from now on; ``priority`` gives each task its ``PRIORITY_ATTRIBUTE`` at
        prediction."""
        self.policy = policy
        self.policy_text = text
        self.priority = priority
        self.changed()

    @property
    def baseline(self) -> Timeline:
        if self._baseline is None:
            assert self.baseline_graph is not None
            self._baseline = simulate(self.baseline_graph, self.base_policy, reuse=True)
            self._baseline_us = self._baseline.step_us()
            if self.version == 0:  # the copy is the graph as it was: its first prediction reads only the durations
                carry_arrays(self.baseline_graph, self.graph)
        return self._baseline

    @property
    def baseline_us(self) -> float:
        self.baseline  # noqa: B018 - computes it
        return self._baseline_us

    @property
    def baseline_span_us(self) -> float:
        """The unchanged graph's simulated makespan: first start to last end over every step it holds (the context
        step too), for a script that relates work summed over the graph to time."""
        return self.baseline.makespan()

    @property
    def measured_us(self) -> float:
        return float(self.graph.graph.get("measured_us", math.nan))

    def stale(self) -> bool:
        """Whether ``predict`` would simulate (the graph or the policy changed since the last prediction)."""
        return self._timeline is None or self._timeline[0] != self.version

    def predict(self) -> Timeline:
        """Simulate the graph as changed so far (cached until the next change)."""
        if self._timeline is not None and self._timeline[0] == self.version:
            return self._timeline[1]
        if self.priority is not None:
            fn = self.priority.value
            for node, a in attrs_of(self.graph).items():
                value = fn(a)
                if isinstance(value, bool):
                    value = int(value)
                if value is not None and (not isinstance(value, (int, float)) or value != value):
                    raise self._error(
                        f"a schedule priority must be a number; task {node} ({a['name']!r}) gets {format_value(value)}",
                        self.priority.node,
                    )
                a[PRIORITY_ATTRIBUTE] = value
            # written here, not through the edit functions: what depends on this attribute alone (a selection
            # index) is stale; the simulation's kept arrays, which read priorities afresh, are not
            derived.changed(self.graph, derived.attribute(PRIORITY_ATTRIBUTE))
        timeline = simulate(self.graph, self.policy, reuse=True)  # every change goes through daydream.graph.edit
        self._timeline = (self.version, timeline)
        return timeline

    @property
    def predicted_us(self) -> float:
        # kept per version: the step's time is read from the timeline's tasks (about 0.3 ms on 39k tasks), and
        # `predicted` in a loop on an unchanged graph reads it again and again, charged nothing (not stale)
        if self._predicted_us is not None and self._predicted_us[0] == self.version:
            return self._predicted_us[1]
        value = self.predict().step_us()
        self._predicted_us = (self.version, value)
        return value
