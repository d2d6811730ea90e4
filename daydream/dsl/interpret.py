"""Running .whatif scripts on a graph: a Session holds the baseline, the changed graph, the bindings and what
each statement did. ``daydream run`` and ``daydream repl`` are thin layers over it.

A script is data: nothing here evaluates Python or opens a file other than the scripts it includes.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import networkx as nx

from daydream.dsl import ast
from daydream.dsl.check import BUILTIN_VALUES, Checker, user_attributes
from daydream.dsl.evaluate import Expression, compile_expression, format_value
from daydream.dsl.functions import suggest, type_name
from daydream.dsl.library import Loader
from daydream.dsl.parse import parse_expression, parse_script, script_error
from daydream.errors import CheckFailed, DaydreamError, ScriptError
from daydream.graph import edit
from daydream.graph.select import KIND_SELECTORS, TASK_ATTRIBUTES, Selection, group_by, in_time_order, select
from daydream.simulation import EARLIEST, FIFO, Policy, Timeline, simulate

PRIORITY_ATTRIBUTE = "schedule_priority"


@dataclass
class Effect:
    """What one statement did (summed over the iterations of a loop)."""

    file: str
    line: int
    statement: str
    kind: str
    tasks: int = 0  # tasks touched: scaled, set, removed, or the tasks inserted
    added: int = 0
    removed: int = 0
    duration_delta_us: float = 0.0
    runs: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file, "line": self.line, "statement": self.statement, "kind": self.kind, "tasks": self.tasks,
            "added": self.added, "removed": self.removed, "duration_delta_us": self.duration_delta_us, "runs": self.runs,
        }  # fmt: skip

    def describe(self) -> str:
        parts = []
        if self.kind in ("scale", "set"):
            parts.append(f"{self.tasks:,} task{'s' if self.tasks != 1 else ''}")
            if self.duration_delta_us:
                parts.append(f"{self.duration_delta_us / 1e3:+,.3f} ms of task time")
        elif self.kind == "remove":
            parts.append(f"removed {self.removed:,} task{'s' if self.removed != 1 else ''}")
            if self.duration_delta_us:
                parts.append(f"{self.duration_delta_us / 1e3:+,.3f} ms of task time")
        elif self.kind == "insert":
            parts.append(f"added {self.added:,} task{'s' if self.added != 1 else ''}")
            parts.append(f"{self.duration_delta_us / 1e3:+,.3f} ms of task time")
        elif self.kind == "wait":
            parts.append(f"added {self.added:,} wait{'s' if self.added != 1 else ''}")
        elif self.kind == "schedule":
            parts.append("policy set")
        if self.runs > 1:
            parts.append(f"{self.runs} runs")
        return ", ".join(parts)


def copy_graph(graph: nx.DiGraph) -> nx.DiGraph:
    """A copy whose task and edge attribute dicts are new (so changes stay in the copy); values are shared."""
    g = nx.DiGraph()
    g.graph.update({k: (dict(v) if isinstance(v, dict) else list(v) if isinstance(v, list) else v) for k, v in graph.graph.items()})
    g._node.update((n, dict(a)) for n, a in graph._node.items())
    succ, pred = g._succ, g._pred
    for n in graph._node:
        succ[n] = {}
        pred[n] = {}
    for u, nbrs in graph._succ.items():
        su = succ[u]
        for v, e in nbrs.items():
            d = dict(e)
            su[v] = d
            pred[v][u] = d
    return g


class Session:
    """A graph under what-if changes.

    ``graph`` is never changed: the session works on a copy (``copy=False`` changes it in place, for a caller
    that has no further use for it, after taking the baseline). ``params`` override script params by name
    (values, or strings parsed as .whatif expressions, as ``-p name=value`` gives them).
    """

    def __init__(
        self,
        graph: nx.DiGraph,
        params: dict[str, Any] | None = None,
        policy: Policy = EARLIEST,
        copy: bool = True,
        on_print: Callable[[str], None] | None = None,
    ) -> None:
        self.baseline_graph: nx.DiGraph | None = graph if copy else None
        self.base_policy = policy
        self._baseline: Timeline | None = None
        if not copy:
            self._baseline = simulate(graph, policy)
            self._baseline_us = self._baseline.makespan()
        self.graph = copy_graph(graph) if copy else graph
        self.policy = policy
        self.policy_text = policy.kind if policy.kind != "priority" else f"priority {'-' if policy.descending else ''}{policy.attribute}"
        self.priority: Expression | None = None
        self.params: dict[str, Any] = dict(params or {})
        self.used_params: set[str] = set()
        self.param_values: dict[str, Any] = {}
        self.attributes: set[str] = set(TASK_ATTRIBUTES)
        self.scope: dict[str, Any] = {}
        self.warnings: list[str] = []
        self.printed: list[str] = []
        self.on_print = on_print
        self.effects: dict[tuple[str, int, int], Effect] = {}  # by statement position, and run: loops sum up
        self._run = 0
        self.version = 0
        self._timeline: tuple[int, Timeline] | None = None
        self.loader = Loader()
        self._texts = self.loader.texts  # every script's text, for error messages and statement sources
        self._stack: list[str] = []
        self._warned: set[tuple[str, int, int]] = set()

    # ---- predictions --------------------------------------------------------------------------------------

    @property
    def baseline(self) -> Timeline:
        if self._baseline is None:
            assert self.baseline_graph is not None
            self._baseline = simulate(self.baseline_graph, self.base_policy)
            self._baseline_us = self._baseline.makespan()
        return self._baseline

    @property
    def baseline_us(self) -> float:
        self.baseline  # noqa: B018 - computes it
        return self._baseline_us

    @property
    def measured_us(self) -> float:
        return float(self.graph.graph.get("measured_us", math.nan))

    def predict(self) -> Timeline:
        """Simulate the graph as changed so far (cached until the next change)."""
        if self._timeline is not None and self._timeline[0] == self.version:
            return self._timeline[1]
        if self.priority is not None:
            fn = self.priority.value
            for node, a in self.graph._node.items():
                value = fn(a)
                if isinstance(value, bool):
                    value = int(value)
                if value is not None and not isinstance(value, (int, float)):
                    raise self.error(f"a schedule priority must be a number; task {node} ({a['name']!r}) gets {format_value(value)}",
                                     self.priority.node)  # fmt: skip
                a[PRIORITY_ATTRIBUTE] = value
        timeline = simulate(self.graph, self.policy)
        self._timeline = (self.version, timeline)
        return timeline

    @property
    def predicted_us(self) -> float:
        return self.predict().makespan()

    # ---- the environment expressions see ------------------------------------------------------------------

    def is_bound(self, name: str) -> bool:
        return name in self.scope

    def lookup(self, name: ast.Name) -> Any:
        n = name.id
        if n in self.scope:
            return self.scope[n]
        if n in KIND_SELECTORS:
            return select(self.graph, n)
        if n == "baseline":
            return self.baseline_us
        if n == "measured":
            return self.measured_us
        if n == "predicted":
            return self.predicted_us
        if n in self.attributes:
            raise self.error(f"{n!r} is a task attribute: it has a value per task; a selection's values are SEL.{n}", name)
        raise self.error(f"unknown name {n!r}", name, suggest(n, [*self.scope, *KIND_SELECTORS, *BUILTIN_VALUES]))

    def error(self, message: str, node: Any, hint: str | None = None) -> ScriptError:
        pos = getattr(node, "pos", None)
        return script_error(message, pos, self._texts.get(pos.file) if pos else None, hint)

    def selected(self, node: ast.Select, selection: Selection) -> None:
        if not selection:
            self._warn(node.pos, f"`{self._source(node)}` matches no task")

    def _warn(self, pos: ast.Pos, message: str) -> None:
        key = (pos.file, pos.start, self._run)
        if key not in self._warned:
            self._warned.add(key)
            self.warnings.append(f"{pos.file}:{pos.line}: {message}")

    def _source(self, node: Any) -> str:
        text = self._texts.get(node.pos.file, "")
        return " ".join(text[node.pos.start : node.pos.end].split())

    # ---- loading scripts ----------------------------------------------------------------------------------

    def load(self, path: str | os.PathLike[str]) -> ast.Script:
        """Parse a script file (each file once)."""
        return self.loader.load(path)

    def check(self, script: ast.Script, fresh_scope: bool = False) -> Checker:
        """Static checks against what this session has bound (nothing, with ``fresh_scope``); raises ScriptError."""
        self._texts[script.file] = script.text
        known = set() if fresh_scope else set(self.scope)
        checker = Checker(self.loader.resolve_include, known=known, attributes=set(self.attributes))
        checker.check(script)
        return checker

    # ---- running ------------------------------------------------------------------------------------------

    def run(self, script: ast.Script | str | os.PathLike[str], fresh_scope: bool = True, checked: bool = False) -> list[Effect]:
        """Check (unless ``checked`` already), then run a script (a parsed Script, or a path). Each script has its
        own bindings unless ``fresh_scope`` is False (the REPL keeps one scope for the session)."""
        if not isinstance(script, ast.Script):
            script = self.load(script)
        self._texts[script.file] = script.text
        saved = self.scope
        if fresh_scope:
            self.scope = {}
        try:
            if not checked:
                self.check(script)
            self.attributes |= user_attributes(script, self.loader.resolve_include)
            self._run += 1
            before = set(self.effects)
            self._run_statements(script.statements, script)
            return [e for k, e in self.effects.items() if k not in before]
        finally:
            if fresh_scope:
                self.scope = saved

    def execute(self, text: str, file: str = "<repl>") -> list[Effect]:
        """Run statements typed at the REPL, in the session's one scope."""
        script = parse_script(text, file)
        return self.run(script, fresh_scope=False)

    def unused_params(self) -> list[str]:
        """Params given to the session that no script run so far declared."""
        return sorted(set(self.params) - self.used_params)

    def _run_statements(self, statements: tuple[Any, ...], script: ast.Script) -> None:
        self._stack.append(script.file)
        try:
            for s in statements:
                self._statement(s, script)
        finally:
            self._stack.pop()

    def _effect(self, s: Any, kind: str) -> Effect:
        key = (s.pos.file, s.pos.start, self._run)
        e = self.effects.get(key)
        if e is None:
            e = self.effects[key] = Effect(s.pos.file, s.pos.line, self._source(s), kind)
        e.runs += 1
        return e

    def _value(self, expr: Any) -> Any:
        return compile_expression(expr, self).constant()

    def _selection(self, expr: Any, statement: str) -> Selection:
        value = self._value(expr)
        if not isinstance(value, Selection):
            raise self.error(f"{statement} needs a selection of tasks, not {type_name(value)}", expr)
        live = Selection(n for n in value if n in self.graph)
        if not live and not isinstance(expr, ast.Select):
            self._warn(expr.pos, f"`{self._source(expr)}` holds no task: {statement} does nothing")
        return live

    def _statement(self, s: Any, script: ast.Script) -> None:
        try:
            getattr(self, "_s_" + type(s).__name__)(s, script)
        except (ScriptError, CheckFailed):
            raise
        except DaydreamError as exc:
            raise script_error(f"{exc} (in `{_first_line(self._source(s))}`)", s.pos, script.text) from None
        except RecursionError:
            raise script_error("expression nested too deeply", s.pos, script.text) from None

    def _s_Docstring(self, s: ast.Docstring, script: ast.Script) -> None:
        pass

    def _s_Param(self, s: ast.Param, script: ast.Script) -> None:
        if s.name in self.params:
            value = self.params[s.name]
            if isinstance(value, str) and not value.lstrip().startswith('"') and isinstance(self._value(s.default), str):
                pass  # a string param: -p link=eth-10g means the text, quotes optional
            elif isinstance(value, str):
                try:
                    expr = parse_expression(value, f"-p {s.name}")
                except ScriptError as exc:
                    raise ScriptError(f"-p {s.name}={value}: not a value: {str(exc).splitlines()[0]}") from None
                self._texts[f"-p {s.name}"] = value
                value = compile_expression(expr, self).constant()
            self.used_params.add(s.name)
        else:
            value = self._value(s.default)
        self.scope[s.name] = value
        self.param_values[s.name] = value

    def _s_Let(self, s: ast.Let, script: ast.Script) -> None:
        if isinstance(s.value, ast.Insert):
            self.scope[s.name] = Selection([self._insert(s.value)[-1]])
        else:
            self.scope[s.name] = self._value(s.value)

    def _s_Scale(self, s: ast.Scale, script: ast.Script) -> None:
        target = self._selection(s.target, "scale")
        factor = compile_expression(s.factor, self, task_context=True)
        effect = self._effect(s, "scale")
        nodes = self.graph._node
        delta = 0.0
        if not factor.per_task:
            f = factor.constant()
            self._check_factor(f, s.factor, None)
            delta = edit.scale(self.graph, target, f)
        else:
            fn = factor.value
            for n in target:
                a = nodes[n]
                f = fn(a)
                self._check_factor(f, s.factor, a)
                d = a["duration"]
                a["duration"] = d * f
                delta += d * f - d
        effect.tasks += len(target)
        effect.duration_delta_us += delta
        self.version += 1

    def _check_factor(self, f: Any, node: Any, task: dict[str, Any] | None) -> None:
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not f >= 0 or f == math.inf:
            where = f" for task {task['kind']} {task['name']!r}" if task is not None else ""
            raise self.error(f"a scale factor must be a finite number >= 0; got {format_value(f)}{where}", node)

    def _s_SetAttr(self, s: ast.SetAttr, script: ast.Script) -> None:
        attr = s.target.attr
        target = self._selection(s.target.obj, "set")
        value = compile_expression(s.value, self, task_context=True)
        effect = self._effect(s, "set")
        nodes = self.graph._node
        before = sum(nodes[n]["duration"] for n in target) if attr == "duration" else 0.0
        try:
            if not value.per_task:
                edit.set_attribute(self.graph, target, attr, value.constant())
            else:
                fn = value.value
                for n in target:
                    a = nodes[n]
                    v = fn(a)
                    try:
                        edit.check_settable(attr, v)
                    except DaydreamError as exc:
                        raise self.error(f"{exc} for task {a['kind']} {a['name']!r}", s.value) from None
                    a[attr] = v
        except ScriptError:
            raise
        except DaydreamError as exc:
            raise self.error(str(exc), s.value) from None
        if attr == "duration":
            effect.duration_delta_us += sum(nodes[n]["duration"] for n in target) - before
        self.attributes.add(attr)
        effect.tasks += len(target)
        self.version += 1

    def _s_Remove(self, s: ast.Remove, script: ast.Script) -> None:
        target = self._selection(s.target, "remove")
        effect = self._effect(s, "remove")
        doomed = edit.removal_set(self.graph, target, s.with_launches)  # once: it holds the launches too
        lost = sum(self.graph._node[n]["duration"] for n in doomed)
        try:
            removed = edit.remove(self.graph, doomed)
        except DaydreamError as exc:
            raise self.error(str(exc), s) from None
        effect.removed += len(removed)
        effect.tasks += len(removed)
        effect.duration_delta_us -= lost
        self.version += 1

    def _s_Insert(self, s: ast.Insert, script: ast.Script) -> None:
        self._insert(s)

    def _insert(self, s: ast.Insert) -> list[Any]:
        """Run an insert; returns the new task ids (the task itself last, after its launch call)."""
        anchor_sel = self._selection(s.anchor, "insert")
        if len(anchor_sel) != 1:
            raise self.error(
                f"insert {s.side} needs one task, the selection holds {len(anchor_sel)}; pick one with first(...) or last(...)",
                s.anchor,
            )
        (anchor,) = anchor_sel
        name = self._value(s.name)
        if not isinstance(name, str) or not name:
            raise self.error(f"a task's name is a non-empty string; got {format_value(name)}", s.name)
        duration = self._value(s.duration)
        if isinstance(duration, bool) or not isinstance(duration, (int, float)) or not 0 <= duration < math.inf:
            raise self.error(f"a duration is a number of microseconds >= 0 (e.g. 15us, 2ms); got {format_value(duration)}", s.duration)
        thread = self._thread(s, anchor) if s.on is not None else None
        launch = None
        launched = True
        if s.launch is not None:
            launch = self._value(s.launch)
            if launch is None:  # `launch none`: work no traced CPU call issues
                launched = False
            elif isinstance(launch, bool) or not isinstance(launch, (int, float)) or not launch >= 0:
                raise self.error(f"a launch call takes a number of microseconds >= 0 (or none: no launch call); got {format_value(launch)}",
                                 s.launch)  # fmt: skip
        attrs = {k: self._value(v) for k, v in s.attrs}
        for k, v in attrs.items():
            try:
                edit.check_settable(k, v)
            except DaydreamError as exc:
                raise self.error(str(exc), s) from None
        kwargs = {"after": anchor} if s.side == "after" else {"before": anchor}
        try:
            new = edit.insert_task(self.graph, s.kind, name, float(duration), thread=thread, launch_us=launch, launched=launched,
                                   queued=s.queued, **kwargs, **attrs)  # fmt: skip
        except DaydreamError as exc:
            raise self.error(str(exc), s) from None
        edit.check_links(self.graph, new)
        self.attributes |= set(attrs)
        effect = self._effect(s, "insert")
        effect.added += len(new)
        effect.tasks += len(new)
        effect.duration_delta_us += sum(self.graph._node[n]["duration"] for n in new)
        self.version += 1
        return new

    def _thread(self, s: ast.Insert, anchor: Any) -> str:
        assert s.on is not None
        on = self._value(s.on)
        a = self.graph._node[anchor]
        if isinstance(on, Selection):
            live = in_time_order(self.graph, (n for n in on if n in self.graph))
            if not live:
                raise self.error("'on' names the thread of a selection's first task, but the selection is empty", s.on)
            return str(self.graph._node[live[0]]["thread"])
        if isinstance(on, str):
            return on
        if isinstance(on, (int, float)) and not isinstance(on, bool) and on == int(on):
            if s.kind not in ("gpu", "comm", "memcpy", "memset"):
                raise self.error(f"'on {int(on)}' names a GPU stream; a {s.kind} task runs on a CPU thread: give its name, 'cpu:PID/TID'", s.on)  # fmt: skip
            device = a["thread"].split("/")[0] if a["thread"].startswith("gpu:") else None
            if device is None:
                devices = sorted({b["thread"].split("/")[0] for b in self.graph._node.values() if b["thread"].startswith("gpu:")})
                if len(devices) != 1:
                    raise self.error("'on STREAM' needs the device: name the thread, e.g. on \"gpu:0/7\"", s.on)
                device = devices[0]
            return f"{device}/{int(on)}"
        raise self.error(f"'on' takes a stream number, a thread name or a selection, not {type_name(on)}", s.on)

    def _s_Wait(self, s: ast.Wait, script: ast.Script) -> None:
        waiters = self._selection(s.waiters, "wait")
        sources = self._selection(s.sources, "wait ... for")
        effect = self._effect(s, "wait")
        try:
            added = edit.add_waits(self.graph, waiters, sources)
        except DaydreamError as exc:
            raise self.error(str(exc), s) from None
        effect.added += added
        effect.tasks += len(waiters)
        self.version += 1

    def _s_Schedule(self, s: ast.Schedule, script: ast.Script) -> None:
        self._effect(s, "schedule")
        if s.policy == "priority":
            assert s.priority is not None
            self.priority = compile_expression(s.priority, self, task_context=True)
            self.policy = Policy("priority", PRIORITY_ATTRIBUTE)
            self.policy_text = f"priority {self._source(s.priority)}"
        else:
            self.policy_text = s.policy
            self.priority = None
            self.policy = FIFO if s.policy == "fifo" else EARLIEST
        self.version += 1

    def _s_For(self, s: ast.For, script: ast.Script) -> None:
        value = self._value(s.iterable)
        if isinstance(value, Selection):
            live = Selection(n for n in value if n in self.graph)
            if s.by is not None:
                items: list[Any] = [group for _, group in group_by(self.graph, live, s.by)]
            else:
                items = [Selection([n]) for n in in_time_order(self.graph, live)]
            if not items and not isinstance(s.iterable, ast.Select):
                self._warn(s.iterable.pos, f"`{self._source(s.iterable)}` holds no task: the loop does not run")
        elif isinstance(value, list):
            if s.by is not None:
                raise self.error("'by' groups a selection's tasks; this loop runs over a list", s)
            items = value
        else:
            raise self.error(f"a loop runs over a selection or a list, not {type_name(value)}; for N times use range(N)", s.iterable)
        try:
            for item in items:
                self.scope[s.var] = item
                self._run_statements(s.body, script)
        finally:
            self.scope.pop(s.var, None)

    def _s_If(self, s: ast.If, script: ast.Script) -> None:
        # true as in assert: an empty selection or list, 0, none and false are false
        self._run_statements(s.body if bool(self._value(s.test)) else s.orelse, script)

    def _s_Include(self, s: ast.Include, script: ast.Script) -> None:
        included = self.loader.resolve_include(s.path, script, s)
        if included.file in self._stack:
            raise self.error(f"include cycle: {' -> '.join([*self._stack, included.file])}", s)
        self.attributes |= user_attributes(included, self.loader.resolve_include)
        self._run_statements(included.statements, included)

    def _s_Assert(self, s: ast.Assert, script: ast.Script) -> None:
        value = self._value(s.test)
        if bool(value):  # an empty selection is false, as everywhere else
            return
        detail = ""
        if isinstance(s.test, ast.Binary) and s.test.op not in ("and", "or"):
            left, right = self._value(s.test.left), self._value(s.test.right)
            detail = f": {self._source(s.test.left)} is {format_value(left)}, {self._source(s.test.right)} is {format_value(right)}"
        message = f"assertion failed: {self._source(s.test)}{detail}"
        if s.message is not None:
            m = self._value(s.message)
            message += f" ({m if isinstance(m, str) else format_value(m)})"
        raise CheckFailed(f"{s.pos.file}:{s.pos.line}: {message}")

    def _s_Print(self, s: ast.Print, script: ast.Script) -> None:
        values = [self._value(v) for v in s.values]
        line = " ".join(v if isinstance(v, str) else format_value(v) for v in values)
        self.printed.append(line)
        if self.on_print is not None:
            self.on_print(line)


def _first_line(text: str) -> str:
    line = text.splitlines()[0] if text else text
    return line if len(line) <= 80 else line[:77] + "..."


