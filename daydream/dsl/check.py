"""Static checks of a script, without a trace: names, functions, attributes, kinds, policies, includes.

The interpreter runs these on the whole script before its first statement, so a typo on the last line
fails before anything changes; ``daydream check`` runs them alone.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

from daydream.dsl import ast
from daydream.dsl.functions import call_problem
from daydream.dsl.limits import MAX_INCLUDE_DEPTH, STATEMENT_COST, Budget, OverBudget
from daydream.dsl.parse import script_error
from daydream.dsl.visitor import Visitor
from daydream.errors import DaydreamError, did_you_mean
from daydream.graph.edit import STRUCTURAL_ATTRIBUTES
from daydream.graph.schema import TASK_ATTRIBUTES
from daydream.graph.select import KIND_SELECTORS

# Names with a value in every script: the predictions an assert compares, and the samples a step processes
# relative to the trace (``scale samples by F`` changes it: a larger batch, gradient accumulation).
BUILTIN_VALUES = ("baseline", "measured", "predicted", "samples", "baseline_span")
SAMPLES = "samples"


def scales_samples(s: ast.Scale) -> bool:
    """``scale samples by F``: the samples per step change, not tasks (``samples`` cannot be rebound, so the bare
    name is always the built-in)."""
    return isinstance(s.target, ast.Name) and s.target.id == SAMPLES


POLICIES = ("earliest", "fifo", "priority")
# the values a script names that are checked without a trace: a string given to an argument or a param of these names
CATALOG_ARGUMENTS = {
    "device": "device",
    "target": "device",
    "dtype": "dtype",
    "link": "link",
    "inter": "link",
    "intra": "link",
}
_TIME_UNITS = ("ns", "us", "ms", "s", "min")
_BYTE_UNITS = ("B", "KB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB")
_UNIT = re.compile(r"\d(ns|us|ms|s|min|B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)$")


def catalog_problem(kind: str, value: str) -> str | None:
    """What is wrong with ``value`` as a ``kind`` (device, dtype, link) of the catalogs, if anything: the message
    ``run`` would give, said by ``check`` already. An empty string (not set) and ``auto`` are the scripts' own."""
    if not value.strip():
        return None
    if kind == "device":
        if value.strip().lower() in ("cpu", "auto"):
            return None
        from daydream.perf.kernels.devices import get_device

        try:
            get_device(value)
        except DaydreamError as exc:
            return str(exc)
    elif kind == "dtype":
        from daydream.trace.sizes import normalize_dtype

        try:
            normalize_dtype(value)
        except ValueError as exc:
            return str(exc)
    elif kind == "link" and value.strip().lower() != "auto":
        from daydream.perf.collectives import resolve_link

        try:
            resolve_link(value)
        except DaydreamError as exc:
            return str(exc)
    return None


def unit_problem(e: Any, wanted: str) -> str | None:
    """What is wrong with a literal quantity where ``wanted`` ("number", "time", "bytes") is expected, if anything:
    ``scale gpu by 2ms`` (a factor is a number), ``duration 10MB``, ``alloc 10ms``."""
    m = _UNIT.search(e.text or "") if isinstance(e, ast.Literal) else None
    if m is None:
        return None
    unit = m.group(1)
    given = "a time" if unit in _TIME_UNITS else "a size in bytes"
    if wanted == "number":
        return f"a scale factor is a number (2, 0.5, 1 / speedup); {e.text} is {given}"
    if wanted == "time" and unit in _BYTE_UNITS:
        return f"a duration is a time (10us, 1.5ms); {e.text} is {given}"
    if wanted == "bytes" and unit in _TIME_UNITS:
        return f"alloc takes a size in bytes (25MB, 1GiB); {e.text} is {given}"
    return None


INSERT_KINDS = ("cpu", "dataloader", "gpu", "memcpy", "memset", "comm")


def user_attributes(
    script: ast.Script, load: Callable[[str, ast.Script, ast.Include], ast.Script] | None = None
) -> set[str]:
    """Attributes a script (and what it includes) creates with ``set SEL.attr = ...`` or ``insert ... with attr =
    ...``."""
    walker = _UserAttributes(load)
    walker.walk(script.statements, script)
    return walker.out


class _UserAttributes(Visitor[None]):
    """The statements that create attributes; the others, and every expression, add none. Each included script is
    walked once, after the script that includes it (not inside it: a chain of includes does not recurse)."""

    def __init__(self, load: Callable[[str, ast.Script, ast.Include], ast.Script] | None) -> None:
        self.load = load
        self.out: set[str] = set()
        self.seen: set[str] = set()
        self.pending: list[ast.Script] = []
        self.walking = False

    def walk(self, statements: tuple[Any, ...], current: ast.Script) -> None:
        if self.walking:
            for s in statements:
                self.visit(s, current)
            return
        self.walking = True
        try:
            for s in statements:
                self.visit(s, current)
            while self.pending:
                inc = self.pending.pop()
                for s in inc.statements:
                    self.visit(s, inc)
        finally:
            self.walking = False

    def generic_visit(self, node: Any, current: ast.Script) -> None:
        pass

    def visit_SetAttr(self, s: ast.SetAttr, current: ast.Script) -> None:
        self.out.add(s.target.attr)

    def visit_Insert(self, s: ast.Insert, current: ast.Script) -> None:
        self.out.update(k for k, _ in s.attrs)

    def visit_Let(self, s: ast.Let, current: ast.Script) -> None:
        self.visit(s.value, current)  # `let x = insert ... with a = 1` creates `a`; an expression creates nothing

    def visit_For(self, s: ast.For, current: ast.Script) -> None:
        self.walk(s.body, current)

    def visit_If(self, s: ast.If, current: ast.Script) -> None:
        self.walk(s.body + s.orelse, current)

    def visit_Include(self, s: ast.Include, current: ast.Script) -> None:
        if self.load is None:
            return
        try:
            inc = self.load(s.path, current, s)
        except Exception:
            return  # reported by check_script with its position
        if inc.file not in self.seen:
            self.seen.add(inc.file)
            self.pending.append(inc)


def ambiguous(name: str) -> str:
    return (
        f"{name!r} is both a name bound by the script and a task attribute; in a per-task expression (a where-clause, "
        f"a scale factor, a set value, a priority) it would mean the task's {name}: rename the binding"
    )


class Checker(Visitor[None]):
    """Walks statements in order with the names bound so far; raises the first ScriptError.

    A statement is visited as ``visit(s, script)``, an expression as ``visit(e, script, task)``: ``task`` says
    whether the expression runs per task (a where-clause, a scale factor, a set value, a priority), where a
    bare task attribute is a name."""

    def __init__(
        self,
        load_include: Callable[[str, ast.Script, ast.Include], ast.Script],
        known: set[str] | None = None,
        attributes: set[str] | None = None,
        budget: Budget | None = None,
    ) -> None:
        self.load_include = load_include
        self.known: set[str] = set() if known is None else known
        self.attributes: set[str] = set(TASK_ATTRIBUTES) if attributes is None else attributes
        self.params: dict[str, ast.Param] = {}
        self.strings: dict[str, ast.Literal] = {}  # names bound to a string literal (a param's default, a let)
        self.stack: list[str] = []
        self.budget = budget if budget is not None else Budget()  # a statement checked costs STATEMENT_COST

    def check(self, script: ast.Script) -> None:
        self.attributes |= user_attributes(script, self.load_include)
        self.stack.append(script.file)
        try:
            for s in script.statements:
                self.statement(s, script)
        finally:
            self.stack.pop()

    def statement(self, s: Any, script: ast.Script) -> None:
        """Check one statement, counted against the budget (a script that includes a script many times checks it
        as many times); running out, or a recursion too deep, is an error at the statement."""
        try:
            self.budget.charge(STATEMENT_COST)
            self.visit(s, script)
        except OverBudget as exc:
            raise script_error(str(exc), s.pos, script.text) from None
        except RecursionError:
            raise script_error(
                "nested too deeply to check (includes in includes, blocks in blocks)", s.pos, script.text
            ) from None

    def error(
        self, message: str, node: Any, script: ast.Script, hint: str | None = None, pos: ast.Pos | None = None
    ) -> Exception:
        return script_error(message, pos or node.pos, script.text, hint)

    def bind(self, name: str, node: Any, script: ast.Script, what: str) -> None:
        if name in KIND_SELECTORS or name in BUILTIN_VALUES:
            raise self.error(f"{what} {name!r}: {name} is a built-in name; choose another name", node, script)
        self.known.add(name)

    def _string(self, name: str, value: Any) -> None:
        """Keep what ``name`` is bound to where it is a string literal (a device, a dtype), for :meth:`_catalog`."""
        if isinstance(value, ast.Literal) and isinstance(value.value, str):
            self.strings[name] = value
        else:
            self.strings.pop(name, None)

    def _catalog(self, argument: str, value: Any, script: ast.Script) -> None:
        """A string (or a name bound to one) given as a device, dtype or link: checked against the catalogs here,
        without a trace, as run would check it."""
        kind = CATALOG_ARGUMENTS.get(argument)
        literal = self.strings.get(value.id) if isinstance(value, ast.Name) else value
        if kind is None or not isinstance(literal, ast.Literal) or not isinstance(literal.value, str):
            return
        problem = catalog_problem(kind, literal.value)
        if problem is not None:
            raise self.error(problem, literal, script)

    def _quantity(self, e: Any, wanted: str, script: ast.Script) -> None:
        problem = unit_problem(e, wanted)
        if problem is not None:
            raise self.error(problem, e, script)

    def _block(self, statements: tuple[Any, ...], script: ast.Script, where: str) -> None:
        for inner in statements:
            if isinstance(inner, ast.Param):
                raise self.error(f"param belongs at the top of a script, not inside {where}", inner, script)
            self.statement(inner, script)

    # ---- statements ---------------------------------------------------------------------------------------

    def visit_Docstring(self, s: ast.Docstring, script: ast.Script) -> None:
        pass

    def visit_Param(self, s: ast.Param, script: ast.Script) -> None:
        if s.name in self.params:
            first = self.params[s.name].pos
            raise self.error(f"param {s.name!r} is declared twice (first at {first.file}:{first.line})", s, script)
        self.visit(s.default, script, False)
        self.bind(s.name, s, script, "param")
        self.params[s.name] = s
        self._string(s.name, s.default)
        self._catalog(s.name, s.default, script)

    def visit_Let(self, s: ast.Let, script: ast.Script) -> None:
        if isinstance(s.value, ast.Insert):
            self.visit(s.value, script)
        else:
            self.visit(s.value, script, False)
        self.bind(s.name, s, script, "let")
        self._string(s.name, s.value)

    def visit_Scale(self, s: ast.Scale, script: ast.Script) -> None:
        if scales_samples(s):
            self.visit(s.factor, script, False)  # one number for the step, not one per task
            return
        self.visit(s.target, script, False)
        self._quantity(s.factor, "number", script)
        windowed = s.after is not None or s.until is not None
        # a stretch of tensors' lives takes one factor for them all; tasks' durations one per task
        self.visit(s.factor, script, not windowed)
        for e in (s.after, s.until):
            if e is not None:
                self.visit(e, script, False)

    def visit_Alloc(self, s: ast.Alloc, script: ast.Script) -> None:
        self._quantity(s.nbytes, "bytes", script)
        for e in (s.nbytes, s.category, s.after, s.until):
            if e is not None:
                self.visit(e, script, False)

    def visit_SetAttr(self, s: ast.SetAttr, script: ast.Script) -> None:
        self.visit(s.target.obj, script, False)
        if s.target.attr in STRUCTURAL_ATTRIBUTES:
            raise self.error(
                f"cannot set {s.target.attr!r}: it places the task in its thread's order; remove the task and insert a"
                " new one instead",
                s.target,
                script,
                pos=s.target.attr_pos,
            )
        self.visit(s.value, script, True)

    def visit_Remove(self, s: ast.Remove, script: ast.Script) -> None:
        self.visit(s.target, script, False)

    def visit_Insert(self, s: ast.Insert, script: ast.Script) -> None:
        if s.kind not in INSERT_KINDS:
            hint = "a compute kernel is 'gpu'" if s.kind == "kernel" else did_you_mean(s.kind, INSERT_KINDS)
            raise self.error(
                f"unknown task kind {s.kind!r}: insert one of {', '.join(INSERT_KINDS)}", s, script, hint, s.kind_pos
            )
        self.visit(s.name, script, False)
        self.visit(s.anchor, script, False)
        if s.duration is None:
            raise self.error(
                f"insert {s.kind} {_label(s.name)} needs a duration: add 'duration 10us' (or an expression)", s, script
            )
        self._quantity(s.duration, "time", script)
        for e in (s.duration, s.on, s.launch):
            if e is not None:
                self.visit(e, script, False)
        for key, value in s.attrs:
            if key in STRUCTURAL_ATTRIBUTES | {"name", "duration"}:
                raise self.error(f"insert sets {key!r} itself; it cannot be given with 'with'", value, script)
            self.visit(value, script, False)

    def visit_Wait(self, s: ast.Wait, script: ast.Script) -> None:
        self.visit(s.waiters, script, False)
        self.visit(s.sources, script, False)

    def visit_Schedule(self, s: ast.Schedule, script: ast.Script) -> None:
        if s.policy not in POLICIES:
            raise self.error(
                f"unknown schedule policy {s.policy!r}: use earliest, fifo or priority EXPRESSION",
                s,
                script,
                did_you_mean(s.policy, POLICIES),
                s.policy_pos,
            )
        if s.policy == "priority" and s.priority is None:
            raise self.error(
                "schedule priority needs an expression over task attributes (smallest runs first), e.g. 'schedule"
                " priority -bytes'",
                s,
                script,
            )
        if s.policy != "priority" and s.priority is not None:
            raise self.error(f"schedule {s.policy} takes no expression", s.priority, script)
        if s.priority is not None:
            self.visit(s.priority, script, True)

    def visit_For(self, s: ast.For, script: ast.Script) -> None:
        self.visit(s.iterable, script, False)
        if s.by is not None and s.by not in self.attributes:
            raise self.error(
                f"unknown task attribute {s.by!r} to group by", s, script, did_you_mean(s.by, self.attributes), s.by_pos
            )
        if s.var in self.known:
            raise self.error(f"loop variable {s.var!r} is already bound; choose another name", s, script)
        self.bind(s.var, s, script, "loop variable")
        try:
            self._block(s.body, script, "a loop")
        finally:
            self.known.discard(s.var)

    def visit_If(self, s: ast.If, script: ast.Script) -> None:
        self.visit(s.test, script, False)
        self._block(s.body + s.orelse, script, "an if")

    def visit_Include(self, s: ast.Include, script: ast.Script) -> None:
        if len(self.stack) >= MAX_INCLUDE_DEPTH:
            raise self.error(
                f"includes nested more than {MAX_INCLUDE_DEPTH} deep:"
                f" {' -> '.join(os.path.basename(f) for f in self.stack)} ...",
                s,
                script,
            )
        included = self.load_include(s.path, script, s)
        if included.file in self.stack:
            chain = " -> ".join(os.path.basename(f) for f in [*self.stack, included.file])
            raise self.error(f"include cycle: {chain}", s, script)
        self.check(included)

    def visit_Require(self, s: ast.Require, script: ast.Script) -> None:
        self.visit(s.test, script, False)
        if s.message is not None:
            self.visit(s.message, script, False)

    def visit_Assert(self, s: ast.Assert, script: ast.Script) -> None:
        self.visit(s.test, script, False)
        if s.message is not None:
            self.visit(s.message, script, False)

    def visit_Print(self, s: ast.Print, script: ast.Script) -> None:
        for v in s.values:
            self.visit(v, script, False)

    # ---- expressions --------------------------------------------------------------------------------------

    def visit_Literal(self, e: ast.Literal, script: ast.Script, task: bool) -> None:
        pass

    def visit_Name(self, e: ast.Name, script: ast.Script, task: bool) -> None:
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
                e,
                script,
            )
        options = self.known | set(KIND_SELECTORS) | set(BUILTIN_VALUES) | (self.attributes if task else set())
        raise self.error(f"unknown name {e.id!r}", e, script, did_you_mean(e.id, options))

    def visit_Select(self, e: ast.Select, script: ast.Script, task: bool) -> None:
        if e.kind is not None and e.kind not in KIND_SELECTORS:
            raise self.error(
                f"unknown task kind {e.kind!r}: select one of {', '.join(KIND_SELECTORS)}",
                e,
                script,
                did_you_mean(e.kind, KIND_SELECTORS),
                e.kind_pos,
            )
        if e.where is not None:
            self.visit(e.where, script, True)

    def visit_Unary(self, e: ast.Unary, script: ast.Script, task: bool) -> None:
        self.visit(e.operand, script, task)

    def visit_Binary(self, e: ast.Binary, script: ast.Script, task: bool) -> None:
        self.visit(e.left, script, task)
        self.visit(e.right, script, task)

    def visit_ListExpr(self, e: ast.ListExpr, script: ast.Script, task: bool) -> None:
        for x in e.items:
            self.visit(x, script, task)

    def visit_Project(self, e: ast.Project, script: ast.Script, task: bool) -> None:
        self.visit(e.obj, script, task)
        if e.attr not in self.attributes:
            raise self.error(
                f"unknown task attribute {e.attr!r}", e, script, did_you_mean(e.attr, self.attributes), e.attr_pos
            )

    def visit_Index(self, e: ast.Index, script: ast.Script, task: bool) -> None:
        self.visit(e.obj, script, task)
        self.visit(e.index, script, task)

    def visit_Call(self, e: ast.Call, script: ast.Script, task: bool) -> None:
        problem = call_problem(e.func, len(e.args), [k for k, _ in e.kwargs])
        if problem is not None:
            message, hint, bad = problem
            raise self.error(message, e if bad is None else e.kwargs[bad][1], script, hint)
        for key, value in e.kwargs:
            self.visit(value, script, task)
            self._catalog(key, value, script)
        for a in e.args:
            self.visit(a, script, task)


def _label(name: ast.Expr) -> str:
    """An inserted task's name as the script wrote it, for messages."""
    return repr(name.value) if isinstance(name, ast.Literal) else "task"
