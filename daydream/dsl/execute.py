"""Running statements: a visitor with one method per kind of statement, over the session's units (the graph
state, the environment, the params, the recorder of effects and output, the loader for includes)."""

from __future__ import annotations

import math
from typing import Any

from daydream.dsl import ast
from daydream.dsl.check import user_attributes
from daydream.dsl.effects import Recorder
from daydream.dsl.environment import Environment
from daydream.dsl.evaluate import compile_expression, format_value
from daydream.dsl.functions import type_name
from daydream.dsl.graph_state import PRIORITY_ATTRIBUTE, GraphState
from daydream.dsl.library import Loader
from daydream.dsl.params import ParamBinder
from daydream.dsl.parse import script_error
from daydream.dsl.visitor import Visitor
from daydream.errors import CheckFailed, DaydreamError, ScriptError
from daydream.graph import edit
from daydream.graph.adjacency import attrs_of
from daydream.graph.select import Selection, group_by, in_time_order
from daydream.simulation import EARLIEST, FIFO, Policy


class Executor(Visitor[None]):
    """``run(statements, script)`` runs statements in order; ``visit_<Statement>(s, script)`` runs one."""

    def __init__(self, state: GraphState, env: Environment, params: ParamBinder, recorder: Recorder, loader: Loader) -> None:
        self.state = state
        self.env = env
        self.params = params
        self.recorder = recorder
        self.loader = loader
        self._stack: list[str] = []  # the files running, the outermost first: an include cycle is an error

    def run(self, statements: tuple[Any, ...], script: ast.Script) -> None:
        self._stack.append(script.file)
        try:
            for s in statements:
                self.statement(s, script)
        finally:
            self._stack.pop()

    def statement(self, s: Any, script: ast.Script) -> None:
        """Run one statement; an error from below gets the statement's position."""
        try:
            self.visit(s, script)
        except (ScriptError, CheckFailed):
            raise
        except DaydreamError as exc:
            raise script_error(f"{exc} (in `{_first_line(self.loader.source(s))}`)", s.pos, script.text) from None
        except RecursionError:
            raise script_error("expression nested too deeply", s.pos, script.text) from None

    # ---- helpers ------------------------------------------------------------------------------------------

    def _selection(self, expr: Any, statement: str) -> Selection:
        value = self.env.value(expr)
        if not isinstance(value, Selection):
            raise self.env.error(f"{statement} needs a selection of tasks, not {type_name(value)}", expr)
        live = Selection(n for n in value if n in self.env.graph)
        if not live and not isinstance(expr, ast.Select):
            self.recorder.warn(expr.pos, f"`{self.loader.source(expr)}` holds no task: {statement} does nothing")
        return live

    # ---- bindings -----------------------------------------------------------------------------------------

    def visit_Docstring(self, s: ast.Docstring, script: ast.Script) -> None:
        pass

    def visit_Param(self, s: ast.Param, script: ast.Script) -> None:
        self.env.scope[s.name] = self.params.bind(s)

    def visit_Let(self, s: ast.Let, script: ast.Script) -> None:
        if isinstance(s.value, ast.Insert):
            self.env.scope[s.name] = Selection([self._insert(s.value)[-1]])
        else:
            self.env.scope[s.name] = self.env.value(s.value)

    # ---- changes to the graph -----------------------------------------------------------------------------

    def visit_Scale(self, s: ast.Scale, script: ast.Script) -> None:
        target = self._selection(s.target, "scale")
        factor = compile_expression(s.factor, self.env, task_context=True)
        effect = self.recorder.effect(s, "scale")
        graph = self.env.graph
        if not factor.per_task:
            f = factor.constant()
            self._check_factor(f, s.factor, None)
            delta = edit.scale(graph, target, f)
        else:
            fn = factor.value

            def factor_of(a: dict[str, Any]) -> float:
                f = fn(a)
                self._check_factor(f, s.factor, a)
                return f

            delta = edit.scale_each(graph, target, factor_of)
        effect.tasks += len(target)
        effect.duration_delta_us += delta
        self.state.changed()

    def _check_factor(self, f: Any, node: Any, task: dict[str, Any] | None) -> None:
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not f >= 0 or f == math.inf:
            where = f" for task {task['kind']} {task['name']!r}" if task is not None else ""
            raise self.env.error(f"a scale factor must be a finite number >= 0; got {format_value(f)}{where}", node)

    def visit_SetAttr(self, s: ast.SetAttr, script: ast.Script) -> None:
        attr = s.target.attr
        target = self._selection(s.target.obj, "set")
        value = compile_expression(s.value, self.env, task_context=True)
        effect = self.recorder.effect(s, "set")
        graph = self.env.graph
        nodes = attrs_of(graph)
        before = sum(nodes[n]["duration"] for n in target) if attr == "duration" else 0.0
        try:
            if not value.per_task:
                edit.set_attribute(graph, target, attr, value.constant())
            else:
                fn = value.value

                def value_of(a: dict[str, Any]) -> Any:
                    v = fn(a)
                    try:
                        edit.check_settable(attr, v)
                    except DaydreamError as exc:
                        raise self.env.error(f"{exc} for task {a['kind']} {a['name']!r}", s.value) from None
                    return v

                edit.set_each(graph, target, attr, value_of)
        except ScriptError:
            raise
        except DaydreamError as exc:
            raise self.env.error(str(exc), s.value) from None
        if attr == "duration":
            effect.duration_delta_us += sum(nodes[n]["duration"] for n in target) - before
        self.env.attributes.add(attr)
        effect.tasks += len(target)
        self.state.changed()

    def visit_Remove(self, s: ast.Remove, script: ast.Script) -> None:
        graph = self.env.graph
        target = self._selection(s.target, "remove")
        effect = self.recorder.effect(s, "remove")
        doomed = edit.removal_set(graph, target, s.with_launches)  # once: it holds the launches too
        lost = sum(attrs_of(graph)[n]["duration"] for n in doomed)
        try:
            removed = edit.remove(graph, doomed)
        except DaydreamError as exc:
            raise self.env.error(str(exc), s) from None
        effect.removed += len(removed)
        effect.tasks += len(removed)
        effect.duration_delta_us -= lost
        self.state.changed()

    def visit_Insert(self, s: ast.Insert, script: ast.Script) -> None:
        self._insert(s)

    def _insert(self, s: ast.Insert) -> list[Any]:
        """Run an insert; returns the new task ids (the task itself last, after its launch call)."""
        error, graph = self.env.error, self.env.graph
        anchor_sel = self._selection(s.anchor, "insert")
        if len(anchor_sel) != 1:
            raise error(
                f"insert {s.side} needs one task, the selection holds {len(anchor_sel)}; pick one with first(...) or last(...)",
                s.anchor,
            )
        (anchor,) = anchor_sel
        name = self.env.value(s.name)
        if not isinstance(name, str) or not name:
            raise error(f"a task's name is a non-empty string; got {format_value(name)}", s.name)
        duration = self.env.value(s.duration)
        if isinstance(duration, bool) or not isinstance(duration, (int, float)) or not 0 <= duration < math.inf:
            raise error(f"a duration is a number of microseconds >= 0 (e.g. 15us, 2ms); got {format_value(duration)}", s.duration)
        thread = self._thread(s, anchor) if s.on is not None else None
        launch = None
        launched = True
        if s.launch is not None:
            launch = self.env.value(s.launch)
            if launch is None:  # `launch none`: work no traced CPU call issues
                launched = False
            elif isinstance(launch, bool) or not isinstance(launch, (int, float)) or not launch >= 0:
                raise error(f"a launch call takes a number of microseconds >= 0 (or none: no launch call); got {format_value(launch)}",
                            s.launch)  # fmt: skip
        attrs = {k: self.env.value(v) for k, v in s.attrs}
        for k, v in attrs.items():
            try:
                edit.check_settable(k, v)
            except DaydreamError as exc:
                raise error(str(exc), s) from None
        kwargs = {"after": anchor} if s.side == "after" else {"before": anchor}
        try:
            new = edit.insert_task(graph, s.kind, name, float(duration), thread=thread, launch_us=launch, launched=launched,
                                   queued=s.queued, **kwargs, **attrs)  # fmt: skip
        except DaydreamError as exc:
            raise error(str(exc), s) from None
        edit.check_links(graph, new)
        self.env.attributes |= set(attrs)
        effect = self.recorder.effect(s, "insert")
        effect.added += len(new)
        effect.tasks += len(new)
        effect.duration_delta_us += sum(attrs_of(graph)[n]["duration"] for n in new)
        self.state.changed()
        return new

    def _thread(self, s: ast.Insert, anchor: Any) -> str:
        assert s.on is not None
        error, graph = self.env.error, self.env.graph
        on = self.env.value(s.on)
        a = attrs_of(graph)[anchor]
        if isinstance(on, Selection):
            live = in_time_order(graph, (n for n in on if n in graph))
            if not live:
                raise error("'on' names the thread of a selection's first task, but the selection is empty", s.on)
            return str(attrs_of(graph)[live[0]]["thread"])
        if isinstance(on, str):
            return on
        if isinstance(on, (int, float)) and not isinstance(on, bool) and on == int(on):
            if s.kind not in ("gpu", "comm", "memcpy", "memset"):
                raise error(f"'on {int(on)}' names a GPU stream; a {s.kind} task runs on a CPU thread: give its name, 'cpu:PID/TID'", s.on)  # fmt: skip
            device = a["thread"].split("/")[0] if a["thread"].startswith("gpu:") else None
            if device is None:
                devices = sorted({b["thread"].split("/")[0] for b in attrs_of(graph).values() if b["thread"].startswith("gpu:")})
                if len(devices) != 1:
                    raise error("'on STREAM' needs the device: name the thread, e.g. on \"gpu:0/7\"", s.on)
                device = devices[0]
            return f"{device}/{int(on)}"
        raise error(f"'on' takes a stream number, a thread name or a selection, not {type_name(on)}", s.on)

    def visit_Wait(self, s: ast.Wait, script: ast.Script) -> None:
        waiters = self._selection(s.waiters, "wait")
        sources = self._selection(s.sources, "wait ... for")
        effect = self.recorder.effect(s, "wait")
        try:
            added = edit.add_waits(self.env.graph, waiters, sources)
        except DaydreamError as exc:
            raise self.env.error(str(exc), s) from None
        effect.added += added
        effect.tasks += len(waiters)
        self.state.changed()

    def visit_Schedule(self, s: ast.Schedule, script: ast.Script) -> None:
        self.recorder.effect(s, "schedule")
        if s.policy == "priority":
            assert s.priority is not None
            priority = compile_expression(s.priority, self.env, task_context=True)
            self.state.schedule(Policy("priority", PRIORITY_ATTRIBUTE), f"priority {self.loader.source(s.priority)}", priority)
        else:
            self.state.schedule(FIFO if s.policy == "fifo" else EARLIEST, s.policy)

    # ---- control flow -------------------------------------------------------------------------------------

    def visit_For(self, s: ast.For, script: ast.Script) -> None:
        graph = self.env.graph
        value = self.env.value(s.iterable)
        if isinstance(value, Selection):
            live = Selection(n for n in value if n in graph)
            if s.by is not None:
                items: list[Any] = [group for _, group in group_by(graph, live, s.by)]
            else:
                items = [Selection([n]) for n in in_time_order(graph, live)]
            if not items and not isinstance(s.iterable, ast.Select):
                self.recorder.warn(s.iterable.pos, f"`{self.loader.source(s.iterable)}` holds no task: the loop does not run")
        elif isinstance(value, list):
            if s.by is not None:
                raise self.env.error("'by' groups a selection's tasks; this loop runs over a list", s)
            items = value
        else:
            raise self.env.error(f"a loop runs over a selection or a list, not {type_name(value)}; for N times use range(N)", s.iterable)
        try:
            for item in items:
                self.env.scope[s.var] = item
                self.run(s.body, script)
        finally:
            self.env.scope.pop(s.var, None)

    def visit_If(self, s: ast.If, script: ast.Script) -> None:
        # true as in assert: an empty selection or list, 0, none and false are false
        self.run(s.body if bool(self.env.value(s.test)) else s.orelse, script)

    def visit_Include(self, s: ast.Include, script: ast.Script) -> None:
        included = self.loader.resolve_include(s.path, script, s)
        if included.file in self._stack:
            raise self.env.error(f"include cycle: {' -> '.join([*self._stack, included.file])}", s)
        self.env.attributes |= user_attributes(included, self.loader.resolve_include)
        self.run(included.statements, included)

    # ---- checks and output --------------------------------------------------------------------------------

    def visit_Assert(self, s: ast.Assert, script: ast.Script) -> None:
        value = self.env.value(s.test)
        if bool(value):  # an empty selection is false, as everywhere else
            return
        source = self.loader.source
        detail = ""
        if isinstance(s.test, ast.Binary) and s.test.op not in ("and", "or"):
            left, right = self.env.value(s.test.left), self.env.value(s.test.right)
            detail = f": {source(s.test.left)} is {format_value(left)}, {source(s.test.right)} is {format_value(right)}"
        message = f"assertion failed: {source(s.test)}{detail}"
        if s.message is not None:
            m = self.env.value(s.message)
            message += f" ({m if isinstance(m, str) else format_value(m)})"
        raise CheckFailed(f"{s.pos.file}:{s.pos.line}: {message}")

    def visit_Print(self, s: ast.Print, script: ast.Script) -> None:
        values = [self.env.value(v) for v in s.values]
        self.recorder.print(" ".join(v if isinstance(v, str) else format_value(v) for v in values))


def _first_line(text: str) -> str:
    line = text.splitlines()[0] if text else text
    return line if len(line) <= 80 else line[:77] + "..."
