"""Static checks of a script, without a trace: names, functions, attributes, kinds, policies, includes.

The interpreter runs these on the whole script before its first statement, so a typo on the last line
fails before anything changes; ``daydream check`` runs them alone.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from daydream.dsl import ast
from daydream.dsl.functions import call_problem, suggest
from daydream.dsl.parse import script_error
from daydream.graph.edit import STRUCTURAL_ATTRIBUTES
from daydream.graph.select import KIND_SELECTORS, TASK_ATTRIBUTES

# Names with a value in every script: the predictions an assert compares.
BUILTIN_VALUES = ("baseline", "measured", "predicted")
POLICIES = ("earliest", "fifo", "priority")
INSERT_KINDS = ("cpu", "dataloader", "gpu", "memcpy", "memset", "comm")


def user_attributes(script: ast.Script, load: Callable[[str, ast.Script, ast.Include], ast.Script] | None = None) -> set[str]:
    """Attributes a script (and what it includes) creates with ``set SEL.attr = ...`` or ``insert ... with attr = ...``."""
    out: set[str] = set()
    seen: set[str] = set()

    def walk(statements: tuple[Any, ...], current: ast.Script) -> None:
        for s in statements:
            if isinstance(s, ast.SetAttr):
                out.add(s.target.attr)
            elif isinstance(s, ast.Insert) or (isinstance(s, ast.Let) and isinstance(s.value, ast.Insert)):
                out.update(k for k, _ in (s if isinstance(s, ast.Insert) else s.value).attrs)
            elif isinstance(s, ast.For):
                walk(s.body, current)
            elif isinstance(s, ast.If):
                walk(s.body + s.orelse, current)
            elif isinstance(s, ast.Include) and load is not None:
                try:
                    inc = load(s.path, current, s)
                except Exception:
                    continue  # reported by check_script with its position
                if inc.file not in seen:
                    seen.add(inc.file)
                    walk(inc.statements, inc)

    walk(script.statements, script)
    return out


def ambiguous(name: str) -> str:
    return (
        f"{name!r} is both a name bound by the script and a task attribute; in a per-task expression (a where-clause, "
        f"a scale factor, a set value, a priority) it would mean the task's {name}: rename the binding"
    )


class Checker:
    """Walks statements in order with the names bound so far; raises the first ScriptError."""

    def __init__(
        self,
        load_include: Callable[[str, ast.Script, ast.Include], ast.Script],
        known: set[str] | None = None,
        attributes: set[str] | None = None,
    ) -> None:
        self.load_include = load_include
        self.known: set[str] = set() if known is None else known
        self.attributes: set[str] = set(TASK_ATTRIBUTES) if attributes is None else attributes
        self.params: dict[str, ast.Param] = {}
        self.stack: list[str] = []

    def check(self, script: ast.Script) -> None:
        self.attributes |= user_attributes(script, self.load_include)
        self.stack.append(script.file)
        try:
            for s in script.statements:
                self.statement(s, script)
        finally:
            self.stack.pop()

    def error(self, message: str, node: Any, script: ast.Script, hint: str | None = None, pos: ast.Pos | None = None) -> Exception:
        return script_error(message, pos or node.pos, script.text, hint)

    def bind(self, name: str, node: Any, script: ast.Script, what: str) -> None:
        if name in KIND_SELECTORS or name in BUILTIN_VALUES:
            raise self.error(f"{what} {name!r}: {name} is a built-in name; choose another name", node, script)
        self.known.add(name)

    def statement(self, s: Any, script: ast.Script) -> None:
        if isinstance(s, ast.Param):
            if s.name in self.params:
                first = self.params[s.name].pos
                raise self.error(f"param {s.name!r} is declared twice (first at {first.file}:{first.line})", s, script)
            self.expr(s.default, script, False)
            self.bind(s.name, s, script, "param")
            self.params[s.name] = s
        elif isinstance(s, ast.Let):
            if isinstance(s.value, ast.Insert):
                self.statement(s.value, script)
            else:
                self.expr(s.value, script, False)
            self.bind(s.name, s, script, "let")
        elif isinstance(s, ast.Scale):
            self.expr(s.target, script, False)
            self.expr(s.factor, script, True)
        elif isinstance(s, ast.SetAttr):
            self.expr(s.target.obj, script, False)
            if s.target.attr in STRUCTURAL_ATTRIBUTES:
                raise self.error(
                    f"cannot set {s.target.attr!r}: it places the task in its thread's order; remove the task and insert a new one instead",
                    s.target, script, pos=s.target.attr_pos,
                )  # fmt: skip
            self.expr(s.value, script, True)
        elif isinstance(s, ast.Remove):
            self.expr(s.target, script, False)
        elif isinstance(s, ast.Insert):
            if s.kind not in INSERT_KINDS:
                hint = "a compute kernel is 'gpu'" if s.kind == "kernel" else suggest(s.kind, INSERT_KINDS)
                raise self.error(f"unknown task kind {s.kind!r}: insert one of {', '.join(INSERT_KINDS)}", s, script, hint, s.kind_pos)
            self.expr(s.name, script, False)
            self.expr(s.anchor, script, False)
            if s.duration is None:
                raise self.error(f"insert {s.kind} {_label(s.name)} needs a duration: add 'duration 10us' (or an expression)", s, script)
            for e in (s.duration, s.on, s.launch):
                if e is not None:
                    self.expr(e, script, False)
            for key, value in s.attrs:
                if key in STRUCTURAL_ATTRIBUTES | {"name", "duration"}:
                    raise self.error(f"insert sets {key!r} itself; it cannot be given with 'with'", value, script)
                self.expr(value, script, False)
        elif isinstance(s, ast.Wait):
            self.expr(s.waiters, script, False)
            self.expr(s.sources, script, False)
        elif isinstance(s, ast.Schedule):
            if s.policy not in POLICIES:
                raise self.error(
                    f"unknown schedule policy {s.policy!r}: use earliest, fifo or priority EXPRESSION", s, script,
                    suggest(s.policy, POLICIES), s.policy_pos,
                )  # fmt: skip
            if s.policy == "priority" and s.priority is None:
                raise self.error("schedule priority needs an expression over task attributes (smallest runs first), e.g. 'schedule priority -bytes'", s, script)  # fmt: skip
            if s.policy != "priority" and s.priority is not None:
                raise self.error(f"schedule {s.policy} takes no expression", s.priority, script)
            if s.priority is not None:
                self.expr(s.priority, script, True)
        elif isinstance(s, ast.For):
            self.expr(s.iterable, script, False)
            if s.by is not None and s.by not in self.attributes:
                raise self.error(f"unknown task attribute {s.by!r} to group by", s, script, suggest(s.by, self.attributes), s.by_pos)
            if s.var in self.known:
                raise self.error(f"loop variable {s.var!r} is already bound; choose another name", s, script)
            self.bind(s.var, s, script, "loop variable")
            try:
                for inner in s.body:
                    if isinstance(inner, ast.Param):
                        raise self.error("param belongs at the top of a script, not inside a loop", inner, script)
                    self.statement(inner, script)
            finally:
                self.known.discard(s.var)
        elif isinstance(s, ast.If):
            self.expr(s.test, script, False)
            for inner in s.body + s.orelse:
                if isinstance(inner, ast.Param):
                    raise self.error("param belongs at the top of a script, not inside an if", inner, script)
                self.statement(inner, script)
        elif isinstance(s, ast.Include):
            included = self.load_include(s.path, script, s)
            if included.file in self.stack:
                chain = " -> ".join(os.path.basename(f) for f in [*self.stack, included.file])
                raise self.error(f"include cycle: {chain}", s, script)
            self.check(included)
        elif isinstance(s, ast.Assert):
            self.expr(s.test, script, False)
            if s.message is not None:
                self.expr(s.message, script, False)
        elif isinstance(s, ast.Print):
            for v in s.values:
                self.expr(v, script, False)

    def expr(self, e: Any, script: ast.Script, task: bool) -> None:
        if isinstance(e, ast.Name):
            if task and e.id in self.attributes:
                if e.id in self.known:
                    raise self.error(ambiguous(e.id), e, script)
                return
            if e.id in self.known or e.id in KIND_SELECTORS or e.id in BUILTIN_VALUES:
                return
            if e.id in self.attributes:
                raise self.error(
                    f"{e.id!r} is a task attribute: it has a value per task, in a where-clause, a scale factor, "
                    f"a set value or a schedule priority; a selection's values are SEL.{e.id}",
                    e, script,
                )  # fmt: skip
            options = self.known | set(KIND_SELECTORS) | set(BUILTIN_VALUES) | (self.attributes if task else set())
            raise self.error(f"unknown name {e.id!r}", e, script, suggest(e.id, options))
        if isinstance(e, ast.Select):
            if e.kind is not None and e.kind not in KIND_SELECTORS:
                raise self.error(
                    f"unknown task kind {e.kind!r}: select one of {', '.join(KIND_SELECTORS)}", e, script,
                    suggest(e.kind, KIND_SELECTORS), e.kind_pos,
                )  # fmt: skip
            if e.where is not None:
                self.expr(e.where, script, True)
        elif isinstance(e, ast.Unary):
            self.expr(e.operand, script, task)
        elif isinstance(e, ast.Binary):
            self.expr(e.left, script, task)
            self.expr(e.right, script, task)
        elif isinstance(e, ast.ListExpr):
            for x in e.items:
                self.expr(x, script, task)
        elif isinstance(e, ast.Project):
            self.expr(e.obj, script, task)
            if e.attr not in self.attributes:
                raise self.error(f"unknown task attribute {e.attr!r}", e, script, suggest(e.attr, self.attributes), e.attr_pos)
        elif isinstance(e, ast.Index):
            self.expr(e.obj, script, task)
            self.expr(e.index, script, task)
        elif isinstance(e, ast.Call):
            problem = call_problem(e.func, len(e.args), [k for k, _ in e.kwargs])
            if problem is not None:
                message, hint, bad = problem
                raise self.error(message, e if bad is None else e.kwargs[bad][1], script, hint)
            for _, value in e.kwargs:
                self.expr(value, script, task)
            for a in e.args:
                self.expr(a, script, task)


def _label(name: ast.Expr) -> str:
    """An inserted task's name as the script wrote it, for messages."""
    return repr(name.value) if isinstance(name, ast.Literal) else "task"
