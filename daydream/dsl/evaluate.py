"""Expressions: compiled once per statement into Python closures over a task's attributes.

A where-clause runs once per task of a 300k-task graph, so an expression becomes nested closures (constant
parts folded at compile time) rather than a tree walked per task. Values: numbers (durations in
microseconds, sizes in bytes), strings, booleans, none, lists and selections. Arithmetic with none gives
none and an ordering comparison with none is false, so ``bytes > 1MB`` is simply false for a CPU task.
"""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Callable
from typing import Any, Protocol

import networkx as nx

from daydream.dsl import ast
from daydream.dsl.functions import FUNCTIONS, call_problem, suggest, type_name
from daydream.dsl.visitor import Visitor
from daydream.errors import DaydreamError
from daydream.graph.adjacency import attrs_of
from daydream.graph.select import KIND_SELECTORS, Selection, in_time_order, kind_set, select, task_value

Compiled = Callable[[Any], Any]  # task attributes (or None outside a task context) -> value


class Env(Protocol):
    graph: nx.DiGraph
    attributes: set[str]

    def lookup(self, name: ast.Name) -> Any: ...

    def is_bound(self, name: str) -> bool: ...

    def error(self, message: str, node: Any, hint: str | None = None) -> Exception: ...

    def selected(self, node: ast.Select, selection: Selection) -> None: ...


class Expression:
    """A compiled expression: ``value(task_attrs)``; ``per_task`` says whether it reads task attributes."""

    __slots__ = ("node", "per_task", "value")

    def __init__(self, node: Any, value: Compiled, per_task: bool) -> None:
        self.node = node
        self.value = value
        self.per_task = per_task

    def constant(self) -> Any:
        return self.value(None)


def compile_expression(node: Any, env: Env, task_context: bool = False) -> Expression:
    """Compile ``node``. In a task context bare attribute names (``duration``, ``name``...) read the task."""
    fn, per_task = _Compiler(env, task_context).compile(node)
    return Expression(node, fn, per_task)


@functools.lru_cache(maxsize=256)
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


_ARITH: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "%": operator.mod, "**": operator.pow,
}  # fmt: skip
_ORDER: dict[str, Callable[[Any, Any], bool]] = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
_VERBS = {"+": "add", "-": "subtract", "*": "multiply", "/": "divide", "%": "take the remainder of", "**": "raise"}


class _Compiler(Visitor[tuple[Compiled, bool]]):
    """Each ``visit_<Node>`` returns the node's closure and whether it reads the task; ``compile`` folds constants."""

    def __init__(self, env: Env, task_context: bool) -> None:
        self.env = env
        self.task_context = task_context

    def compile(self, node: Any) -> tuple[Compiled, bool]:
        fn, per_task = self.visit(node)
        if not per_task:
            value = fn(None)  # fold: evaluated once, here, with its errors raised at this statement
            return (lambda t: value), False
        return fn, per_task

    # leaves
    def visit_Literal(self, node: ast.Literal) -> tuple[Compiled, bool]:
        v = node.value
        return (lambda t: v), False

    def visit_Name(self, node: ast.Name) -> tuple[Compiled, bool]:
        name = node.id
        if self.task_context and name in self.env.attributes:
            if self.env.is_bound(name):
                from daydream.dsl.check import ambiguous

                raise self.env.error(ambiguous(name), node)
            if name == "end":
                return (lambda t: task_value(t, "end")), True
            return (lambda t: t.get(name)), True
        value = self.env.lookup(node)
        return (lambda t: value), False

    def visit_ListExpr(self, node: ast.ListExpr) -> tuple[Compiled, bool]:
        items = [self.compile(x) for x in node.items]
        fns = [f for f, _ in items]
        return (lambda t: [f(t) for f in fns]), any(p for _, p in items)

    def visit_Select(self, node: ast.Select) -> tuple[Compiled, bool]:
        env = self.env
        try:
            kind_set(node.kind)  # an unknown word fails here, with the statement's position
        except DaydreamError as exc:
            raise env.error(str(exc), node, suggest(node.kind or "", KIND_SELECTORS)) from None
        where = compile_expression(node.where, env, task_context=True) if node.where is not None else None

        def run(t: Any) -> Selection:
            if where is None:
                out = select(env.graph, node.kind)
            elif not where.per_task:
                out = select(env.graph, node.kind) if bool(where.constant()) else Selection()
            else:
                out = select(env.graph, node.kind, where=where.value)
            env.selected(node, out)
            return out

        return run, False

    # operators
    def visit_Unary(self, node: ast.Unary) -> tuple[Compiled, bool]:
        f, per_task = self.compile(node.operand)
        env = self.env
        if node.op == "not":
            return (lambda t: not bool(f(t))), per_task
        sign = -1 if node.op == "-" else 1

        def signed(t: Any) -> Any:
            v = f(t)
            if v is None:
                return None
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise _fail(env, f"cannot negate {type_name(v)}", node, t)
            return sign * v

        return signed, per_task

    def visit_Binary(self, node: ast.Binary) -> tuple[Compiled, bool]:
        op = node.op
        lf, lp = self.compile(node.left)
        rf, rp = self.compile(node.right)
        per_task = lp or rp
        env = self.env
        if op == "and":
            return (lambda t: bool(lf(t)) and bool(rf(t))), per_task
        if op == "or":
            return (lambda t: bool(lf(t)) or bool(rf(t))), per_task
        if op in ("|", "&"):
            combine = operator.or_ if op == "|" else operator.and_

            def setop(t: Any) -> Any:
                a, b = lf(t), rf(t)
                if isinstance(a, Selection) and isinstance(b, Selection):
                    return combine(a, b)
                word = "union" if op == "|" else "intersection"
                hint = "for booleans use 'or' / 'and'" if isinstance(a, bool) or isinstance(b, bool) else None
                raise _fail(env, f"'{op}' ({word}) combines two selections, not {type_name(a)} and {type_name(b)}", node, t, hint)

            return setop, per_task
        if op in ("~", "!~"):
            negate = op == "!~"
            if not rp:
                pattern = rf(None)
                if not isinstance(pattern, str):
                    raise env.error(f"'{op}' matches a regular expression, a string, not {type_name(pattern)}", node.right)
                try:
                    rx = _regex(pattern)
                except re.error as exc:
                    raise env.error(f"bad regular expression {pattern!r}: {exc}", node.right) from None
                search = rx.search

                def match_const(t: Any) -> bool:
                    a = lf(t)
                    if a is None:
                        return negate
                    return (search(a if isinstance(a, str) else str(a)) is None) == negate

                return match_const, per_task

            def match(t: Any) -> bool:
                a, p = lf(t), rf(t)
                if not isinstance(p, str):
                    raise _fail(env, f"'{op}' matches a regular expression, a string, not {type_name(p)}", node, t)
                if a is None:
                    return negate
                return (_regex(p).search(a if isinstance(a, str) else str(a)) is None) == negate

            return match, per_task
        if op in ("in", "not in"):
            negate = op == "not in"
            if not rp:
                container = rf(None)
                members = _members(container, env, node)

                def in_const(t: Any) -> bool:
                    a = lf(t)
                    try:
                        return (a in members) != negate
                    except TypeError:
                        return (_hashable(a) in members) != negate

                return in_const, per_task

            def in_any(t: Any) -> bool:
                return (_hashable(lf(t)) in _members(rf(t), env, node)) != negate

            return in_any, per_task
        if op in ("==", "!="):
            eq = op == "=="
            return (lambda t: (_equal(lf(t), rf(t))) == eq), per_task
        if op in _ORDER:
            compare = _ORDER[op]
            if not rp:
                right = rf(None)

                def order_const(t: Any) -> bool:
                    a = lf(t)
                    try:
                        return compare(a, right)
                    except TypeError:
                        return _order_fail(env, node, op, a, right, t)

                return order_const, per_task

            def order(t: Any) -> bool:
                a, b = lf(t), rf(t)
                try:
                    return compare(a, b)
                except TypeError:
                    return _order_fail(env, node, op, a, b, t)

            return order, per_task
        arith = _ARITH[op]

        def arithmetic(t: Any) -> Any:
            a, b = lf(t), rf(t)
            if a is None or b is None:
                return None
            if op == "-" and isinstance(a, Selection) and isinstance(b, Selection):
                return a - b
            if isinstance(a, (Selection, bool)) or isinstance(b, (Selection, bool)):
                raise _fail(env, f"cannot {_VERBS[op]} {type_name(a)} and {type_name(b)}", node, t, _set_hint(op, a, b))
            try:
                return arith(a, b)
            except ZeroDivisionError:
                raise _fail(env, "division by zero", node, t) from None
            except (TypeError, OverflowError):
                raise _fail(env, f"cannot {_VERBS[op]} {type_name(a)} and {type_name(b)}", node, t) from None

        return arithmetic, per_task

    # postfix
    def visit_Project(self, node: ast.Project) -> tuple[Compiled, bool]:
        f, per_task = self.compile(node.obj)
        env, attr = self.env, node.attr
        if attr not in env.attributes:
            raise env.error(f"unknown task attribute {attr!r}", node, suggest(attr, env.attributes))

        def project(t: Any) -> list[Any]:
            s = f(t)
            if not isinstance(s, Selection):
                raise _fail(env, f"'.{attr}' reads an attribute of a selection's tasks, not of {type_name(s)}", node, t)
            graph = env.graph
            nodes = attrs_of(graph)
            return [task_value(nodes[n], attr) for n in in_time_order(graph, (n for n in s if n in nodes))]

        return project, per_task

    def visit_Index(self, node: ast.Index) -> tuple[Compiled, bool]:
        of, op_ = self.compile(node.obj)
        xf, xp = self.compile(node.index)
        env = self.env

        def index(t: Any) -> Any:
            obj, i = of(t), xf(t)
            if obj is None:
                return None
            if isinstance(i, bool) or not isinstance(i, (int, float)) or i != int(i):
                raise _fail(env, f"an index is a whole number, not {type_name(i)}", node.index, t)
            i = int(i)
            if isinstance(obj, Selection):
                ordered = in_time_order(env.graph, (n for n in obj if n in env.graph))
                if not -len(ordered) <= i < len(ordered):
                    raise _fail(env, f"index {i} is out of range: the selection holds {len(ordered)} tasks", node, t)
                return Selection([ordered[i]])
            if isinstance(obj, (list, str)):
                if not -len(obj) <= i < len(obj):
                    raise _fail(env, f"index {i} is out of range: the {type_name(obj)[2:]} holds {len(obj)} items", node, t)
                return obj[i]
            raise _fail(env, f"cannot index {type_name(obj)}", node, t)

        return index, op_ or xp

    def visit_Call(self, node: ast.Call) -> tuple[Compiled, bool]:
        env = self.env
        problem = call_problem(node.func, len(node.args), [k for k, _ in node.kwargs])
        if problem is not None:
            raise env.error(problem[0], node, problem[1])
        fn = FUNCTIONS[node.func]
        args = [self.compile(a) for a in node.args]
        kwargs = [(k, self.compile(v)) for k, v in node.kwargs]
        per_task = any(p for _, p in args) or any(p for _, (_, p) in kwargs)
        impl = fn.impl

        def call(t: Any) -> Any:
            values = [f(t) for f, _ in args]
            named = {k: f(t) for k, (f, _) in kwargs}
            for i, v in enumerate(values):
                if isinstance(v, Selection):
                    values[i] = Selection(x for x in v if x in env.graph)
            try:
                return impl(env.graph, *values, **named)
            except DaydreamError as exc:
                raise _fail(env, str(exc), node, t, fn.doc) from None

        return call, per_task


def _fail(env: Env, message: str, node: Any, task: Any, hint: str | None = None) -> Exception:
    if task is not None:
        label = f"{task.get('kind')} {task.get('name')!r}"
        return env.error(f"{message} (for task {label})", node, hint)
    return env.error(message, node, hint)


def _order_fail(env: Env, node: ast.Binary, op: str, a: Any, b: Any, task: Any) -> bool:
    if a is None or b is None:
        return False
    raise _fail(env, f"cannot compare {type_name(a)} and {type_name(b)} with '{op}'", node, task)


def _set_hint(op: str, a: Any, b: Any) -> str | None:
    if isinstance(a, Selection) and isinstance(b, Selection):
        return "selections combine with '|' (union), '&' (intersection) and '-' (difference)"
    if isinstance(a, Selection) or isinstance(b, Selection):
        return "for the tasks' values write SEL.duration (a list), for their total sum(SEL.duration)"
    return None


def _members(container: Any, env: Env, node: ast.Binary) -> Any:
    if isinstance(container, list):
        try:
            return frozenset(_hashable(x) for x in container)
        except TypeError:
            return container
    if isinstance(container, str):
        return container
    if isinstance(container, Selection):
        raise env.error("'in' tests membership in a list or a string; to test tasks use '&' (intersection)", node)
    raise env.error(f"'in' needs a list or a string on the right, not {type_name(container)}", node)


def _hashable(value: Any) -> Any:
    return tuple(_hashable(v) for v in value) if isinstance(value, list) else value


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, list) or isinstance(b, list):
        return _hashable(a) == _hashable(b)
    return bool(a == b)


def format_value(value: Any, limit: int = 8) -> str:
    """A value as a person reads it in a print or an assertion message."""
    if isinstance(value, Selection):
        return f"{len(value)} task{'s' if len(value) != 1 else ''}"
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, list):
        shown = ", ".join(format_value(v) for v in value[:limit])
        return f"[{shown}{', ...' if len(value) > limit else ''}]" + (f" ({len(value)} items)" if len(value) > limit else "")
    return str(value)
