"""Running statements: a visitor with one method per kind of statement, over the session's units (the graph
state, the environment, the params, the recorder of effects and output, the loader for includes)."""

from __future__ import annotations

import math
import os
from typing import Any

from daydream.dsl import ast
from daydream.dsl.check import scales_samples, user_attributes
from daydream.dsl.effects import Effect, Recorder
from daydream.dsl.environment import Environment
from daydream.dsl.evaluate import compile_expression
from daydream.dsl.functions import type_name
from daydream.dsl.graph_state import PRIORITY_ATTRIBUTE, GraphState
from daydream.dsl.library import Loader
from daydream.dsl.limits import BULK, INSERT_COST, MAX_INCLUDE_DEPTH, MAX_TIME_US, STATEMENT_COST, finite, value_size
from daydream.dsl.params import ParamBinder
from daydream.dsl.parse import script_error
from daydream.dsl.values import format_value
from daydream.dsl.visitor import Visitor
from daydream.errors import CheckFailed, DaydreamError, NotApplicable, ScriptError
from daydream.files import clip
from daydream.graph import edit
from daydream.graph import memory as mem
from daydream.graph.adjacency import attrs_of
from daydream.graph.memory import TensorSet
from daydream.graph.order import Work
from daydream.graph.select import Selection, group_by, in_time_order, thread_names
from daydream.simulation import EARLIEST, FIFO, Policy

_UNSET = object()


class Executor(Visitor[None]):
    """``run(statements, script)`` runs statements in order; ``visit_<Statement>(s, script)`` runs one."""

    def __init__(
        self, state: GraphState, env: Environment, params: ParamBinder, recorder: Recorder, loader: Loader
    ) -> None:
        self.state = state
        self.env = env
        self.params = params
        self.recorder = recorder
        self.loader = loader
        self.budget = env.budget
        self._stack: list[str] = []  # the files running, the outermost first: an include cycle is an error
        # bound names whose value came from params given with -p: name -> those params (for error messages)
        self.origins: dict[str, frozenset[str]] = {}
        self._names: dict[int, tuple[Any, frozenset[str]]] = {}

    def run(self, statements: tuple[Any, ...], script: ast.Script) -> None:
        self._stack.append(script.file)
        try:
            for s in statements:
                self.statement(s, script)
        finally:
            self._stack.pop()

    def statement(self, s: Any, script: ast.Script) -> None:
        """Run one statement (it costs STATEMENT_COST units of the budget); an error from below gets the
        statement's position, and the -p values it depends on."""
        try:
            self.budget.charge(STATEMENT_COST)
            self.visit(s, script)
        except (ScriptError, CheckFailed) as exc:
            raise self._from_params(exc, s) from None
        except DaydreamError as exc:
            error = script_error(f"{exc} (in `{_first_line(self.loader.source(s))}`)", s.pos, script.text)
            raise self._from_params(error, s) from None
        except RecursionError:
            raise script_error("expression nested too deeply", s.pos, script.text) from None
        except MemoryError:  # past the limits still more than the machine holds: said where, not as a trace's
            held = getattr(self.env.scope, "held", 0)
            raise script_error(
                f"out of memory running this statement (the script's names held about {held / 2**20:,.0f} "
                "MiB before it)",
                s.pos,
                script.text,
            ) from None

    # ---- which -p values a statement depends on ------------------------------------------------------------

    def _from_params(self, exc: ScriptError | CheckFailed, s: Any) -> ScriptError | CheckFailed:
        """``exc`` with ``(from -p NAME=VALUE)`` (``params['NAME'] = VALUE`` from Python) added to its first line, for
        the params given whose value statement ``s`` reads (directly, or through lets and loop variables bound from
        them)."""
        text = str(exc)
        given = self.params.given
        names = sorted(p for p in self._depends_on(s) if p in given and p in self.params.used)
        said = "-p " if self.params.command_line else "params["  # an error that names a given param already
        if not names or f"(from {said}" in text or text.startswith(said):
            return exc
        shown = ", ".join(self.params.origin(n, given[n]) for n in names)
        if isinstance(exc, NotApplicable):
            return NotApplicable(exc.script, exc.reason, f"{exc.where} (from {shown})")
        if isinstance(exc, ScriptError):
            return exc.noted(f"from {shown}")
        first, _, rest = text.partition("\n")  # a failed assert: its message is its text
        return type(exc)(f"{first} (from {shown})" + (f"\n{rest}" if rest else ""))

    def _depends_on(self, s: Any) -> set[str]:
        if isinstance(s, ast.Param):
            key = self.params.key(s)
            return {key} if key is not None and key in self.params.used else set()
        out: set[str] = set()
        for name in self._statement_names(s):
            out |= self.origins.get(name, frozenset())
        return out

    def _statement_names(self, s: Any) -> frozenset[str]:
        """The names a statement's own expressions read (not those of the statements in its blocks)."""
        kept = self._names.get(id(s))
        if kept is not None and kept[0] is s:
            return kept[1]
        names: set[str] = set()
        stack = [s]
        while stack:
            node = stack.pop()
            if isinstance(node, ast.Name):
                names.add(node.id)
                continue
            for field in node.__dataclass_fields__:
                if node is s and field in ("body", "orelse"):
                    continue
                value = getattr(node, field)
                for x in value if isinstance(value, tuple) else (value,):
                    for y in x if isinstance(x, tuple) else (x,):
                        if hasattr(y, "__dataclass_fields__") and not isinstance(y, ast.Pos):
                            stack.append(y)
        out = frozenset(names)
        self._names[id(s)] = (s, out)
        return out

    def _bound_from(self, name: str, expr: Any) -> None:
        """``name`` was bound from ``expr``: it depends on the -p params ``expr`` reads."""
        origins: frozenset[str] = frozenset()
        for n in self._statement_names(expr):
            origins |= self.origins.get(n, frozenset())
        if origins:
            self.origins[name] = origins
        else:
            self.origins.pop(name, None)

    # ---- helpers ------------------------------------------------------------------------------------------

    def _selection(self, expr: Any, statement: str, value: Any = _UNSET) -> Selection:
        """The live tasks of the selection ``expr`` is (``value``: its value, where evaluated already)."""
        value = self.env.value(expr) if value is _UNSET else value
        if not isinstance(value, Selection):
            raise self.env.error(f"{statement} needs a selection of tasks, not {type_name(value)}", expr)
        live = Selection(n for n in value if n in self.env.graph)
        if not live and not isinstance(expr, ast.Select):
            self.recorder.noop(
                expr.pos, f"`{clip(self.loader.source(expr), 200)}` holds no task: {statement} does nothing"
            )
        return live

    # ---- bindings -----------------------------------------------------------------------------------------

    def visit_Docstring(self, s: ast.Docstring, script: ast.Script) -> None:
        pass

    def visit_Param(self, s: ast.Param, script: ast.Script) -> None:
        self.env.scope[s.name] = self.params.bind(s)
        key = self.params.key(s)
        if key is not None:
            self.origins[s.name] = frozenset({key})
        else:
            self._bound_from(s.name, s.default)

    def visit_Let(self, s: ast.Let, script: ast.Script) -> None:
        if isinstance(s.value, ast.Insert):
            self.env.scope[s.name] = Selection([self._insert(s.value)[-1]])
        else:
            self.env.scope[s.name] = self.env.value(s.value)
        self._bound_from(s.name, s.value)

    # ---- changes to the graph -----------------------------------------------------------------------------

    def _effect(self, s: Any, kind: str) -> Effect:
        """The statement's effect, told whether the window holds context steps (its step figures then differ)."""
        effect = self.recorder.effect(s, kind)
        effect.context = bool(self._context_steps())
        return effect

    def _context_steps(self) -> frozenset[Any]:
        """The graph's context steps: simulated before the measured ones, not part of the step time."""
        return frozenset(st.name for st in self.env.graph.graph.get("steps") or () if st.context)

    def _in_step(self, tasks: Any) -> list[Any]:
        """The tasks of ``tasks`` in the measured step(s): those of no context step (inserted ones too)."""
        context = self._context_steps()
        if not context:
            return list(tasks)
        nodes = attrs_of(self.env.graph)
        return [n for n in tasks if nodes[n].get("step") not in context]

    def _step_time(self, tasks: list[Any]) -> float:
        nodes = attrs_of(self.env.graph)
        return sum(nodes[n]["duration"] for n in tasks)

    def visit_Scale(self, s: ast.Scale, script: ast.Script) -> None:
        if scales_samples(s):
            self._scale_samples(s)
            return
        value = self.env.value(s.target)
        if isinstance(value, TensorSet):
            self._scale_tensors(s, value)
            return
        if s.after is not None or s.until is not None:
            raise self.env.error(
                "'after' and 'until' bound a stretch of tensors' lives (scale tensors(SEL) by F after TASK "
                "until TASK); a selection's tasks scale whole",
                s.after or s.until,
            )
        target = self._selection(s.target, "scale", value)
        factor = compile_expression(s.factor, self.env, task_context=True)
        effect = self._effect(s, "scale")
        graph = self.env.graph
        self.budget.charge(2 * len(target))
        in_step = self._in_step(target)
        step_before = self._step_time(in_step)
        if not factor.per_task:
            f = factor.constant()
            self._check_factor(f, s.factor, None)
            if f > 1 and target:
                nodes = attrs_of(graph)
                longest = max(target, key=lambda n: nodes[n]["duration"])
                self._check_factor(f, s.factor, nodes[longest])
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
        effect.step_tasks += len(in_step)
        effect.step_duration_delta_us += self._step_time(in_step) - step_before
        self.state.changed()

    def _one_task(self, expr: Any, what: str) -> tuple[Any, tuple[float, float]]:
        """The task of a one-task selection ``expr``, and its traced (start, duration): where a stretch of memory
        begins or ends."""
        value = self.env.value(expr)
        if not isinstance(value, Selection) or len(value) != 1:
            raise self.env.error(
                f"{what} takes one task (first(...) or last(...)), not {type_name(value)}"
                + (f" of {len(value)}" if isinstance(value, Selection) else ""),
                expr,
            )
        (task,) = value
        if task not in self.env.graph:
            raise self.env.error(f"{what}: the task is no longer in the graph", expr)
        a = attrs_of(self.env.graph)[task]
        return task, (float(a.get("start", 0.0)), float(a["duration"]))

    def _memory(self, expr: Any, statement: str) -> mem.GraphMemory | None:
        memory = mem.memory_of(self.env.graph)
        if memory is None:
            self.recorder.noop(
                expr.pos,
                "the step's memory is not known (no allocator events in the trace - record it with "
                f"profile_memory=True - nor gradient sizes to estimate it): {statement} does nothing",
            )
        return memory

    def _scale_tensors(self, s: ast.Scale, tensors: TensorSet) -> None:
        """``scale tensors(...) by F [after A] [until B]``: their bytes times F, over that stretch of their lives."""
        memory = self._memory(s.target, "scale")
        effect = self._effect(s, "memory")
        f = self.env.value(s.factor)
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not finite(f) or f < 0:
            raise self.env.error(f"a memory scale factor is a finite number >= 0; got {format_value(f)}", s.factor)
        if memory is None:
            return
        if tensors.generation != memory.generation:
            raise self.env.error(
                "these tensors were taken before tasks holding tensors were removed: take them again "
                "with tensors(...) after the remove",
                s.target,
            )
        self.budget.charge(len(tensors) + len(memory.windows))
        after, until, traced = None, None, {}
        if s.after is not None:
            after, traced[after] = self._one_task(s.after, "after")
        if s.until is not None:
            until, traced[until] = self._one_task(s.until, "until")
        try:
            self.env.graph.graph["memory"] = mem.scaled(memory, tensors.rows, float(f), after, until, traced)
        except DaydreamError as exc:
            raise self.env.error(str(exc), s.factor) from None
        effect.tensors += len(tensors)
        effect.memory_delta_bytes += tensors.nbytes * (float(f) - 1.0)
        effect.stretch = effect.stretch or after is not None or until is not None

    def visit_Alloc(self, s: ast.Alloc, script: ast.Script) -> None:
        memory = self._memory(s, "alloc")
        effect = self._effect(s, "memory")
        nbytes = self.env.value(s.nbytes)
        if isinstance(nbytes, bool) or not isinstance(nbytes, (int, float)) or not finite(nbytes) or nbytes < 0:
            raise self.env.error(
                f"alloc takes a number of bytes >= 0 (e.g. 25MB); got {format_value(nbytes)}", s.nbytes
            )
        category = self.env.value(s.category) if s.category is not None else "temporaries"
        try:
            code = mem.category_codes(category)
        except DaydreamError as exc:
            raise self.env.error(str(exc), s.category or s) from None
        if len(code) != 1:
            raise self.env.error("alloc takes one category", s.category or s)
        if memory is None:
            return
        self.budget.charge(BULK)
        after, until, traced = None, None, {}
        if s.after is not None:
            after, traced[after] = self._one_task(s.after, "after")
        if s.until is not None:
            until, traced[until] = self._one_task(s.until, "until")
        self.env.graph.graph["memory"] = mem.allocated(memory, float(nbytes), code[0], after, until, traced)
        effect.tensors += 1
        effect.memory_delta_bytes += float(nbytes)
        effect.stretch = effect.stretch or after is not None or until is not None

    def _scale_samples(self, s: ast.Scale) -> None:
        """``scale samples by F``: each step processes F times the samples it did (the prediction's time is not
        touched: throughput = samples x baseline / predicted)."""
        f = self.env.value(s.factor)
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not f > 0 or not finite(f):
            raise self.env.error(
                "samples scale by a finite number > 0 (the samples a step processes, relative to before); got"
                f" {format_value(f)}",
                s.factor,
            )
        effect = self.recorder.effect(s, "samples")
        effect.factor *= f
        self.state.samples *= f

    def _check_factor(self, f: Any, node: Any, task: dict[str, Any] | None) -> None:
        where = f" for task {task['kind']} {task['name']!r}" if task is not None else ""
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not f >= 0 or f == math.inf:
            raise self.env.error(f"a scale factor must be a finite number >= 0; got {format_value(f)}{where}", node)
        if task is not None and f * task["duration"] > MAX_TIME_US:
            raise self.env.error(
                f"scaling by {format_value(f)} makes a duration over {MAX_TIME_US:.0e} us (about 31 years){where}", node
            )

    def _check_value(self, attr: str, value: Any) -> None:
        """A value a task attribute is set to: numbers finite, durations and gaps at most MAX_TIME_US."""
        if isinstance(value, float) and not finite(value):
            raise DaydreamError(f"{attr} must be a finite number (got {format_value(value)})")
        if attr in ("duration", "gap") and isinstance(value, (int, float)) and value > MAX_TIME_US:
            raise DaydreamError(
                f"{attr} must be at most {MAX_TIME_US:.0e} us (about 31 years), got {format_value(value)}"
            )
        edit.check_settable(attr, value)

    def visit_SetAttr(self, s: ast.SetAttr, script: ast.Script) -> None:
        attr = s.target.attr
        target = self._selection(s.target.obj, "set")
        value = compile_expression(s.value, self.env, task_context=True)
        effect = self._effect(s, "set")
        graph = self.env.graph
        nodes = attrs_of(graph)
        self.budget.charge(2 * len(target))
        in_step = self._in_step(target)
        before = sum(nodes[n]["duration"] for n in target) if attr == "duration" else 0.0
        step_before = self._step_time(in_step) if attr == "duration" else 0.0
        try:
            if not value.per_task:
                v = value.constant()
                self._check_value(attr, v)
                self.budget.charge(len(target) * _stored_size(v))  # a list or string on each task (as exported)
                edit.set_attribute(graph, target, attr, v)
            else:
                fn = value.value

                def value_of(a: dict[str, Any]) -> Any:
                    v = fn(a)
                    self.budget.charge(_stored_size(v))
                    try:
                        self._check_value(attr, v)
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
            effect.step_duration_delta_us += self._step_time(in_step) - step_before
        self.env.attributes.add(attr)
        effect.tasks += len(target)
        effect.step_tasks += len(in_step)
        self.state.changed()

    def visit_Remove(self, s: ast.Remove, script: ast.Script) -> None:
        graph = self.env.graph
        target = self._selection(s.target, "remove")
        effect = self._effect(s, "remove")
        self.budget.charge(len(target))
        doomed = edit.removal_set(graph, target, s.with_launches)  # once: it holds the launches too
        self.budget.charge(2 * len(doomed))
        lost = sum(attrs_of(graph)[n]["duration"] for n in doomed)
        in_step = self._in_step(doomed)
        step_lost = self._step_time(in_step)
        try:
            removed = edit.remove(graph, doomed)
        except DaydreamError as exc:
            raise self.env.error(str(exc), s) from None
        effect.removed += len(removed)
        effect.tasks += len(removed)
        effect.duration_delta_us -= lost
        effect.step_tasks += len(in_step)
        effect.step_duration_delta_us -= step_lost
        self.state.changed()

    def visit_Insert(self, s: ast.Insert, script: ast.Script) -> None:
        self._insert(s)

    def _insert(self, s: ast.Insert) -> list[Any]:
        """Run an insert; returns the new task ids (the task itself last, after its launch call)."""
        error, graph = self.env.error, self.env.graph
        anchor_sel = self._selection(s.anchor, "insert")
        if len(anchor_sel) != 1:
            raise error(
                f"insert {s.side} needs one task, the selection holds {len(anchor_sel)}; pick one with first(...) or"
                " last(...)",
                s.anchor,
            )
        (anchor,) = anchor_sel
        name = self.env.value(s.name)
        if not isinstance(name, str) or not name:
            raise error(f"a task's name is a non-empty string; got {format_value(name)}", s.name)
        duration = self.env.value(s.duration)
        if isinstance(duration, bool) or not isinstance(duration, (int, float)) or not 0 <= duration <= MAX_TIME_US:
            raise error(
                f"a duration is a number of microseconds >= 0 (e.g. 15us, 2ms; at most {MAX_TIME_US:.0e}); got "
                f"{format_value(duration)}",
                s.duration,
            )
        thread = self._thread(s, anchor) if s.on is not None else None
        launch = None
        launched = True
        if s.launch is not None:
            launch = self.env.value(s.launch)
            if launch is None:  # `launch none`: work no traced CPU call issues
                launched = False
            elif isinstance(launch, bool) or not isinstance(launch, (int, float)) or not 0 <= launch <= MAX_TIME_US:
                raise error(
                    f"a launch call takes a number of microseconds >= 0 (at most {MAX_TIME_US:.0e}; or none: no launch "
                    f"call); got {format_value(launch)}",
                    s.launch,
                )
        attrs = {k: self.env.value(v) for k, v in s.attrs}
        for k, v in attrs.items():
            try:
                self._check_value(k, v)
            except DaydreamError as exc:
                raise error(str(exc), s) from None
        self.budget.charge(INSERT_COST + _stored_size(name) + sum(map(_stored_size, attrs.values())))
        at = edit.Placement(
            **({"after": anchor} if s.side == "after" else {"before": anchor}), thread=thread, queued=s.queued
        )
        work = Work()
        try:
            new = edit.insert_task(
                graph, s.kind, name, float(duration), at, launch_us=launch, launched=launched, work=work, **attrs
            )
        except DaydreamError as exc:
            raise error(str(exc), s) from None
        finally:
            self.budget.charge(work.tasks)  # the tasks the order's repair went over: known once it is done
        edit.check_links(graph, new)
        self.env.attributes |= set(attrs)
        effect = self._effect(s, "insert")
        effect.added += len(new)
        effect.tasks += len(new)
        effect.duration_delta_us += sum(attrs_of(graph)[n]["duration"] for n in new)
        in_step = self._in_step(new)
        effect.step_tasks += len(in_step)
        effect.step_duration_delta_us += self._step_time(in_step)
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
        if isinstance(on, (int, float)) and not isinstance(on, bool) and finite(on) and on == int(on):
            if s.kind not in ("gpu", "comm", "memcpy", "memset"):
                raise error(
                    f"'on {int(on)}' names a GPU stream; a {s.kind} task runs on a CPU thread: give its name,"
                    " 'cpu:PID/TID'",
                    s.on,
                )
            device = a["thread"].split("/")[0] if a["thread"].startswith("gpu:") else None
            if device is None:
                devices = sorted({t.split("/")[0] for t in thread_names(graph) if t.startswith("gpu:")})
                if len(devices) != 1:
                    raise error("'on STREAM' needs the device: name the thread, e.g. on \"gpu:0/7\"", s.on)
                device = devices[0]
            return f"{device}/{int(on)}"
        raise error(f"'on' takes a stream number, a thread name or a selection, not {type_name(on)}", s.on)

    def visit_Wait(self, s: ast.Wait, script: ast.Script) -> None:
        waiters = self._selection(s.waiters, "wait")
        sources = self._selection(s.sources, "wait ... for")
        effect = self.recorder.effect(s, "wait")
        self.budget.charge(len(waiters) * len(sources))  # an edge per pair: charged before they are made
        work = Work()
        try:
            added = edit.add_waits(self.env.graph, waiters, sources, work)
        except DaydreamError as exc:
            raise self.env.error(str(exc), s) from None
        finally:
            self.budget.charge(work.tasks)
        effect.added += added
        effect.tasks += len(waiters)
        self.state.changed()

    def visit_Schedule(self, s: ast.Schedule, script: ast.Script) -> None:
        self.recorder.effect(s, "schedule")
        if s.policy == "priority":
            assert s.priority is not None
            priority = compile_expression(s.priority, self.env, task_context=True)
            self.state.schedule(
                Policy("priority", PRIORITY_ATTRIBUTE), f"priority {self.loader.source(s.priority)}", priority
            )
        else:
            self.state.schedule(FIFO if s.policy == "fifo" else EARLIEST, s.policy)

    # ---- control flow -------------------------------------------------------------------------------------

    def visit_For(self, s: ast.For, script: ast.Script) -> None:
        graph = self.env.graph
        value = self.env.value(s.iterable)
        if isinstance(value, Selection):
            live = Selection(n for n in value if n in graph)
            self.budget.charge(len(live))
            if s.by is not None:
                items: list[Any] = [group for _, group in group_by(graph, live, s.by)]
            else:
                items = [Selection([n]) for n in in_time_order(graph, live)]
            if not items and not isinstance(s.iterable, ast.Select):
                self.recorder.noop(
                    s.iterable.pos,
                    f"`{clip(self.loader.source(s.iterable), 200)}` holds no task: the loop does not run",
                )
        elif isinstance(value, list):
            if s.by is not None:
                raise self.env.error("'by' groups a selection's tasks; this loop runs over a list", s)
            items = value
        else:
            raise self.env.error(
                f"a loop runs over a selection or a list, not {type_name(value)}; for N times use range(N)", s.iterable
            )
        self._bound_from(s.var, s.iterable)
        try:
            for item in items:
                self.budget.charge(1)  # an iteration is an item gone over, even with no body
                self.env.scope[s.var] = item
                self.run(s.body, script)
        finally:
            self.env.scope.pop(s.var, None)
            self.origins.pop(s.var, None)

    def visit_If(self, s: ast.If, script: ast.Script) -> None:
        # true as in assert: an empty selection or list, 0, none and false are false
        self.run(s.body if bool(self.env.value(s.test)) else s.orelse, script)

    def visit_Include(self, s: ast.Include, script: ast.Script) -> None:
        if len(self._stack) >= MAX_INCLUDE_DEPTH:
            raise self.env.error(f"includes nested more than {MAX_INCLUDE_DEPTH} deep", s)
        included = self.loader.resolve_include(s.path, script, s)
        if included.file in self._stack:
            raise self.env.error(f"include cycle: {' -> '.join([*self._stack, included.file])}", s)
        self.env.attributes |= user_attributes(included, self.loader.resolve_include)
        self.run(included.statements, included)

    # ---- checks and output --------------------------------------------------------------------------------

    def visit_Require(self, s: ast.Require, script: ast.Script) -> None:
        if bool(self.env.value(s.test)):  # true as in assert: a selection holding a task is
            return
        reason = f"{clip(self.loader.source(s.test), 200)} does not hold"
        if s.message is not None:
            m = self.env.value(s.message)
            reason = clip(m if isinstance(m, str) else format_value(m), 500)
        # the script by its library name (amp), as run and compare name it; typed input (<repl>) as what it is
        name = os.path.basename(s.pos.file).removesuffix(".whatif") if not s.pos.file.startswith("<") else "the input"
        raise NotApplicable(name, reason, f"{s.pos.file}:{s.pos.line}: {clip(self.loader.source(s.test), 200)}")

    def visit_Assert(self, s: ast.Assert, script: ast.Script) -> None:
        value = self.env.value(s.test)
        if bool(value):  # an empty selection is false, as everywhere else
            return

        def source(node: Any) -> str:
            return clip(self.loader.source(node), 200)

        detail = ""
        if isinstance(s.test, ast.Binary) and s.test.op not in ("and", "or"):
            left, right = self.env.value(s.test.left), self.env.value(s.test.right)
            detail = (
                f": {source(s.test.left)} is {clip(format_value(left), 200)}, {source(s.test.right)} is"
                f" {clip(format_value(right), 200)}"
            )
        message = f"assertion failed: {source(s.test)}{detail}"
        if s.message is not None:
            m = self.env.value(s.message)
            message += f" ({clip(m if isinstance(m, str) else format_value(m), 500)})"
        raise CheckFailed(f"{s.pos.file}:{s.pos.line}: {message}")

    def visit_Print(self, s: ast.Print, script: ast.Script) -> None:
        values = [self.env.value(v) for v in s.values]
        line = " ".join(v if isinstance(v, str) else format_value(v) for v in values)
        self.budget.charge(len(line) // BULK)
        self.recorder.print(line)


def _stored_size(value: Any) -> int:
    """What a string or list set on a task adds to the graph's data (its size as limits.value_size counts it)."""
    return value_size(value) if isinstance(value, (str, list)) else 0


def _first_line(text: str) -> str:
    line = text.splitlines()[0] if text else text
    return line if len(line) <= 80 else line[:77] + "..."
