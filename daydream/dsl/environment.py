"""What a session's expressions see (``evaluate.Env``): the graph, the task attributes, the names the scripts
bound, the kind words and the built-in values ``baseline``, ``measured``, ``predicted`` and ``samples``."""

from __future__ import annotations

from typing import Any

import networkx as nx

from daydream.dsl import ast
from daydream.dsl.check import BUILTIN_VALUES
from daydream.dsl.effects import Recorder
from daydream.dsl.evaluate import compile_expression
from daydream.dsl.graph_state import GraphState
from daydream.dsl.library import Loader
from daydream.dsl.limits import SIMULATION_COST, Budget, Scope
from daydream.errors import ScriptError, did_you_mean, listed
from daydream.files import clip
from daydream.graph.adjacency import attrs_of
from daydream.graph.schema import TASK_ATTRIBUTES
from daydream.graph.select import KIND_SELECTORS, Selection, select

# attributes of a few values each, listed where a select asks for one no task has
CATEGORIES = ("kind", "class", "phase", "bound")


def _compared(where: Any) -> list[tuple[str, list[str]]]:
    """The (attribute, strings) a where-clause asks tasks to equal: ``class == "gemm"``, ``class in ["a", "b"]``,
    through ``and`` / ``or`` / ``not``."""
    if isinstance(where, ast.Unary):
        return _compared(where.operand)
    if not isinstance(where, ast.Binary):
        return []
    if where.op in ("and", "or"):
        return _compared(where.left) + _compared(where.right)
    name, other = (where.left, where.right) if isinstance(where.left, ast.Name) else (where.right, where.left)
    if not isinstance(name, ast.Name):
        return []
    items = (
        other.items if where.op == "in" and isinstance(other, ast.ListExpr) else (other,) if where.op == "==" else ()
    )
    strings = [x.value for x in items if isinstance(x, ast.Literal) and isinstance(x.value, str)]
    return [(name.id, strings)] if strings else []


class Environment:
    """``scope`` holds the bindings of the script running (a new dict per script unless the session keeps one);
    ``attributes`` the task attributes, the trace's and those the scripts create."""

    def __init__(self, state: GraphState, recorder: Recorder, loader: Loader, budget: Budget | None = None) -> None:
        self.state = state
        self.recorder = recorder
        self.loader = loader
        self.attributes: set[str] = set(TASK_ATTRIBUTES)
        self.scope: dict[str, Any] = Scope()  # its values' bytes bounded (limits.MAX_VALUE_BYTES)
        self.budget = budget if budget is not None else Budget()  # the work the expressions may do

    @property
    def graph(self) -> nx.DiGraph:
        return self.state.graph

    def value(self, expr: Any) -> Any:
        """The value of an expression that has one value (not one per task)."""
        return compile_expression(expr, self).constant()

    def is_bound(self, name: str) -> bool:
        return name in self.scope

    def knows(self, name: str) -> bool:
        """Whether ``name`` means something here: a binding, a kind of task, a built-in value, a task attribute."""
        return name in self.scope or name in KIND_SELECTORS or name in BUILTIN_VALUES or name in self.attributes

    def lookup(self, name: ast.Name) -> Any:
        n = name.id
        if n in self.scope:
            return self.scope[n]
        if n in KIND_SELECTORS:
            self.budget.charge(len(self.graph))
            return select(self.graph, n)
        if n == "baseline":
            return self.state.baseline_us
        if n == "measured":
            return self.state.measured_us
        if n == "baseline_span":
            return self.state.baseline_span_us
        if n == "samples":
            return self.state.samples
        if n == "predicted":
            if self.state.stale():
                self.budget.charge(len(self.graph) * SIMULATION_COST)  # the graph changed: simulated again
            return self.state.predicted_us
        if n in self.attributes:
            raise self.error(
                f"{n!r} is a task attribute: it has a value per task; a selection's values are SEL.{n}", name
            )
        raise self.error(f"unknown name {n!r}", name, did_you_mean(n, [*self.scope, *KIND_SELECTORS, *BUILTIN_VALUES]))

    def error(self, message: str, node: Any, hint: str | None = None) -> ScriptError:
        return self.loader.error(message, node, hint)

    def selected(self, node: ast.Select, selection: Selection) -> None:
        self.matched(node, len(selection))

    def matched(self, node: ast.Select, count: int) -> None:
        """A select matched ``count`` tasks (a warning where none, naming what its comparisons ask for that no task
        has: ``class == "gem"``, the trace's classes and the closest)."""
        if not count:
            if node.where is not None:
                self.budget.charge(len(self.graph))  # the hint's walk over every task's values (_absent)
            absent = self._absent(node.where) if node.where is not None else ""
            self.recorder.noop(node.pos, f"`{clip(self.loader.source(node), 200)}` matches no task" + absent)

    def _absent(self, where: Any) -> str:
        """``; no task has class "gem" (the trace's classes: ...); did you mean 'gemm'?`` for each value a
        where-clause compares an attribute with (``==``, ``in``) that no task of the graph has: the values listed for
        an attribute of a few (CATEGORIES), the closest one for any."""
        notes = []
        nodes = attrs_of(self.graph).values()
        for attr, wanted in _compared(where):
            values = {v for a in nodes if isinstance(v := a.get(attr), str)}
            for w in wanted:
                if w in values:
                    continue
                shown = f" (the trace's: {listed(sorted(values))})" if attr in CATEGORIES else ""
                hint = did_you_mean(w, values)
                if shown or hint:
                    notes.append(f"no task has {attr} {clip(repr(w), 100)}{shown}" + (f"; {hint}" if hint else ""))
        return "".join(f"; {n}" for n in notes[:3])
