"""Expressions: compiled once per statement into Python closures over a task's attributes.

A where-clause runs once per task of a 300k-task graph, so an expression becomes nested closures (constant
parts folded at compile time) rather than a tree walked per task. Values: numbers (durations in
microseconds, sizes in bytes), strings, booleans, none, lists and selections. Arithmetic with none gives
none and an ordering comparison with none is false, so ``bytes > 1MB`` is simply false for a CPU task.
"""

from __future__ import annotations

import dataclasses
import math
import operator
from collections.abc import Callable
from typing import Any, Protocol

import networkx as nx

from daydream.dsl import ast
from daydream.dsl.functions import FUNCTIONS, call_problem, type_name
from daydream.dsl.limits import (
    BULK,
    MAX_INT_BITS,
    REGEX_COST,
    RUNNING,
    SELECT_COST,
    STRING_BULK,
    TERMS_PER_UNIT,
    Budget,
    OverBudget,
    TooLarge,
    check_int,
    check_list_size,
    check_string_length,
    finite,
    value_size,
)
from daydream.dsl.regex import BadPattern, compile_pattern, matcher
from daydream.dsl.values import format_int, format_value
from daydream.dsl.visitor import Visitor
from daydream.errors import DaydreamError, did_you_mean
from daydream.files import clip
from daydream.graph import derived
from daydream.graph.adjacency import attrs_of
from daydream.graph.memory import TensorSet
from daydream.graph.select import (
    KIND_SELECTORS,
    Selection,
    candidates,
    count_equal,
    in_time_order,
    kind_set,
    select,
    task_value,
)

Compiled = Callable[[Any], Any]  # task attributes (or None outside a task context) -> value

# The call cache of the functions whose result depends on the graph and their arguments alone (Cost.cached): a
# loop that calls tensor_parallel_pairs() on an unchanged graph walks it once, and is charged the walk once. One per
# graph, valid while no aspect of the graph changes (daydream.graph.derived); emptied when it holds this many calls,
# or this many items in their arguments and results (a selection's tasks, a list's items: about 64 MB), so a loop
# over many arguments keeps its memory bounded. bench/bench_budget.py sets 0 (no cache) to measure what each call's
# work costs.
DEFAULT_CALL_CACHE_ENTRIES = 256
CALL_CACHE_ENTRIES = DEFAULT_CALL_CACHE_ENTRIES
CALL_CACHE_ITEMS = 1_000_000


class Env(Protocol):
    graph: nx.DiGraph
    attributes: set[str]
    budget: Budget

    def lookup(self, name: ast.Name) -> Any: ...

    def is_bound(self, name: str) -> bool: ...

    def error(self, message: str, node: Any, hint: str | None = None) -> Exception: ...

    def selected(self, node: ast.Select, selection: Selection) -> None: ...

    def matched(self, node: ast.Select, count: int) -> None: ...


class Expression:
    """A compiled expression: ``value(task_attrs)``; ``per_task`` says whether it reads task attributes."""

    __slots__ = ("node", "per_task", "value")

    def __init__(self, node: Any, value: Compiled, per_task: bool) -> None:
        self.node = node
        self.value = value
        self.per_task = per_task

    def constant(self) -> Any:
        return self.value(None)


def task_cost(node: Any) -> int:
    """The units a per-task expression costs per task it runs on, so that a unit stays about a microsecond of work
    (bench/bench_budget.py): 1, plus 1 for every TERMS_PER_UNIT operations after the first, plus REGEX_COST for each
    regular expression it matches."""
    operations = regexes = 0
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.Binary, ast.Unary, ast.Call, ast.Project, ast.Index)):
            operations += 1
            regexes += isinstance(n, ast.Binary) and n.op in ("~", "!~")
        if dataclasses.is_dataclass(n):
            stack.extend(
                v for f in dataclasses.fields(n) if not f.name.endswith("pos") for v in _children(getattr(n, f.name))
            )
    return 1 + max(operations - 1, 0) // TERMS_PER_UNIT + REGEX_COST * regexes


def _children(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _children(v)]
    return [value] if dataclasses.is_dataclass(value) else []


def compile_expression(node: Any, env: Env, task_context: bool = False) -> Expression:
    """Compile ``node``. In a task context bare attribute names (``duration``, ``name``...) read the task."""
    fn, per_task = _Compiler(env, task_context).compile(node)
    return Expression(node, fn, per_task)


_ARITH: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "%": operator.mod,
    "**": operator.pow,
}
_ORDER: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
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
        env = self.env

        def make(t: Any) -> list[Any]:
            out = [f(t) for f in fns]
            try:
                size = value_size(out)
            except TooLarge as exc:
                raise _fail(env, str(exc), node, t) from None
            env.budget.charge(size)
            return out

        return make, any(p for _, p in items)

    def visit_Select(self, node: ast.Select) -> tuple[Compiled, bool]:
        return self._select(node)[0], False

    def _select(self, node: ast.Select) -> tuple[Compiled, tuple[str, Any] | None]:
        """The selection's closure, and the ``(ATTR, VALUE)`` of a kind-less where-clause that is exactly
        ``ATTR == VALUE`` (which the index may answer: :meth:`_index_filter`), else None."""
        env = self.env
        try:
            kind_set(node.kind)  # an unknown word fails here, with the statement's position
        except DaydreamError as exc:
            raise env.error(str(exc), node, did_you_mean(node.kind or "", KIND_SELECTORS)) from None
        where = compile_expression(node.where, env, task_context=True) if node.where is not None else None
        lookup = self._lookup(node.where) if where is not None and where.per_task else None
        # a clause that is one ATTR == VALUE: the index's tasks are the selection (the test neither fails nor charges)
        exact = (
            lookup is not None
            and isinstance(node.where, ast.Binary)
            and node.where.op == "=="
            and lookup[1:] == (None, None)
        )

        cost = task_cost(node.where) if where is not None and where.per_task else 1  # units per task tested

        def run(t: Any) -> Selection:
            env.budget.charge(SELECT_COST)
            if where is None or not where.per_task:
                env.budget.charge(len(env.graph))  # the kind test runs on every task
                out = select(env.graph, node.kind) if where is None or bool(where.constant()) else Selection()
            else:
                among = candidates(env.graph, *lookup) if lookup is not None else None
                test = None if exact and among is not None else where.value
                # the clause runs on every task, or on those the index returns (none for an exact lookup)
                env.budget.charge(
                    len(env.graph) * cost if among is None else len(among) * (cost if test is not None else 1)
                )
                out = select(env.graph, node.kind, where=test, among=among)
            env.selected(node, out)
            return out

        return run, (lookup[0] if exact and node.kind is None and lookup is not None else None)

    def _lookup(
        self, where: ast.Expr
    ) -> tuple[tuple[str, Any] | None, tuple[float, bool] | None, tuple[float, bool] | None] | None:
        """What an index can answer of a where-clause: of the tests it begins with, joined by ``and``, an
        ``ATTR == VALUE`` and a lower and an upper bound on ``start`` (each at most once), VALUE and the bounds
        literals or bound names. The clause still runs on every task the index returns; the tasks it leaves out
        are those for which one of these tests is false, and those tests, on a task's attribute and a constant,
        neither fail nor charge the budget for them (a start that is not a number is returned and tested): the
        selection is the same, and so are its errors, as if every task were tested (a loop over a large graph's
        threads selects by thread and time in microseconds instead of a pass over every task)."""
        tests = []
        while isinstance(where, ast.Binary) and where.op == "and":  # `a and b and c` is ((a and b) and c)
            tests.append(where.right)
            where = where.left
        tests.append(where)
        equal: tuple[str, Any] | None = None
        bounds: dict[str, tuple[float, bool]] = {}
        for test in reversed(tests):  # in the order they run
            found = self._indexed_test(test)
            if found is None:
                break
            what, attribute, value, inclusive = found
            if what == "equal" and equal is None:
                equal = (attribute, value)
            elif what in ("low", "high") and attribute == "start" and what not in bounds:
                bounds[what] = (value, inclusive)
            else:
                break
        if equal is None and not bounds:
            return None
        return equal, bounds.get("low"), bounds.get("high")

    def _indexed_test(self, test: ast.Expr) -> tuple[str, str, Any, bool] | None:
        """``ATTR == VALUE`` as ("equal", ATTR, VALUE, True), ``ATTR > VALUE`` as ("low", ATTR, VALUE, False) and so
        on (either side), where ATTR is a task attribute and VALUE a literal or a bound name; else None."""
        if not isinstance(test, ast.Binary) or test.op not in ("==", "<", "<=", ">", ">="):
            return None
        attributes = self.env.attributes
        left, right, op = test.left, test.right, test.op
        if not (isinstance(left, ast.Name) and left.id in attributes):
            left, right = right, left
            op = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}.get(op, op)
        if not (isinstance(left, ast.Name) and left.id in attributes) or self.env.is_bound(left.id):
            return None
        if isinstance(right, ast.Literal):
            value = right.value
        elif isinstance(right, ast.Name) and right.id not in attributes and self.env.is_bound(right.id):
            value = self.env.lookup(right)
        else:
            return None
        if op == "==":
            return "equal", left.id, value, True
        return ("low" if op in (">", ">=") else "high"), left.id, value, op in (">=", "<=")

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
        if op in ("&", "-"):
            fast = self._kind_filter(node) or self._index_filter(node)
            if fast is not None:
                return fast
        lf, lp = self.compile(node.left)
        rf, rp = self.compile(node.right)
        per_task = lp or rp
        env = self.env
        if op == "and":
            return (lambda t: bool(lf(t)) and bool(rf(t))), per_task
        if op == "or":
            return (lambda t: bool(lf(t)) or bool(rf(t))), per_task
        if op in ("|", "&"):
            return (lambda t: self._set_operation(node, lf(t), rf(t), t)), per_task
        if op in ("~", "!~"):
            negate = op == "!~"
            if not rp:
                pattern = rf(None)
                if not isinstance(pattern, str):
                    raise env.error(
                        f"'{op}' matches a regular expression, a string, not {type_name(pattern)}", node.right
                    )
                try:
                    search = matcher(pattern)
                except BadPattern as exc:
                    raise env.error(f"bad regular expression {clip(pattern, 100)!r}: {exc}", node.right) from None

                def match_const(t: Any) -> bool:
                    a = lf(t)
                    if a is None:
                        return negate
                    try:
                        return (not search(a if isinstance(a, str) else _match_text(a, op))) == negate
                    except DaydreamError as exc:
                        raise _fail(env, str(exc), node, t) from None

                return match_const, per_task

            def match(t: Any) -> bool:
                a, p = lf(t), rf(t)
                if not isinstance(p, str):
                    raise _fail(env, f"'{op}' matches a regular expression, a string, not {type_name(p)}", node, t)
                if a is None:
                    return negate
                try:
                    search = compile_pattern(p)
                except BadPattern as exc:
                    raise _fail(env, f"bad regular expression {clip(p, 100)!r}: {exc}", node.right, t) from None
                try:
                    return (not search(a if isinstance(a, str) else _match_text(a, op))) == negate
                except DaydreamError as exc:
                    raise _fail(env, str(exc), node, t) from None

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
                        env.budget.charge(value_size(a))
                        return (_hashable(a) in members) != negate

                return in_const, per_task

            def in_any(t: Any) -> bool:
                a = lf(t)
                if isinstance(a, list):
                    env.budget.charge(value_size(a))
                return (_hashable(a) in _members(rf(t), env, node)) != negate

            return in_any, per_task
        if op in ("==", "!="):
            eq = op == "=="
            budget = env.budget
            return (lambda t: (_equal(lf(t), rf(t), budget)) == eq), per_task
        if op in _ORDER:
            compare = _ORDER[op]
            if not rp:
                right = rf(None)

                def order_const(t: Any) -> bool:
                    a = lf(t)
                    if isinstance(a, list) or isinstance(right, list):
                        env.budget.charge(value_size(a) + value_size(right))
                    try:
                        return compare(a, right)
                    except TypeError:
                        return _order_fail(env, node, op, a, right, t)

                return order_const, per_task

            def order(t: Any) -> bool:
                a, b = lf(t), rf(t)
                if isinstance(a, list) or isinstance(b, list):
                    env.budget.charge(value_size(a) + value_size(b))
                try:
                    return compare(a, b)
                except TypeError:
                    return _order_fail(env, node, op, a, b, t)

            return order, per_task

        return (lambda t: self._arithmetic(node, lf(t), rf(t), t)), per_task

    def _set_operation(self, node: ast.Binary, a: Any, b: Any, t: Any) -> Any:
        """``a | b`` or ``a & b`` (``node.op``), both evaluated."""
        env, op = self.env, node.op
        if isinstance(a, Selection) and isinstance(b, Selection):
            # a union copies both sets; an intersection goes over the smaller
            env.budget.charge((len(a) + len(b) if op == "|" else min(len(a), len(b))) // BULK)
            return a | b if op == "|" else a & b
        word = "union" if op == "|" else "intersection"
        hint = "for booleans use 'or' / 'and'" if isinstance(a, bool) or isinstance(b, bool) else None
        raise _fail(
            env, f"'{op}' ({word}) combines two selections, not {type_name(a)} and {type_name(b)}", node, t, hint
        )

    def _arithmetic(self, node: ast.Binary, a: Any, b: Any, t: Any) -> Any:
        """``a OP b`` for the arithmetic operators (``-`` also of selections), both evaluated."""
        env, op = self.env, node.op
        if a is None or b is None:
            return None
        if op == "-" and isinstance(a, Selection) and isinstance(b, Selection):
            env.budget.charge((len(a) + len(b)) // BULK)
            return a - b
        if isinstance(a, (Selection, bool)) or isinstance(b, (Selection, bool)):
            raise _fail(env, f"cannot {_VERBS[op]} {type_name(a)} and {type_name(b)}", node, t, _set_hint(op, a, b))
        try:
            return arith(op, a, b, env.budget)
        except ZeroDivisionError:
            raise _fail(env, "division by zero", node, t) from None
        except TypeError:
            raise _fail(env, f"cannot {_VERBS[op]} {type_name(a)} and {type_name(b)}", node, t) from None
        except OverflowError:
            raise _fail(env, f"cannot {_VERBS[op]} these numbers: {_TOO_LARGE}", node, t) from None
        except (TooLarge, NotReal) as exc:
            raise _fail(env, str(exc), node, t) from None

    def _index_filter(self, node: ast.Binary) -> tuple[Compiled, bool] | None:
        """``SEL & (select where ATTR == VALUE)`` (either way round) and ``SEL - (select where ATTR == VALUE)`` as a
        test of SEL's tasks' ATTR, where the index of ATTR answers the select: how many tasks it holds (the budget)
        and whether none (its warning) come from the index, so a loop narrowing a step's tasks to a layer's costs what
        the step holds, not every step's tasks of the layer. The same result, errors and warnings as making the
        select, and the budget of the work done (the select's fixed cost and its count, then SEL's tasks); None for
        other expressions (then they are made)."""
        on_left = node.op == "&" and isinstance(node.left, ast.Select)
        on_right = isinstance(node.right, ast.Select)
        if on_left == on_right:
            return None
        env = self.env
        other_node = node.right if on_left else node.left
        if on_left:
            run, equal = self._select(node.left)  # the where-clause compiled (and its errors) as visiting it does
            if equal is None:
                return self._combined(node, self._folded(run), *self.compile(other_node), select_first=True)
            matched = self._count_or_select(node.left, run, equal)
            other, per_task = self.compile(other_node)
        else:
            other, per_task = self.compile(other_node)
            run, equal = self._select(node.right)
            if equal is None:
                return self._combined(node, self._folded(run), other, per_task, select_first=False)
            matched = self._count_or_select(node.right, run, equal)
        if isinstance(matched, Selection):  # the index did not answer: the select was made
            return self._combined(node, (lambda t: matched), other, per_task, select_first=on_left)
        attribute, value = equal
        keep = node.op == "&"

        def by_value(t: Any) -> Any:
            sel = other(t)
            if not isinstance(sel, Selection):  # an error to report (or none - SEL): as the two values give it
                whole = select(env.graph, None, where=lambda a: a.get(attribute) == value)
                a, b = (whole, sel) if on_left else (sel, whole)
                return self._set_operation(node, a, b, t) if keep else self._arithmetic(node, a, b, t)
            env.budget.charge(len(sel) // BULK)  # each of its tasks' value tested
            nodes = attrs_of(env.graph)
            # the index's equality: a task is in it when its value == VALUE (values all hashable, VALUE not NaN)
            return Selection(
                frozenset(u for u in sel if ((a := nodes.get(u)) is not None and a.get(attribute) == value) == keep)
            )

        return by_value, per_task

    def _folded(self, run: Compiled) -> Compiled:
        """A selection's closure evaluated now, as compiling folds it."""
        value = run(None)
        return lambda t: value

    def _count_or_select(self, node: ast.Select, run: Compiled, equal: tuple[str, Any]) -> Selection | int:
        """Charge what making the select charges and give how many tasks it holds (warning where none), from the
        index; where the index does not answer, the select made (``run``, charged once)."""
        env = self.env
        count = count_equal(env.graph, *equal)
        if count is None:
            return run(None)
        env.budget.charge(SELECT_COST + count)  # as the select's own run charges an index's answer
        env.matched(node, count)
        return count

    def _combined(
        self, node: ast.Binary, select_fn: Compiled, other: Compiled, per_task: bool, select_first: bool
    ) -> tuple[Compiled, bool]:
        """The plain ``&`` / ``-`` of a select (already evaluated) and another value."""
        if select_first:
            return (lambda t: self._set_operation(node, select_fn(t), other(t), t)), per_task
        if node.op == "&":
            return (lambda t: self._set_operation(node, other(t), select_fn(t), t)), per_task
        return (lambda t: self._arithmetic(node, other(t), select_fn(t), t)), per_task

    def _kind_word(self, expr: ast.Expr) -> str | None:
        """``expr`` if it is a bare task-kind word (``gpu``, ``cpu``, ...) that names the kind's tasks here."""
        if not isinstance(expr, ast.Name) or expr.id not in KIND_SELECTORS or self.env.is_bound(expr.id):
            return None
        return None if self.task_context and expr.id in self.env.attributes else expr.id

    def _kind_filter(self, node: ast.Binary) -> tuple[Compiled, bool] | None:
        """``SEL & KIND``, ``KIND & SEL`` and ``SEL - KIND`` as a test of SEL's tasks' kinds, without selecting
        every task of the kind (``parents(ar) & gpu`` in a loop over a large graph's all-reduces): the same result
        and errors as combining the two selections, the budget of the work done (SEL's tasks tested). None for other
        expressions."""
        left, right = self._kind_word(node.left), self._kind_word(node.right)
        if (left is None) == (right is None) or (node.op == "-" and left is not None):
            return None
        env = self.env
        word = left if left is not None else right
        assert word is not None
        kinds = kind_set(word)
        assert kinds is not None
        # the kind word is not looked up: a select's fixed cost, in the order the two sides are compiled
        if left is not None:
            env.budget.charge(SELECT_COST)
            other, per_task = self.compile(node.right)
        else:
            other, per_task = self.compile(node.left)
            env.budget.charge(SELECT_COST)
        keep = node.op == "&"

        def by_kind(t: Any) -> Any:
            sel = other(t)
            graph = env.graph
            if isinstance(sel, Selection):
                env.budget.charge(len(sel) // BULK)  # each of its tasks' kind tested
                nodes = attrs_of(graph)
                return Selection(
                    frozenset(u for u in sel if ((a := nodes.get(u)) is not None and a["kind"] in kinds) == keep)
                )
            whole = select(graph, word)  # an error to report (or none - KIND): as the two selections give it
            a, b = (whole, sel) if left is not None else (sel, whole)
            return self._set_operation(node, a, b, t) if keep else self._arithmetic(node, a, b, t)

        return by_kind, per_task

    # postfix
    def visit_Project(self, node: ast.Project) -> tuple[Compiled, bool]:
        f, per_task = self.compile(node.obj)
        env, attr = self.env, node.attr
        if attr not in env.attributes:
            raise env.error(f"unknown task attribute {attr!r}", node, did_you_mean(attr, env.attributes))

        def project(t: Any) -> list[Any]:
            s = f(t)
            if not isinstance(s, Selection):
                raise _fail(env, f"'.{attr}' reads an attribute of a selection's tasks, not of {type_name(s)}", node, t)
            graph = env.graph
            nodes = attrs_of(graph)
            env.budget.charge(len(s))
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
            if isinstance(i, bool) or not isinstance(i, (int, float)) or not finite(i) or i != int(i):
                shown = type_name(i) if isinstance(i, bool) or not isinstance(i, (int, float)) else format_value(i)
                raise _fail(env, f"an index is a whole number, not {shown}", node.index, t)
            i = int(i)
            if isinstance(obj, Selection):
                env.budget.charge(len(obj))
                ordered = in_time_order(env.graph, (n for n in obj if n in env.graph))
                if not -len(ordered) <= i < len(ordered):
                    raise _fail(env, f"index {i} is out of range: the selection holds {len(ordered)} tasks", node, t)
                return Selection([ordered[i]])
            if isinstance(obj, (list, str)):
                if not -len(obj) <= i < len(obj):
                    raise _fail(
                        env, f"index {i} is out of range: the {type_name(obj)[2:]} holds {len(obj)} items", node, t
                    )
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
        checked = self._checked(node, fn)

        def call(t: Any) -> Any:
            values = [f(t) for f, _ in args]
            named = {k: f(t) for k, (f, _) in kwargs}
            size = sum(len(v) for v in (*values, *named.values()) if isinstance(v, (Selection, list, str)))
            env.budget.charge(1 + size)
            for i, v in enumerate(values):
                if isinstance(v, Selection):
                    values[i] = Selection(x for x in v if x in env.graph)
            calls = _call_cache(env.graph) if fn.cost.cached else None
            key = _call_key(fn.name, values, named) if calls is not None else None
            if key is not None and key in calls:  # type: ignore[operator]
                return checked(calls[key], t, ())  # type: ignore[index]  # (its arguments were checked finite)
            # the work, charged before it is done: a call too large for what is left never starts
            cost = fn.cost
            env.budget.charge(cost.per_call + len(env.graph) * cost.per_task + size * cost.per_item)
            RUNNING.append(env.budget)  # the work it charges as it goes (limits.charge_work)
            try:
                result = impl(env.graph, *values, **named)
            except OverBudget:
                raise
            except DaydreamError as exc:
                raise _fail(env, str(exc), node, t, fn.doc) from None
            except RecursionError:
                raise _fail(env, f"{node.func}(): the value is nested too deeply", node, t) from None
            except (ArithmeticError, ValueError, TypeError) as exc:  # a function that let Python's own error out
                raise _fail(env, f"{node.func}(): {clip(str(exc), 200)}", node, t, fn.doc) from None
            finally:
                RUNNING.pop()
            if key is not None:
                calls.keep(key, result, size + (len(result) if isinstance(result, (list, Selection)) else 1))  # type: ignore[union-attr]
            return checked(result, t, (*values, *named.values()))

        return call, per_task

    def _checked(self, node: ast.Call, fn: Any) -> Callable[[Any, Any, tuple[Any, ...]], Any]:
        """What a call gives, charged for its size and refused where it is no number a script can hold: ``checked(
        result, task, arguments)``."""
        env = self.env

        def checked(result: Any, t: Any, arguments: tuple[Any, ...]) -> Any:
            if isinstance(result, (list, Selection)):
                env.budget.charge(len(result))
            elif isinstance(result, TensorSet):
                env.budget.charge(len(result) // BULK)  # numpy over its rows (their bytes summed), in bulk
            elif isinstance(result, complex):
                raise _fail(env, f"{node.func}() gave {_NOT_REAL}", node, t)
            elif isinstance(result, int) and not isinstance(result, bool) and result.bit_length() > MAX_INT_BITS:
                raise _fail(
                    env, f"{node.func}() gave a whole number of more than {MAX_INT_BITS:,} bits: too large", node, t
                )
            elif isinstance(result, float) and not math.isfinite(result) and all(map(finite, arguments)):
                raise _fail(env, f"{node.func}() gave {format_value(result)}: {_TOO_LARGE}", node, t, fn.doc)
            return result

        return checked


class _Calls(dict[Any, Any]):
    """A graph's call cache: call key -> result, with the items its keys and results hold (``held``)."""

    held = 0

    def keep(self, key: Any, result: Any, items: int) -> None:
        if len(self) >= CALL_CACHE_ENTRIES or self.held + items > CALL_CACHE_ITEMS:
            self.clear()  # a loop over many arguments: its memory stays bounded, its calls charged as misses
            self.held = 0
        if items <= CALL_CACHE_ITEMS:
            self[key] = result
            self.held += items


def _call_cache(graph: nx.DiGraph) -> _Calls | None:
    """The graph's call cache as the graph is now (a new one after a change), or None where it is off."""
    if CALL_CACHE_ENTRIES <= 0:
        return None
    calls = derived.cached(graph, "dsl function calls", derived.ASPECTS)
    if calls is None:
        return derived.keep(graph, "dsl function calls", _Calls(), derived.ASPECTS)  # type: ignore[no-any-return]
    return calls  # type: ignore[no-any-return]


def _call_key(name: str, values: list[Any], named: dict[str, Any]) -> Any:
    """A call's key in the call cache: its arguments as they are (a number's type too: text(1) is not text(1.0)),
    a selection by its tasks; None for an argument that has none (tensors)."""

    def frozen(v: Any) -> Any:
        if isinstance(v, Selection):
            return ("selection", tuple(v))
        if isinstance(v, list):
            return ("list", tuple(frozen(x) for x in v))
        if v is None or isinstance(v, (bool, int, float, str)):
            return (type(v).__name__, v)
        raise TypeError

    try:
        return (name, tuple(frozen(v) for v in values), tuple(sorted((k, frozen(v)) for k, v in named.items())))
    except TypeError:
        return None


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


_TOO_LARGE = "the result is past the largest number, about 1.8e308"
_NOT_REAL = "a complex number: not a real number"


class NotReal(DaydreamError):
    """``(-8) ** 0.5``: Python's answer is a complex number, which a script has no use for."""


def arith(op: str, a: Any, b: Any, budget: Budget | None = None) -> Any:
    """``a OP b`` for arithmetic (not none, a selection or a boolean), each result bounded before it is made:
    strings and lists by length (``+`` joins, ``*`` repeats), whole numbers by bits (``**`` estimated first),
    floats finite (an overflow to infinity is an error; a nan or infinity given stays one). Raises TypeError for
    operands the operator does not take, TooLarge past a limit, NotReal for a complex result, ZeroDivisionError and
    OverflowError as Python does."""
    if op in ("+", "*"):
        seq = _sequence_result(op, a, b, budget)
        if seq is not None:
            return seq
    if not _is_number(a) or not _is_number(b):
        raise TypeError(op)
    if op == "**":
        if type(a) is int and type(b) is int and b > 0 and abs(a) > 1 and (abs(a).bit_length() - 1) * b > MAX_INT_BITS:
            raise TooLarge(f"{_shown_number(a)} ** {_shown_number(b)} has more than {MAX_INT_BITS:,} bits: too large")
        result = a**b
        if isinstance(result, complex):
            raise NotReal(f"{_shown_number(a)} ** {_shown_number(b)} is {_NOT_REAL}")
    else:
        result = _ARITH[op](a, b)
    if type(result) is int:
        return check_int(result)
    if isinstance(result, float) and not math.isfinite(result) and finite(a) and finite(b):
        raise TooLarge(_TOO_LARGE)
    return result


def _sequence_result(op: str, a: Any, b: Any, budget: Budget | None) -> Any:
    """``"a" + "b"``, ``[1] + [2]``, ``"ab" * 3``, ``3 * [1]``: the result, its size checked first; None if the
    operands are not a sequence operation."""
    if op == "+":
        if isinstance(a, str) and isinstance(b, str):
            check_string_length(len(a) + len(b))
            if budget is not None:
                budget.charge((len(a) + len(b)) // STRING_BULK)
            return a + b
        if isinstance(a, list) and isinstance(b, list):
            size = value_size(a) + value_size(b)
            check_list_size(size)
            if budget is not None:
                budget.charge(size)
            return a + b
        return None
    seq, n = (a, b) if isinstance(a, (str, list)) else (b, a)
    if not isinstance(seq, (str, list)):
        return None
    if type(n) is not int:
        raise TypeError(op)
    if n <= 0:
        return seq[:0]
    if isinstance(seq, str):
        check_string_length(len(seq) * n)
        if budget is not None:
            budget.charge(len(seq) * n // STRING_BULK)
    else:
        size = value_size(seq) * n
        check_list_size(size)
        if budget is not None:
            budget.charge(size)
    return seq * n


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _shown_number(x: Any) -> str:
    text = clip(format_value(x), 40)
    return f"({text})" if text.startswith("-") else text


def _match_text(value: Any, op: str) -> str:
    """A non-string value matched by ``~``: a number or a boolean as its text (``stream ~ "^7$"``)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return format_int(value)
    if isinstance(value, (bool, float)):
        return str(value)
    raise DaydreamError(f"'{op}' matches a string (or a number as its text), not {type_name(value)}")


def _members(container: Any, env: Env, node: ast.Binary) -> Any:
    if isinstance(container, list):
        env.budget.charge(value_size(container))
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


def _equal(a: Any, b: Any, budget: Budget | None = None) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        if budget is not None:
            budget.charge(value_size(a))  # Python compares item by item, at most a's items
        return bool(a == b)
    return bool(a == b)
