"""Running .whatif scripts on a graph: a Session holds the baseline, the changed graph, the bindings and what
each statement did. ``daydream run`` and ``daydream repl`` are thin layers over it.

A Session puts together units that each do one thing: ``GraphState`` (graph_state.py: the copy, the baseline,
the policy, the cached prediction), ``Environment`` (environment.py: what expressions see), ``ParamBinder``
(params.py: ``param`` values), ``Recorder`` (effects.py: effects, warnings, printed lines), ``Loader``
(library.py: script files and texts) and ``Executor`` (execute.py: one method per kind of statement).

A script is data: nothing here evaluates Python or opens a file other than the scripts it includes (.whatif files
in allowed folders: library.py), and every run is bounded (limits.py): the size of what it makes, and its work.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar, overload

import networkx as nx

from daydream.dsl import ast
from daydream.dsl.check import Checker, user_attributes
from daydream.dsl.effects import Effect, Recorder
from daydream.dsl.environment import Environment
from daydream.dsl.execute import Executor
from daydream.dsl.graph_state import GraphState
from daydream.dsl.library import Loader
from daydream.dsl.limits import Budget, Scope
from daydream.dsl.params import ParamBinder, script_name
from daydream.dsl.parse import parse_script
from daydream.errors import ScriptError, did_you_mean
from daydream.graph.adjacency import copy_graph
from daydream.simulation import EARLIEST, Policy, Timeline

__all__ = ["Effect", "Session", "copy_graph", "load_scripts"]

T = TypeVar("T")


class _Forward(Generic[T]):
    """A Session attribute that is one of its units' attributes: ``graph = _Forward("state")`` reads and writes
    ``session.state.graph``."""

    def __init__(self, unit: str, name: str | None = None) -> None:
        self.unit = unit
        self.name = name or ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = self.name or name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> _Forward[T]: ...

    @overload
    def __get__(self, obj: object, owner: type | None = None) -> T: ...

    def __get__(self, obj: object | None, owner: type | None = None) -> T | _Forward[T]:
        if obj is None:
            return self
        return getattr(getattr(obj, self.unit), self.name)  # type: ignore[no-any-return]

    def __set__(self, obj: object, value: T) -> None:
        setattr(getattr(obj, self.unit), self.name, value)


class Session:
    """A graph under what-if changes.

    ``graph`` is never changed: the session works on a copy (``copy=False`` changes it in place, for a caller
    that has no further use for it, after taking the baseline). ``params`` override script params by name
    (values, or strings parsed as .whatif expressions, as ``-p name=value`` gives them). ``budget``: the units of
    work each run may do (None: ``limits.default_budget`` of the graph's size; see docs/language.md#limits);
    ``include_dirs``: more
    folders whose .whatif files scripts may include.
    """

    # the graph, its baseline and the prediction
    graph: _Forward[nx.DiGraph] = _Forward("state")
    policy: _Forward[Policy] = _Forward("state")
    policy_text: _Forward[str] = _Forward("state")
    version: _Forward[int] = _Forward("state")
    samples: _Forward[float] = _Forward("state")
    # what expressions see
    scope: _Forward[dict[str, Any]] = _Forward("env")
    attributes: _Forward[set[str]] = _Forward("env")
    # params
    params: _Forward[dict[str, Any]] = _Forward("binder", "given")
    param_values: _Forward[dict[str, Any]] = _Forward("binder", "values")
    param_units: _Forward[dict[str, str]] = _Forward("binder", "units")
    # what the statements did and printed
    effects: _Forward[dict[tuple[str, int, int], Effect]] = _Forward("recorder")
    warnings: _Forward[list[str]] = _Forward("recorder")
    printed: _Forward[list[str]] = _Forward("recorder")
    on_print: _Forward[Callable[[str], None] | None] = _Forward("recorder")

    def __init__(
        self,
        graph: nx.DiGraph,
        params: dict[str, Any] | None = None,
        policy: Policy = EARLIEST,
        copy: bool = True,
        on_print: Callable[[str], None] | None = None,
        budget: int | None = None,
        include_dirs: Sequence[str | os.PathLike[str]] | None = None,
    ) -> None:
        self.budget = Budget(budget, graph.number_of_nodes())  # spent afresh by each check and each run
        self.loader = Loader(include_dirs)
        self._texts = self.loader.texts  # every script's text, for error messages and statement sources
        self.state = GraphState(graph, policy, copy, self.loader.error)
        self.recorder = Recorder(self.loader.source, on_print, self.loader.in_library)
        self.env = Environment(self.state, self.recorder, self.loader, self.budget)
        self.binder = ParamBinder(params, self.env, self._texts)
        self.executor = Executor(self.state, self.env, self.binder, self.recorder, self.loader)

    # ---- predictions --------------------------------------------------------------------------------------

    @property
    def baseline(self) -> Timeline:
        return self.state.baseline

    @property
    def baseline_us(self) -> float:
        return self.state.baseline_us

    @property
    def measured_us(self) -> float:
        return self.state.measured_us

    def predict(self) -> Timeline:
        """Simulate the graph as changed so far (cached until the next change)."""
        return self.state.predict()

    @property
    def predicted_us(self) -> float:
        return self.state.predicted_us

    # ---- loading scripts ----------------------------------------------------------------------------------

    def load(self, path: str | os.PathLike[str]) -> ast.Script:
        """Parse a script file (each file once)."""
        return self.loader.load(path)

    def check(self, script: ast.Script, fresh_scope: bool = False) -> Checker:
        """Static checks against what this session has bound (nothing, with ``fresh_scope``); raises ScriptError."""
        self._texts[script.file] = script.text
        known = set() if fresh_scope else set(self.env.scope)
        self.budget.reset()
        checker = Checker(
            self.loader.resolve_include, known=known, attributes=set(self.env.attributes), budget=self.budget
        )
        checker.check(script)
        return checker

    # ---- running ------------------------------------------------------------------------------------------

    def run(
        self, script: ast.Script | str | os.PathLike[str], fresh_scope: bool = True, checked: bool = False
    ) -> list[Effect]:
        """Check (unless ``checked`` already), then run a script (a parsed Script, or a path). Each script has its
        own bindings unless ``fresh_scope`` is False (the REPL keeps one scope for the session). The check and the
        run may each do ``budget`` units of work."""
        if not isinstance(script, ast.Script):
            script = self.load(script)
        self._texts[script.file] = script.text
        env = self.env
        saved = env.scope
        saved_origins = self.executor.origins
        if fresh_scope:
            env.scope = Scope()
            self.executor.origins = {}
        try:
            if not checked:
                self.check(script)
            self.budget.reset()
            env.attributes |= user_attributes(script, self.loader.resolve_include)
            before = self.recorder.start_run()
            self.executor.run(script.statements, script)
            return self.recorder.since(before)
        finally:
            if fresh_scope:
                env.scope = saved
                self.executor.origins = saved_origins

    def execute(self, text: str, file: str = "<repl>") -> list[Effect]:
        """Run statements typed at the REPL, in the session's one scope."""
        script = parse_script(text, file)
        return self.run(script, fresh_scope=False)

    def unused_params(self) -> list[str]:
        """Params given to the session that no script run so far declared."""
        return self.binder.unused()


def load_scripts(
    session: Session, scripts: Sequence[str | os.PathLike[str] | ast.Script]
) -> tuple[list[ast.Script], list[set[str]]]:
    """Parse and check every script before any runs; params given that no script declares are an error. Returns
    the scripts and the params each declares (its includes' too)."""
    parsed = [s if isinstance(s, ast.Script) else session.load(s) for s in scripts]
    declared: set[str] = set()
    scoped: set[str] = set()  # -p ddp.link: ddp's link alone
    each: list[set[str]] = []
    for script in parsed:
        names = set(session.check(script, fresh_scope=True).params)
        each.append(names)
        declared |= names
        scoped |= {f"{script_name(script.file)}.{n}" for n in names}
    unknown = sorted(set(session.params) - declared - scoped)
    if unknown:
        have = ", ".join(sorted(declared)) + " (each also as SCRIPT.NAME)" if declared else "none"
        hints = [h for u in unknown if (h := did_you_mean(u, declared))]
        given = "-p" if session.binder.command_line else "params"
        raise ScriptError(
            f"unknown parameter{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} ({given}): the scripts declare"
            f" {have}" + "".join(f"; {h}" for h in hints)
        )
    return parsed, each
